"""Spark's driver JVM started from a class-data-sharing (CDS) archive.

Every mm command that uses Spark starts a JVM that loads some ten thousand classes
from Spark's jars before its first query runs: about 6-7 s of a 2-core host's time
(measured: SparkSession ready in 6.5-7.1 s, a first job 2.9-3.5 s; with an archive
3.2-3.8 s and 1.5-1.7 s), paid again at every restart (a crash, a deploy, a kill).
The JVM can map those classes from an archive instead (dynamic CDS, JDK 13+).

``mm.spark.class.archive`` names the directory archives are kept in (``auto``:
``$XDG_CACHE_HOME/mm/spark-classes``, else ``~/.cache/mm/spark-classes``; ``off``:
none is used or built). One archive per key: the JVM, Spark's jars and the driver
settings that change what is loaded or how it is laid out (:func:`archive_key`).

Where no archive exists yet, :func:`java_options` starts a builder in the
background at the lowest CPU priority and the command goes on without one. The
builder (``python -m mm.spark_classes``) runs a short Spark workload shaped like
mm's (a Python streaming data source into ``foreachBatch``, a batch job) in a JVM
of its own that writes the archive as it exits; the file is renamed into place
only after that JVM has exited normally. A partly written archive crashes the JVM
that maps it, so one is never published. A JVM whose classpath or version does
not match an archive ignores it (CDS checks), and the key keeps such cases apart
anyway. JVM warnings go to stderr, never to a command's stdout (``--json``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: driver settings that change which classes load or how the heap is laid out
KEY_SETTINGS = (
    "spark.jars",
    "spark.jars.packages",
    "spark.driver.extraClassPath",
    "spark.driver.memory",
    "spark.driver.extraJavaOptions",
)
SUFFIX = ".jsa"
#: a builder's lock older than this is taken to be dead (a build takes about 30 s)
STALE_LOCK_SECONDS = 600.0
#: another key's files unused this long are removed when an archive is built
PRUNE_AGE_SECONDS = 3 * 24 * 3600.0
AUTO, OFF = "auto", "off"


def archive_dir(setting: str, env: Mapping[str, str], name: str = "spark-classes") -> Path | None:
    """Where archives are kept for the ``mm.spark.class.archive`` value; None: off.
    ``auto`` is ``name`` under mm's cache directory."""
    if setting == OFF:
        return None
    if setting != AUTO:
        return Path(setting)
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or "~", ".cache")
    return Path(os.path.expanduser(cache)) / "mm" / name


def archive_key(java: str, jars: Path, spark_conf: Mapping[str, str]) -> str:
    """A name for the archive that fits this JVM binary, Spark's jars (names, sizes,
    times: a reinstalled venv is another classpath) and :data:`KEY_SETTINGS`."""
    h = hashlib.sha256()
    real = os.path.realpath(java)
    st = os.stat(real)
    h.update(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    h.update(f"{os.path.realpath(jars)}\0".encode())
    for entry in sorted(os.scandir(jars), key=lambda e: e.name):
        est = entry.stat()
        h.update(f"{entry.name}\0{est.st_size}\0{est.st_mtime_ns}\0".encode())
    for k in KEY_SETTINGS:
        h.update(f"{k}={spark_conf.get(k, '')}\0".encode())
    return h.hexdigest()[:24]


def with_java_options(spark_conf: Mapping[str, str], options: list[str]) -> dict[str, str]:
    """``spark_conf`` with ``options`` added to the driver's JVM options."""
    out = dict(spark_conf)
    given = out.get("spark.driver.extraJavaOptions", "").strip()
    out["spark.driver.extraJavaOptions"] = " ".join([given, *options]).strip()
    return out


#: JVM log warnings (CDS's among them) on stderr: stdout may be a command's JSON
LOG_TO_STDERR = ["-Xlog:disable", "-Xlog:all=warning:stderr"]


def use_options(archive: Path) -> list[str]:
    # a JVM that crashes writes its report here, not into the command's directory
    crash = archive.parent / "jvm-crash-%p.log"
    return [
        f"-XX:SharedArchiveFile={archive}",
        "-Xshare:auto",
        f"-XX:ErrorFile={crash}",
        *LOG_TO_STDERR,
    ]


def set_aside(archive: Path) -> None:
    """Never use ``archive`` again (a JVM failed to start with it); kept for a look."""
    try:
        os.replace(archive, archive.with_suffix(".refused"))
    except OSError:
        pass


def dump_options(target: Path) -> list[str]:
    # its many "class skipped" warnings are noise: only errors
    return [f"-XX:ArchiveClassesAtExit={target}", "-Xlog:disable", "-Xlog:all=error:stderr"]


def lock_is_stale(text: str, age: float) -> bool:
    """A builder lock (its content: the builder's pid) whose builder is gone."""
    try:
        pid = int(text.strip())
    except ValueError:
        return True
    from mm.embedded.procs import pid_alive

    return age > STALE_LOCK_SECONDS or not pid_alive(pid)


def _take_lock(lock: Path) -> bool:
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                text, age = lock.read_text(), time.time() - lock.stat().st_mtime
            except OSError:
                continue
            if not lock_is_stale(text, age):
                return False
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def java_options(
    setting: str, spark_conf: Mapping[str, str], java: str
) -> tuple[list[str], Path | None]:
    """The driver JVM options for a SparkSession built with ``spark_conf``, and the
    archive they map: the archive's where one is ready; else none, and a builder is
    started (one per key at a time). A failure here only slows a start: never raised."""
    directory = archive_dir(setting, os.environ)
    if directory is None:
        return [], None
    try:
        from pyspark.find_spark_home import _find_spark_home

        jars = Path(_find_spark_home()) / "jars"
        key = archive_key(java, jars, spark_conf)
        archive = directory / f"{key}{SUFFIX}"
        if archive.is_file():
            os.utime(archive)  # in use: kept by prune()
            return use_options(archive), archive
        if archive.with_suffix(".refused").exists():
            return [], None  # one failed already: not built again for this key
        directory.mkdir(parents=True, exist_ok=True)
        _start_builder(directory, key, spark_conf)
    except Exception:  # an archive is an optimisation: its failure only slows a start
        return [], None
    return [], None


def _start_builder(directory: Path, key: str, spark_conf: Mapping[str, str]) -> None:
    lock = directory / f"{key}.building"
    if not _take_lock(lock):
        return
    log = open(directory / f"{key}.log", "w")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mm.spark_classes", "--build", str(directory), key],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not stopped with the command's process group
            preexec_fn=lambda: os.nice(19),
            close_fds=True,
        )
    except Exception:
        lock.unlink(missing_ok=True)
        raise
    finally:
        log.close()
    lock.write_text(str(proc.pid))  # the builder owns the lock from here on
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(dict(spark_conf)).encode())
    proc.stdin.close()


# --- the builder ---------------------------------------------------------------------


def _workload(spark: Any, work: Path) -> None:
    """What mm's jobs load: a Python streaming data source read into foreachBatch
    with a checkpoint, Python UDF-free batch work, a Python batch data source."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )

    class _Reader(DataSourceReader):
        def read(self, partition: Any) -> Iterator[tuple[int]]:
            yield (1,)

    class _Stream(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
            return {"n": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(0)] if end["n"] > start["n"] else []

        def read(self, partition: Any) -> Iterator[tuple[int]]:
            yield (1,)

        def commit(self, end: dict[str, int]) -> None:
            pass

    class _Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "mm_class_archive"

        def schema(self) -> str:
            return "n long"

        def reader(self, schema: Any) -> DataSourceReader:
            return _Reader()

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return _Stream()

    spark.dataSource.register(_Source)
    rows: list[int] = []
    query = (
        spark.readStream.format("mm_class_archive")
        .load()
        .writeStream.foreachBatch(lambda df, _id: rows.extend(r.n for r in df.collect()))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    spark.read.format("mm_class_archive").load().count()
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()


def build(directory: Path, key: str, spark_conf: Mapping[str, str]) -> bool:
    """Run the workload in a JVM that writes its loaded classes to an archive as it
    exits; publish the archive only once that JVM has exited normally."""
    import shutil
    import tempfile

    from mm.spark_session import DEFAULTS, require_java, spark_python

    require_java()
    os.environ["PYSPARK_PYTHON"] = spark_python(os.environ.get("PYSPARK_PYTHON"))
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    partial = directory / f"{key}.{os.getpid()}.partial"
    work = Path(tempfile.mkdtemp(prefix="mm-spark-classes-"))
    conf = with_java_options({**DEFAULTS, **spark_conf}, dump_options(partial))
    builder = SparkSession.builder.appName("mm-class-archive")
    for k, v in conf.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        _workload(spark, work)
        spark.stop()
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        if proc is None or proc.stdin is None:
            return False
        proc.stdin.close()  # the gateway JVM exits at the end of its stdin, dumping
        if proc.wait(300) != 0 or not partial.is_file() or partial.stat().st_size == 0:
            return False
        os.replace(partial, directory / f"{key}{SUFFIX}")
        return True
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)


def prune(directory: Path, keep: str, now: float, max_age: float = PRUNE_AGE_SECONDS) -> None:
    """Remove other keys' files not used for ``max_age`` seconds (a venv installed
    again is a new key; its old archive, some 170 MB, is never mapped again)."""
    for entry in directory.iterdir():
        if entry.name.startswith(keep) or entry.name.endswith(".building"):
            continue
        try:
            if now - entry.stat().st_mtime > max_age:
                entry.unlink()
        except OSError:
            pass


def ensure(setting: str = AUTO, timeout: float = 600.0) -> Path | None:
    """The archive for mm's default Spark settings, built now if there is none (an
    image build or a test session runs this once); None where off or not built."""
    from mm.spark_session import DEFAULTS, require_java

    directory = archive_dir(setting, os.environ)
    if directory is None:
        return None
    from pyspark.find_spark_home import _find_spark_home

    key = archive_key(require_java(), Path(_find_spark_home()) / "jars", DEFAULTS)
    archive = directory / f"{key}{SUFFIX}"
    directory.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    while not archive.is_file():
        if _take_lock(directory / f"{key}.building"):
            _build_locked(directory, key, DEFAULTS)
            break
        if time.monotonic() > deadline:  # another builder still at it
            return None
        time.sleep(1.0)
    return archive if archive.is_file() else None


def _build_locked(directory: Path, key: str, spark_conf: Mapping[str, str]) -> bool:
    try:
        ok = build(directory, key, spark_conf)
        if ok:
            prune(directory, key, time.time())
        return ok
    finally:
        (directory / f"{key}.building").unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    """``python -m mm.spark_classes``: build the archive for the default settings
    now unless it exists, and print its path. ``--build DIR KEY`` (Spark settings as
    JSON on stdin): the background builder :func:`java_options` starts."""
    if argv[:1] == ["--build"]:
        directory, key = Path(argv[1]), argv[2]
        ok = _build_locked(directory, key, json.loads(sys.stdin.read() or "{}"))
        print(f"class archive {'written' if ok else 'not written'}: {directory / key}{SUFFIX}")
        return 0 if ok else 1
    setting = argv[0] if argv else AUTO
    archive = ensure(setting)
    print(archive or f"no class archive (mm.spark.class.archive={setting})")
    return 0 if archive is not None or setting == OFF else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
