"""Where Apache Kafka's jars are looked for, and the broker `--broker auto` picks."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm.embedded import kafka_jars
from mm.embedded.clusters import resolve_broker
from mm.embedded.kafka_jars import KAFKA_VERSION, REQUIRED, fetch_jars, find_jars, require_jars
from mm.errors import MirrorError, UsageError

pytestmark = pytest.mark.unit


def _fill(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in REQUIRED:
        (path / f"{name}-{KAFKA_VERSION}.jar").write_bytes(b"")
    return path


@pytest.fixture
def no_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $MM_KAFKA_JARS, an empty user cache: returns the cache directory."""
    monkeypatch.delenv(kafka_jars.ENV_JARS, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "mm" / f"kafka-{KAFKA_VERSION}"


def test_without_jars_auto_is_the_embedded_broker_and_kafka_says_how(no_jars: Path) -> None:
    assert find_jars() is None
    assert resolve_broker("auto") == "tansu"
    assert resolve_broker("kafka") == "kafka"  # chosen: its start then names the fix
    with pytest.raises(MirrorError, match=r"`mm embedded fetch-kafka`") as raised:
        require_jars()
    assert str(no_jars) in str(raised.value)
    with pytest.raises(UsageError, match=r"--broker 'zookeeper': expected one of auto, kafka"):
        resolve_broker("zookeeper")


def test_the_cache_counts_only_when_filled_for_this_pom(no_jars: Path) -> None:
    _fill(no_jars)
    assert find_jars() is None  # no stamp: an interrupted copy
    (no_jars / ".pom.sha256").write_text("0" * 64 + "\n")
    assert find_jars() is None  # another pom's jars
    digest = kafka_jars._pom_digest()
    (no_jars / ".pom.sha256").write_text(digest + "\n")
    assert find_jars() == no_jars
    assert resolve_broker("auto") == "kafka"
    (no_jars / f"kafka-tools-{KAFKA_VERSION}.jar").unlink()
    assert find_jars() is None


def test_a_given_directory_is_used_as_is_or_refused_by_name(
    no_jars: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine"
    monkeypatch.setenv(kafka_jars.ENV_JARS, str(mine))
    with pytest.raises(MirrorError, match=rf"MM_KAFKA_JARS={mine} does not hold") as raised:
        find_jars()
    assert all(f"{n}-{KAFKA_VERSION}.jar" in str(raised.value) for n in REQUIRED)
    _fill(mine)
    assert find_jars() == mine  # no stamp needed: the user's own copy


def test_fetch_without_maven_names_what_to_install(
    no_jars: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(no_jars.parent))  # no mvn there
    with pytest.raises(MirrorError, match=r"Maven \('mvn'\) is needed .* install Maven 3\.8\+"):
        fetch_jars()
    digest = kafka_jars._pom_digest()
    _fill(no_jars)
    (no_jars / ".pom.sha256").write_text(digest + "\n")
    assert fetch_jars() == no_jars  # filled already: Maven is not asked
