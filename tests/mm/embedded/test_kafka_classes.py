"""Kafka's class archive (mm.embedded.kafka_classes): where it is kept, that only a
whole one is published, and that a broker then starts from it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mm.embedded import kafka_classes
from mm.embedded.kafka_classes import ENV_SETTING, archive_path, publish
from mm.embedded.kraft import KRaftCluster, java_binary, java_cmd

JAVA = shutil.which("java") or "java"


def _jars(tmp_path: Path) -> Path:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "kafka_2.13-4.3.1.jar").write_bytes(b"x" * 10)
    return jars


@pytest.mark.unit
def test_the_archive_is_kept_per_setting_and_keyed_by_the_jars(tmp_path: Path) -> None:
    jars = _jars(tmp_path)
    assert archive_path(JAVA, jars, {"HOME": "/h", ENV_SETTING: "off"}) is None
    auto = archive_path(JAVA, jars, {"HOME": "/h"})
    assert auto is not None and auto.parent == Path("/h/.cache/mm/kafka-classes")
    assert auto.suffix == ".jsa"
    cache = archive_path(JAVA, jars, {"XDG_CACHE_HOME": "/c"})
    assert cache is not None and cache.parent == Path("/c/mm/kafka-classes")
    own = archive_path(JAVA, jars, {ENV_SETTING: str(tmp_path / "own")})
    assert own is not None and own.parent == tmp_path / "own" and own.name == auto.name
    # another jar set (an upgrade, another copy) is another archive
    (jars / "kafka-tools-4.3.1.jar").write_bytes(b"y")
    other = archive_path(JAVA, jars, {"HOME": "/h"})
    assert other is not None and other.name != auto.name
    assert archive_path("no-such-java-binary", jars, {"HOME": "/h"}) is None


@pytest.mark.unit
def test_a_jvm_maps_the_archive_only_once_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jars = _jars(tmp_path)
    monkeypatch.setenv(ENV_SETTING, str(tmp_path / "archives"))
    assert java_cmd(jars, "kafka.Kafka") == [java_binary(), "-cp", f"{jars}/*", "kafka.Kafka"]
    archive = archive_path(java_binary(), jars, os.environ)
    assert archive is not None
    archive.parent.mkdir()
    archive.write_bytes(b"archive")
    cmd = java_cmd(jars, "kafka.Kafka", heap="256m")
    assert f"-XX:SharedArchiveFile={archive}" in cmd
    assert cmd.index(f"-XX:SharedArchiveFile={archive}") < cmd.index("-cp")
    # JVM warnings on stderr: a tool's stdout is its output
    assert "-Xlog:all=warning:stderr" in cmd
    # the builder's own options replace it
    assert java_cmd(jars, "kafka.Kafka", java_options=["-Dx=1"])[:2] == [java_binary(), "-Dx=1"]
    monkeypatch.setenv(ENV_SETTING, "off")
    assert not any("SharedArchiveFile" in a for a in java_cmd(jars, "kafka.Kafka"))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("returncode", "content", "kept"),
    [(0, b"whole", True), (143, b"whole", True), (-9, b"part", False), (1, b"x", False),
     (None, b"x", False), (0, b"", False)],
)  # fmt: skip
def test_only_the_archive_of_a_jvm_that_exited_normally_is_published(
    tmp_path: Path, returncode: int | None, content: bytes, kept: bool
) -> None:
    partial, archive = tmp_path / "k.123.partial", tmp_path / "k.jsa"
    partial.write_bytes(content)
    assert publish(partial, archive, returncode) is kept
    assert archive.is_file() is kept
    assert not partial.exists()  # never left behind, published or not
    if kept:
        assert archive.read_bytes() == content


def test_a_broker_starts_from_the_archive_built_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_SETTING, str(tmp_path / "archives"))
    built = subprocess.run(
        [sys.executable, "-m", "mm.embedded.kafka_classes"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    archive = Path(built.stdout.strip().splitlines()[-1])
    assert archive.parent == tmp_path / "archives" and archive.stat().st_size > 1_000_000
    assert list(archive.parent.iterdir()) == [archive]  # no partial file left
    assert kafka_classes.build() == archive  # built once: found, not built again

    cluster = KRaftCluster("classes-test", run_dir=tmp_path)
    cluster.start()
    try:
        assert cluster.pid is not None
        maps = Path(f"/proc/{cluster.pid}/maps").read_text()
        assert str(archive) in maps
    finally:
        cluster.stop()
