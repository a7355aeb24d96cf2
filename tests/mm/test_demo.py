"""The README's main command: `mm demo` mirrors and verifies on local clusters: Apache
Kafka (what `--broker auto` picks where its jars are, as in this suite) and the
embedded broker."""

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("broker", "label"), [("auto", "Apache Kafka 4.3.1"), ("tansu", "embedded broker Tansu")]
)
def test_demo_mirrors_and_verifies(broker: str, label: str) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "MM_LOG_FORMAT": "json"}
    assert env.get("MM_KAFKA_JARS"), "the suite runs with Apache Kafka's jars (./dev test)"
    r = subprocess.run(
        [sys.executable, "-m", "mm", "demo", "--records", "3000", "--broker", broker],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert f"({label})" in r.stdout.splitlines()[1]
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
