"""The tests' command helper (tests/support/cli.py): commands that end by themselves run
in the test worker's process unless something they read differs from what the worker's
Spark JVM gives them."""

from __future__ import annotations

import pytest
from support import cli


@pytest.mark.unit
def test_what_pyspark_sets_in_its_drivers_environment_keeps_commands_in_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PySpark sets SPARK_BUFFER_SIZE and SPARK_AUTH_SOCKET_TIMEOUT in the environment of
    any process that starts a SparkContext and never removes them; a test that built a
    SparkSession of its own must not send its worker's later commands to processes."""
    monkeypatch.delenv("MMTEST_IN_PROCESS", raising=False)
    monkeypatch.delenv("SPARK_BUFFER_SIZE", raising=False)
    monkeypatch.delenv("SPARK_AUTH_SOCKET_TIMEOUT", raising=False)
    before = cli._env_differences(cli.mm_env())
    monkeypatch.setenv("SPARK_BUFFER_SIZE", "65536")
    monkeypatch.setenv("SPARK_AUTH_SOCKET_TIMEOUT", "15")
    assert cli._env_differences(cli.mm_env()) == before
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a-test-key")  # a task would read it
    assert "AWS_ACCESS_KEY_ID" in cli._env_differences(cli.mm_env())
    why = cli._why_a_process(["mirror", "-c", "mm.properties", "--once"], cli.mm_env(), False)
    assert why is not None and why.startswith("environment: ") and "AWS_ACCESS_KEY_ID" in why
    assert cli._why_a_process(["mirror", "-c", "mm.properties"], cli.mm_env(), False) == (
        "long-running"
    )
    assert cli._why_a_process(["verify", "-c", "mm.properties"], {}, True) == "asked for"
