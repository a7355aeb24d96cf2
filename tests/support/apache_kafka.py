"""The real Apache Kafka 4.3.1 and MirrorMaker 2, from the jars of mm/embedded/kafka-pom.xml.

``./dev`` copies those jars once into a cache directory (`mm embedded fetch-kafka`)
and exports ``MM_KAFKA_JARS``. Everything here runs them
with ``java -cp "$MM_KAFKA_JARS/*"``:

* :class:`KRaftBroker` - a one-node KRaft cluster (broker and controller),
  PLAINTEXT on a free port, in its own directory;
* :class:`MirrorMaker2` - MM2 in dedicated mode for clusters A and B (A->B);
* :class:`ConnectStandaloneCheckpoint` - Connect standalone running only MM2's
  ``MirrorCheckpointConnector``;
* :func:`remote_cluster_utils_translate` - MM2's client library
  (``RemoteClusterUtils.translateOffsets``) from a one-file Java program.

Without the jars the tests that use them fail (never skip): the interop with the
real MirrorMaker 2 is what they prove.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm.embedded import kraft, procs
from mm.embedded.kafka_jars import ENV_JARS, KAFKA_VERSION, missing_jars
from mm.embedded.kraft import write_log4j2, write_properties

T = TypeVar("T")

PROBE_TOPIC = "mm-test-broker-probe"
PROBE_GROUP = "mm-test-broker-probe"

BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"


class KafkaJarsMissingError(RuntimeError):
    """The Apache Kafka / MirrorMaker 2 jars are not there: the test fails."""


def kafka_jars() -> Path:
    """The directory of the Apache Kafka 4.3.1 / MirrorMaker 2 jars (``$MM_KAFKA_JARS``)."""
    value = os.environ.get(ENV_JARS, "")
    how = (
        "run the tests through `./dev test` (it fetches the jars once with Maven and sets "
        f"{ENV_JARS}), or set {ENV_JARS} to a directory filled by "
        "`mm embedded fetch-kafka --dir DIR`"
    )
    if not value:
        raise KafkaJarsMissingError(
            f"{ENV_JARS} is not set: these tests run the real Apache Kafka {KAFKA_VERSION} and "
            f"MirrorMaker 2 from their jars; {how}"
        )
    path = Path(value)
    missing = missing_jars(path)
    if missing:
        raise KafkaJarsMissingError(
            f"{ENV_JARS}={value} does not hold the Apache Kafka {KAFKA_VERSION} jars "
            f"({', '.join(missing)} missing); {how}"
        )
    return path


#: flags of every JVM the tests start from Kafka's jars (brokers, MirrorMaker 2,
#: Kafka's tools): short-lived, so C1 and the serial collector cost far less CPU
#: (:data:`mm.embedded.kraft.LEAN_JVM_FLAGS`). The benches set it to () to run
#: brokers and MirrorMaker 2 with the JVM's defaults, as users do.
JVM_FLAGS: tuple[str, ...] = kraft.LEAN_JVM_FLAGS


def java_cmd(*args: str, heap: str | None = None, log4j2: Path | None = None) -> list[str]:
    """``java <JVM_FLAGS> [-Xmx] [-Dlog4j2.configurationFile] -cp "$MM_KAFKA_JARS/*" <args>``."""
    return kraft.java_cmd(kafka_jars(), *args, heap=heap, log4j2=log4j2, flags=JVM_FLAGS)


def consumer_groups_cli(bootstrap: str, *args: str, timeout: float = 120.0) -> str:
    """Apache Kafka's ``kafka-consumer-groups.sh`` with ``args``, as an operator runs it
    (its class from the jars); its output. Fails the test when it exits non-zero."""
    main = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    return kafka_tool("kafka-consumer-groups.sh", main, bootstrap, *args, timeout=timeout)


def configs_cli(bootstrap: str, *args: str, timeout: float = 120.0) -> str:
    """Apache Kafka's ``kafka-configs.sh`` with ``args`` (see :func:`consumer_groups_cli`)."""
    return kafka_tool(
        "kafka-configs.sh", "kafka.admin.ConfigCommand", bootstrap, *args, timeout=timeout
    )


def kafka_tool(name: str, main: str, bootstrap: str, *args: str, timeout: float = 120.0) -> str:
    """Kafka's tool ``name`` (class ``main`` from the jars) with ``--bootstrap-server
    bootstrap args``; its output. Fails the test when it exits non-zero."""
    cmd = java_cmd(main, "--bootstrap-server", bootstrap, *args)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{name} {' '.join(args)}: exit {done.returncode}\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no {path})"


class _JavaProcess:
    """A JVM child in its own session, output to ``<dir>/<name>.out``."""

    name = "java"

    def __init__(self, workdir: Path | None) -> None:
        self._own_dir = workdir is None
        self.dir = Path(tempfile.mkdtemp(prefix=f"mm-{self.name}-")) if workdir is None else workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.out_path = self.dir / f"{self.name}.out"
        self.log_path = self.dir / f"{self.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def _spawn(self, argv: list[str]) -> None:
        self.proc = procs.spawn(argv, log_path=self.out_path)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def describe(self) -> str:
        state = "not started"
        if self.proc is not None:
            rc = self.proc.poll()
            state = "running" if rc is None else f"exited {rc}"
        return (
            f"{self.name} in {self.dir} ({state})\n--- {self.out_path.name} (tail)\n"
            f"{_tail(self.out_path, 20)}\n--- {self.log_path.name} (tail)\n{_tail(self.log_path)}"
        )

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM, wait up to ``grace`` s, then SIGKILL (the whole process group).
        A directory this object made itself (no ``workdir`` given) is removed."""
        if self.proc is not None:
            procs.stop_child(self.proc, grace)
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --- broker ---------------------------------------------------------------------------


BIND_RETRIES = 3


class KRaftBroker(_JavaProcess):
    """A one-node Apache Kafka cluster (KRaft, broker + controller), PLAINTEXT."""

    name = "broker"

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        heap: str = "768m",
        extra: Mapping[str, object] | None = None,
        format_args: Sequence[str] = (),
        wait: bool = True,
        timeout: float = 90.0,
    ) -> None:
        """Format and start the broker; with ``wait`` (default) return once it is ready,
        else call :meth:`wait_ready` (start several brokers at once that way).
        ``extra`` overrides or adds server properties; ``format_args`` are added to
        ``kafka-storage format`` (SCRAM users: ``--add-scram``)."""
        super().__init__(workdir)
        self._heap, self._extra, self._format_args = heap, extra or {}, tuple(format_args)
        self._bind_retries = BIND_RETRIES
        self._configure()
        self._spawn(self._argv)
        if wait:
            self.wait_ready(timeout)

    def _configure(self) -> None:
        """New free ports, server properties and freshly formatted storage."""
        shutil.rmtree(self.dir / "data", ignore_errors=True)
        self.port = procs.free_port()
        self.controller_port = procs.free_port()
        while self.controller_port == self.port:
            self.controller_port = procs.free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        props: dict[str, object] = {
            **kraft.one_node_props(self.port, self.controller_port, self.dir / "data"),
            **self._listener_props(),
            **self._extra,
        }
        self.config = write_properties(self.dir / "server.properties", props)
        log4j2 = write_log4j2(self.dir / "log4j2.properties", self.log_path)
        kraft.format_storage(kafka_jars(), self.config, log4j2, *self._format_args)
        self._argv = java_cmd("kafka.Kafka", str(self.config), heap=self._heap, log4j2=log4j2)

    def _lost_port_race(self) -> bool:
        """The first start exited because another process took a port picked for it
        (free a moment before: other workers start brokers and Spark at the same time)."""
        return self._bind_retries > 0 and not self.alive() and kraft.BIND_FAILED in self.log_text()

    def _listener_props(self) -> dict[str, object]:
        """PLAINTEXT on :attr:`port` (the one the tests and the probe use), CONTROLLER."""
        return {
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        }

    def freeze(self) -> None:
        """SIGSTOP the broker (its JVM has a session of its own) and wait until every
        thread of it is stopped: the signal is delivered asynchronously, and a broker
        still running for a moment answers the request sent next. Its sockets stay
        open and answer nothing, as a hung host's do. :meth:`thaw` resumes it."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10.0
        while True:
            states = set()
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                try:
                    stat = (task / "stat").read_text()
                except FileNotFoundError:  # a thread that ended meanwhile
                    continue
                states.add(stat[stat.rindex(")") + 2])
            if states <= {"T", "t"}:
                return
            assert time.monotonic() < deadline, f"broker not stopped: thread states {states}"
            time.sleep(0.05)

    def thaw(self) -> None:
        """SIGCONT: the broker frozen by :meth:`freeze` runs again."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the broker (a crash: no controlled shutdown, no flush); its data stays."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the JVM's group
            self.proc.wait(30)

    def restart(self, timeout: float = 120.0) -> None:
        """Start the broker again on the same ports and log directories (after
        :meth:`kill`, Kafka recovers its logs first) and wait until it is ready."""
        if self.alive():
            raise RuntimeError(f"the Kafka broker in {self.dir} is still running")
        self._spawn(self._argv)
        self.wait_ready(timeout)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Until metadata answers and a probe group commit sticks (else stop, raise).

        Right after start the group coordinator answers COORDINATOR_LOAD_IN_PROGRESS
        and AdminClient reports it per partition without retrying; with
        ``offsets.topic.num.partitions=1`` one probe covers every group.
        """
        deadline = time.monotonic() + timeout
        # no client before the port listens (librdkafka logs every refused connection)
        while not procs.port_open("127.0.0.1", self.port) and time.monotonic() < deadline:
            if not self.alive():
                break
            time.sleep(0.1)
        admin = self.admin()
        retry = False
        try:
            self._probe(admin, deadline, timeout)
        except BaseException:
            retry = self._lost_port_race()
            if not retry:
                self.stop()
                raise
        finally:
            del admin  # no client left retrying a stopped broker
        if retry:
            self._bind_retries -= 1
            self.log_path.unlink(missing_ok=True)
            self._configure()
            self._spawn(self._argv)
            self.wait_ready(timeout)
        self._bind_retries = 0  # a restart keeps its ports: never new ones then

    def _probe(self, admin: AdminClient, deadline: float, timeout: float) -> None:
        last: object = None
        while True:
            if not self.alive():
                raise RuntimeError(f"the Kafka broker exited during start:\n{self.describe()}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Kafka broker was not ready within {timeout:.0f}s (last: {last}):\n"
                    f"{self.describe()}"
                )
            try:
                md = admin.list_topics(timeout=5)
                if PROBE_TOPIC not in md.topics:
                    admin.create_topics([NewTopic(PROBE_TOPIC, 1, 1)])[PROBE_TOPIC].result(15)
                    continue
                tp = TopicPartition(PROBE_TOPIC, 0, 0)
                res = admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(PROBE_GROUP, [tp])]
                )[PROBE_GROUP].result(15)
                errors = [t.error for t in res.topic_partitions or [] if t.error is not None]
                if errors:
                    last = errors
                    time.sleep(0.2)
                    continue
                got = admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(PROBE_GROUP)]
                )[PROBE_GROUP].result(15)
                if any(
                    t.topic == PROBE_TOPIC and t.offset == 0 for t in got.topic_partitions or []
                ):
                    return
                last = f"probe commit not visible: {got.topic_partitions}"
            except Exception as exc:  # not up yet: try again
                last = repr(exc)  # not the exception: its frames would keep the client alive
            time.sleep(0.2)


# --- MirrorMaker 2 --------------------------------------------------------------------------


def mm2_properties(
    source_bootstrap: str,
    target_bootstrap: str,
    *,
    topics: str,
    groups: str,
    tasks_max: int = 1,
    exactly_once: bool = False,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """A connect-mirror-maker.properties for clusters A and B: A->B on, B->A off."""
    props: dict[str, object] = {
        "clusters": "A, B",
        "A.bootstrap.servers": source_bootstrap,
        "B.bootstrap.servers": target_bootstrap,
        "A->B.enabled": "true",
        "B->A.enabled": "false",
        "A->B.topics": topics,
        "A->B.groups": groups,
        "tasks.max": tasks_max,
        "replication.factor": 1,
        "checkpoints.topic.replication.factor": 1,
        "heartbeats.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "offset.storage.replication.factor": 1,
        "config.storage.replication.factor": 1,
        "status.storage.replication.factor": 1,
        "emit.checkpoints.interval.seconds": 1,
        "sync.group.offsets.enabled": "false",
        "refresh.topics.interval.seconds": 2,
        "refresh.groups.interval.seconds": 2,
        "sync.topic.acls.enabled": "false",  # the test brokers have no authorizer
    }
    if exactly_once:
        props["B.exactly.once.source.support"] = "enabled"
        props["dedicated.mode.enable.internal.rest"] = "true"
        props["listeners"] = "http://127.0.0.1:0"
    props.update(extra or {})
    return props


class MirrorMaker2(_JavaProcess):
    """MirrorMaker 2 in dedicated mode (``--clusters B``), flow A->B."""

    name = "mm2"

    def __init__(
        self,
        workdir: Path | None,
        source_bootstrap: str,
        target_bootstrap: str,
        *,
        topics: str,
        groups: str,
        tasks_max: int = 1,
        exactly_once: bool = False,
        extra: Mapping[str, object] | None = None,
        heap: str = "512m",
    ) -> None:
        super().__init__(workdir)
        self.properties = mm2_properties(
            source_bootstrap,
            target_bootstrap,
            topics=topics,
            groups=groups,
            tasks_max=tasks_max,
            exactly_once=exactly_once,
            extra=extra,
        )
        self.config = write_properties(self.dir / "mm2.properties", self.properties)
        log4j2 = write_log4j2(self.dir / "log4j2.properties", self.log_path)
        self._spawn(
            java_cmd(
                "org.apache.kafka.connect.mirror.MirrorMaker",
                str(self.config),
                "--clusters",
                "B",
                heap=heap,
                log4j2=log4j2,
            )
        )


class ConnectStandaloneCheckpoint(_JavaProcess):
    """Connect standalone running only MM2's MirrorCheckpointConnector (A -> B)."""

    name = "connect-checkpoint"

    def __init__(
        self,
        workdir: Path | None,
        source_bootstrap: str,
        target_bootstrap: str,
        *,
        topics: str,
        groups: str,
        extra: Mapping[str, object] | None = None,
        heap: str = "512m",
    ) -> None:
        super().__init__(workdir)
        worker = {
            "bootstrap.servers": target_bootstrap,
            "key.converter": BYTE_ARRAY_CONVERTER,
            "value.converter": BYTE_ARRAY_CONVERTER,
            "offset.storage.file.filename": self.dir / "connect.offsets",
            "listeners": "http://127.0.0.1:0",
        }
        connector: dict[str, object] = {
            "name": "mm2-checkpoint-A-B",
            "connector.class": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
            "tasks.max": 1,
            "source.cluster.alias": "A",
            "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": source_bootstrap,
            "target.cluster.bootstrap.servers": target_bootstrap,
            "topics": topics,
            "groups": groups,
            "checkpoints.topic.replication.factor": 1,
            "emit.checkpoints.interval.seconds": 1,
            "refresh.groups.interval.seconds": 1,
            "sync.group.offsets.enabled": "false",
            "key.converter": BYTE_ARRAY_CONVERTER,
            "value.converter": BYTE_ARRAY_CONVERTER,
            **(extra or {}),
        }
        self.worker_config = write_properties(self.dir / "worker.properties", worker)
        self.connector_config = write_properties(self.dir / "checkpoint.properties", connector)
        log4j2 = write_log4j2(self.dir / "log4j2.properties", self.log_path)
        self._spawn(
            java_cmd(
                "org.apache.kafka.connect.cli.ConnectStandalone",
                str(self.worker_config),
                str(self.connector_config),
                heap=heap,
                log4j2=log4j2,
            )
        )

    def wait_task_started(self, timeout: float = 240.0) -> None:
        """Until the connector's task runs: a JVM's start is not what a test times
        (under a busy suite Connect took 55 s from its start to its task's)."""
        started = "Source task finished initialization and start"
        deadline = time.monotonic() + timeout
        while started not in self.log_text():
            assert self.alive(), self.describe()
            assert time.monotonic() < deadline, (
                f"MM2's checkpoint task not started within {timeout:g}s\n{self.describe()}"
            )
            time.sleep(0.5)


# --- RemoteClusterUtils -------------------------------------------------------------------

_TRANSLATE_JAVA = """\
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/** args: target bootstrap servers, source cluster alias, timeout (s), group... */
public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        Duration timeout = Duration.ofSeconds(Long.parseLong(args[2]));
        for (int i = 3; i < args.length; i++) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, args[1], args[i], timeout);
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                System.out.println("OFFSET\\t" + args[i] + "\\t" + e.getKey().topic() + "\\t"
                    + e.getKey().partition() + "\\t" + e.getValue().offset());
            }
            System.out.println("END\\t" + args[i] + "\\t" + offsets.size());
        }
    }
}
"""

_translate_dir: Path | None = None
_OFFSET_LINE = re.compile(r"OFFSET\t([^\t]+)\t([^\t]+)\t(\d+)\t(-?\d+)")
_END_LINE = re.compile(r"END\t([^\t]+)\t(\d+)")


def _translate_program() -> tuple[Path, Path]:
    global _translate_dir
    if _translate_dir is None:
        d = Path(tempfile.mkdtemp(prefix="mm-remote-cluster-utils-"))
        atexit.register(shutil.rmtree, d, ignore_errors=True)
        (d / "TranslateOffsets.java").write_text(_TRANSLATE_JAVA)
        write_log4j2(d / "log4j2.properties", d / "translate.log", level="WARN")
        _translate_dir = d
    return _translate_dir / "TranslateOffsets.java", _translate_dir / "log4j2.properties"


def remote_cluster_utils_translate_groups(
    bootstrap_b: str, source_alias: str, groups: list[str], timeout: float = 30.0
) -> dict[str, dict[tuple[str, int], int]]:
    """:func:`remote_cluster_utils_translate` for several groups in one JVM run."""
    source, log4j2 = _translate_program()
    proc = subprocess.run(
        java_cmd(
            str(source),
            bootstrap_b,
            source_alias,
            str(int(timeout)),
            *groups,
            heap="256m",
            log4j2=log4j2,
        ),
        capture_output=True,
        text=True,
        timeout=timeout * max(1, len(groups)) + 60,
        check=False,
    )
    failed = (
        f"RemoteClusterUtils.translateOffsets({source_alias!r}, {groups!r}) failed "
        f"(exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    if proc.returncode != 0:
        raise RuntimeError(failed)
    out: dict[str, dict[tuple[str, int], int]] = {}
    announced: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        if m := _OFFSET_LINE.fullmatch(line):
            out.setdefault(m[1], {})[(m[2], int(m[3]))] = int(m[4])
        elif m := _END_LINE.fullmatch(line):
            announced[m[1]] = int(m[2])
        else:
            raise RuntimeError(f"unexpected line {line!r}; {failed}")
    for group in groups:
        if group not in announced or announced[group] != len(out.get(group, {})):
            raise RuntimeError(f"incomplete answer for group {group!r}; {failed}")
    return {group: out.get(group, {}) for group in groups}


def remote_cluster_utils_translate(
    bootstrap_b: str, source_alias: str, group: str, timeout: float = 30.0
) -> dict[tuple[str, int], int]:
    """MM2's ``RemoteClusterUtils.translateOffsets`` for ``group``: (target topic,
    partition) -> offset, read from ``<source_alias>.checkpoints.internal`` on B."""
    return remote_cluster_utils_translate_groups(bootstrap_b, source_alias, [group], timeout)[group]


def wait_until(
    what: str, check: Callable[[], T | None], timeout: float, interval: float = 0.5
) -> T:
    """Call ``check()`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(interval)
