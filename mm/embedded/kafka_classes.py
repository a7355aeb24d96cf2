"""Apache Kafka's JVMs (broker, storage tool, MirrorMaker 2, Kafka's tools) started
from a class-data-sharing (CDS) archive.

Every local broker start runs two JVMs, the storage tool that formats its
directory and the broker, and each loads thousands of classes from Kafka's jars
first. Mapped from an archive instead, a broker answered in 3.1 s instead of
4.7-4.9 and its start took 3.9-4.0 CPU s instead of 6.0-6.5; the storage tool's
run 1.3-1.5 CPU s instead of 1.7-2.3 (same 2-core host, alternating runs). That is
paid by every `mm embedded up`, every drill and demo, and every broker a test starts.

One archive per JVM binary and jar directory (names, sizes, times: the key of
:func:`mm.spark_classes.archive_key`), kept in ``$MM_KAFKA_CLASS_ARCHIVE``
(``auto``: ``~/.cache/mm/kafka-classes`` or under ``$XDG_CACHE_HOME``; ``off``: none).
:func:`java_options` maps it where it exists and never builds one; :func:`build`
(``python -m mm.embedded.kafka_classes``, run by ``./dev``) starts a broker that
writes the classes it loaded while serving a short workload as it exits, and
publishes the file only after that JVM exited normally: a partly written archive
crashes the JVM that maps it. A JVM whose classpath does not match an archive
ignores it (CDS checks it); the key keeps such cases apart anyway.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from mm import spark_classes
from mm.errors import MirrorError

ENV_SETTING: Final = "MM_KAFKA_CLASS_ARCHIVE"
SUFFIX: Final = ".jsa"
# seconds the broker may take to exit once stopped: it writes the archive then
DUMP_GRACE: Final = 180.0


def archive_path(java: str, jars: Path, env: Mapping[str, str]) -> Path | None:
    """Where the archive for ``java`` (a path or a name on PATH) and ``jars`` is
    kept; None when the setting is ``off`` or ``java`` is not found."""
    setting = env.get(ENV_SETTING, spark_classes.AUTO).strip() or spark_classes.AUTO
    directory = spark_classes.archive_dir(setting, env, name="kafka-classes")
    binary = shutil.which(java)
    if directory is None or binary is None:
        return None
    return directory / f"{spark_classes.archive_key(binary, jars, {})}{SUFFIX}"


def java_options(java: str, jars: Path) -> list[str]:
    """JVM options mapping the archive where one is ready; else none. A failure
    here only slows a start: never raised."""
    try:
        archive = archive_path(java, jars, os.environ)
        if archive is None or not archive.is_file():
            return []
    except OSError:
        return []
    return spark_classes.use_options(archive)


def _workload(bootstrap: str) -> None:
    """What brokers mostly serve here: a topic created, records written in a
    transaction, read by a group that commits, groups described."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from mm.embedded.probe import QUIET_LOGGER

    base: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": QUIET_LOGGER, "log_level": 0}
    admin = AdminClient(base)
    admin.create_topics([NewTopic("mm-class-archive", 3, 1)])["mm-class-archive"].result(60)
    producer = Producer({**base, "transactional.id": "mm-class-archive"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("mm-class-archive", value=b"x", key=str(i).encode(), partition=i % 3)
    producer.commit_transaction(60)
    consumer = Consumer(
        {
            **base,
            "group.id": "mm-class-archive",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["mm-class-archive"])
    seen = 0
    for _ in range(60):
        seen += len(consumer.consume(30, 1.0))
        if seen >= 30:
            break
    consumer.commit(asynchronous=False)
    consumer.close()
    admin.describe_consumer_groups(["mm-class-archive"])["mm-class-archive"].result(60)


def build() -> Path | None:
    """The archive for this host's java and Kafka's jars, built now if there is none;
    None where the setting is off. Raises :class:`MirrorError` when none was built."""
    from mm.embedded.kafka_jars import require_jars
    from mm.embedded.kraft import KRaftCluster, java_binary

    jars = require_jars()
    archive = archive_path(java_binary(), jars, os.environ)
    if archive is None or archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="mm-kafka-classes-") as run_dir:
        cluster = KRaftCluster(
            "classes", run_dir=Path(run_dir), java_options=spark_classes.dump_options(partial)
        )
        try:
            cluster.start()
            _workload(cluster.bootstrap_servers)
        finally:
            proc = cluster.process
            # the JVM writes the archive as it exits: beyond the usual grace on a
            # loaded host (a CI run's broker was killed after 20 s, archive unwritten)
            cluster.stop(DUMP_GRACE)
        returncode = None if proc is None else proc.returncode
        if not publish(partial, archive, returncode):
            raise MirrorError(
                f"the broker writing Kafka's class archive exited with {returncode}, not"
                " normally: no archive kept (Kafka's JVMs start without one)"
            )
    return archive


def publish(partial: Path, archive: Path, returncode: int | None) -> bool:
    """Rename the JVM's ``partial`` archive into place when that JVM exited normally
    (0, or 143 after its SIGTERM shutdown): only then is the file whole. Otherwise
    remove it."""
    try:
        if returncode not in (0, 143) or not partial.is_file() or partial.stat().st_size == 0:
            return False
        os.replace(partial, archive)
        return True
    finally:
        partial.unlink(missing_ok=True)


def main() -> int:
    try:
        archive = build()
    except MirrorError as exc:
        print(f"mm.embedded.kafka_classes: {exc}", file=sys.stderr)
        return 1
    print(archive if archive is not None else f"none ({ENV_SETTING}=off)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
