"""The driver JVM's class archive (mm.spark_classes): where it is kept, what makes it
another archive, when a builder's lock is dead, and that a JVM which cannot start
from an archive starts without it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mm.config.settings import parse_settings
from mm.errors import ConfigError
from mm.spark_classes import (
    archive_dir,
    archive_key,
    lock_is_stale,
    prune,
    use_options,
    with_java_options,
)


@pytest.mark.unit
def test_archive_dir_follows_the_setting_and_the_cache_home() -> None:
    assert archive_dir("off", {"HOME": "/h"}) is None
    assert archive_dir("auto", {"HOME": "/h"}) == Path("/h/.cache/mm/spark-classes")
    assert archive_dir("auto", {"HOME": "/h", "XDG_CACHE_HOME": "/c"}) == Path(
        "/c/mm/spark-classes"
    )
    assert archive_dir("/srv/mm/jvm", {}) == Path("/srv/mm/jvm")


@pytest.mark.unit
def test_the_setting_takes_auto_off_or_an_absolute_directory() -> None:
    assert parse_settings({})["spark.class.archive"] == "auto"
    assert parse_settings({"spark.class.archive": " OFF "})["spark.class.archive"] == "off"
    assert parse_settings({"spark.class.archive": "/var/cache/mm"})["spark.class.archive"] == (
        "/var/cache/mm"
    )
    with pytest.raises(ConfigError) as err:
        parse_settings({"spark.class.archive": "cache/mm"})
    assert "auto, off or an absolute directory path" in str(err.value)


@pytest.mark.unit
def test_the_key_changes_with_the_jars_the_jvm_and_the_driver_settings(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"x" * 10)
    java = tmp_path / "java"
    java.write_bytes(b"#!")
    base = archive_key(str(java), jars, {"spark.master": "local[2]"})
    # settings that do not change what the driver loads leave the key alone
    assert archive_key(str(java), jars, {"spark.master": "local[*]"}) == base
    for setting in ("spark.driver.memory", "spark.jars", "spark.driver.extraJavaOptions"):
        assert archive_key(str(java), jars, {setting: "x"}) != base, setting
    (jars / "extra.jar").write_bytes(b"y")  # a jar added: another classpath
    with_extra = archive_key(str(java), jars, {})
    assert with_extra != archive_key(str(java), tmp_path, {})
    os.utime(jars / "extra.jar", ns=(1, 1))  # a reinstall: same names, other times
    reinstalled = archive_key(str(java), jars, {})
    assert reinstalled != with_extra
    java.write_bytes(b"#!/another/jvm")  # the JVM upgraded in place
    assert archive_key(str(java), jars, {}) != reinstalled


@pytest.mark.unit
def test_java_options_are_added_to_the_drivers_own() -> None:
    options = use_options(Path("/c/k.jsa"))
    conf = with_java_options({"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}, options)
    value = conf["spark.driver.extraJavaOptions"]
    assert value.startswith("-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile=/c/k.jsa")
    # warnings to stderr: a command's stdout may be JSON
    assert "-Xlog:all=warning:stderr" in value and "-Xshare:auto" in value
    assert with_java_options({}, ["-Xa"]) == {"spark.driver.extraJavaOptions": "-Xa"}


@pytest.mark.unit
def test_a_builder_lock_is_stale_when_its_builder_is_gone_or_too_old() -> None:
    assert not lock_is_stale(str(os.getpid()), 1.0)
    assert lock_is_stale(str(os.getpid()), 10_000.0)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert lock_is_stale(str(gone.pid), 1.0)
    assert lock_is_stale("not a pid", 1.0)


@pytest.mark.unit
def test_prune_removes_other_keys_unused_for_days(tmp_path: Path) -> None:
    now = time.time()
    names = ["keep.jsa", "keep.log", "old.jsa", "old.log", "new.jsa", "old.building"]
    for name in names:
        (tmp_path / name).write_text("x")
        os.utime(tmp_path / name, (now - 10 * 86400, now - 10 * 86400))
    os.utime(tmp_path / "new.jsa", (now - 60, now - 60))
    prune(tmp_path, "keep", now)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "keep.jsa",
        "keep.log",
        "new.jsa",
        "old.building",
    ]


_SESSION = """
import sys
from pathlib import Path
from pyspark import SparkContext
from mm.spark_session import build_spark
spark = build_spark("archive-test", {"spark.master": "local[1]"}, sys.argv[1])
assert spark.range(3).count() == 3
maps = Path(f"/proc/{SparkContext._gateway.proc.pid}/maps").read_text()
print("mapped" if ".jsa" in maps and sys.argv[1] in maps else "not mapped")
spark.stop()
"""


def _session(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _SESSION, str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_new_jvm_maps_the_archive_and_starts_without_a_broken_one(tmp_path: Path) -> None:
    """The archive ./dev builds is the one a new driver JVM maps. A broken one (a
    truncated file crashes the JVM mapping it) is set aside, and Spark starts without
    it, in the same command."""
    from mm.spark_classes import ensure

    built = ensure()
    assert built is not None, "python -m mm.spark_classes built no archive"
    own = tmp_path / "classes"
    own.mkdir()
    (own / built.name).write_bytes(built.read_bytes())
    ok = _session(own)
    assert ok.returncode == 0 and ok.stdout.strip() == "mapped", ok.stdout + ok.stderr[-3000:]
    with (own / built.name).open("r+b") as f:
        f.truncate(built.stat().st_size // 3)
    broken = _session(own)
    assert broken.returncode == 0, broken.stdout + broken.stderr[-3000:]
    assert broken.stdout.strip().endswith("not mapped"), broken.stdout
    assert not (own / built.name).exists() and (own / built.name).with_suffix(".refused").exists()
    assert "Traceback" not in broken.stderr, broken.stderr[-3000:]
    # set aside: the next start neither maps it nor builds another for this key
    again = _session(own)
    assert again.returncode == 0 and again.stdout.strip() == "not mapped", again.stderr[-3000:]
    assert not list(own.glob("*.building")), list(own.iterdir())
