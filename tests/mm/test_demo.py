"""The README's main command: `mm demo` mirrors and verifies on embedded clusters."""

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_demo_mirrors_and_verifies() -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "MM_LOG_FORMAT": "json"}
    r = subprocess.run(
        [sys.executable, "-m", "mm", "demo", "--records", "3000"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "mirrored 3000 records" in r.stdout
    assert "OK: A.orders on B is an exact copy" in r.stdout
    rows = re.findall(r"^\s+(\d)\s+(\d+)\s+(\d+)\s+(yes|NO)\s+(\d+)/(\d+)$", r.stdout, re.M)
    assert [row[0] for row in rows] == ["0", "1", "2"]
    for _, source, target, identical, exact, total in rows:
        assert (source, target, identical, exact, total) == ("1000", "1000", "yes", "1000", "1000")


def test_spark_requires_java(monkeypatch: pytest.MonkeyPatch) -> None:
    from mm.errors import MirrorError
    from mm.spark_session import require_java

    monkeypatch.setenv("JAVA_HOME", "/nonexistent-jdk")
    with pytest.raises(MirrorError, match="Java 17 or newer is required"):
        require_java()
