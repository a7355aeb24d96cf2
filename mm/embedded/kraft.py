"""Embedded clusters on Apache Kafka: one KRaft process (broker and controller) each.

The user's broker, run from the jars of :mod:`mm.embedded.kafka_jars` with
``java -cp "<jars>/*" kafka.Kafka``: a one-node cluster, PLAINTEXT on a loopback
port, its logs in ``<run_dir>/<name>-kafka/``. Data is on local disk, so every
such cluster keeps what it acknowledged across a kill and :meth:`restart` (on the
same port); ``durable`` asks nothing more of it.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from mm.embedded import procs
from mm.embedded.cluster_info import ClusterInfo, LocalCluster
from mm.embedded.formatted import format_from_template
from mm.embedded.kafka_jars import require_jars
from mm.embedded.probe import QUIET_LOGGER
from mm.errors import MirrorError
from mm.logs import get_logger

HEAP: Final = "768m"
# a controlled shutdown of a one-node cluster takes 1-3 s; a frozen or busy JVM longer
STOP_GRACE: Final = 20.0
PROFILE: Final = "kafka"
PORT_RETRIES: Final = 3
# what a broker logs when another process took a port picked for it
BIND_FAILED: Final = "Address already in use"


def _log() -> Any:
    # Looked up per call: mm.logs.get_logger binds eagerly, and these modules are
    # imported before the CLI configures logging.
    return get_logger("mm.embedded")


def java_binary() -> str:
    """$JAVA_HOME's java when set, else ``java`` from PATH."""
    if os.environ.get("JAVA_HOME"):
        return str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    if shutil.which("java") is None:
        raise MirrorError(
            "Java is needed to run Apache Kafka but neither $JAVA_HOME nor `java` on PATH "
            "was found: install Java 17+"
        )
    return "java"


def java_cmd(
    jars: Path,
    *args: str,
    heap: str | None = None,
    log4j2: Path | None = None,
    java_options: Sequence[str] | None = None,
    flags: Sequence[str] = (),
) -> list[str]:
    """``java <options> <flags> [-Xmx] [-Dlog4j2.configurationFile] -cp "<jars>/*"
    <args>``; the options map Kafka's class archive where one is built
    (:mod:`mm.embedded.kafka_classes`) unless ``java_options`` are given; ``flags``
    are added after them (:data:`LEAN_JVM_FLAGS`, say)."""
    java = java_binary()
    if java_options is None:
        from mm.embedded import kafka_classes  # here: `python -m` runs that module

        java_options = kafka_classes.java_options(java, jars)
    cmd = [java, *java_options, *flags]
    if heap:
        cmd.append(f"-Xmx{heap}")
    if log4j2 is not None:
        cmd.append(f"-Dlog4j2.configurationFile={log4j2}")
    # java expands the trailing '*' of a class path entry itself (no shell here)
    return [*cmd, "-cp", f"{jars}/*", *args]


#: JVM flags of a small, short-lived broker (the embedded clusters of the drill and
#: the demo, the tests' brokers): the C1 compiler only and the serial collector.
#: Measured on 2 cores: a start 1.3 instead of 2.8 CPU-s, 0.9 instead of 1.6 CPU-s
#: per idle minute, and 100,000 records in 100 transactions plus 300 one-record
#: transactions served in 1.6-2.6 instead of 4.0-6.5 CPU-s, in less wall time
#: (C2 compiles for longer than such a broker runs). Not for a production broker.
LEAN_JVM_FLAGS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def write_properties(path: Path, props: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


def write_log4j2(path: Path, log_file: Path, level: str = "INFO") -> Path:
    """A log4j2 configuration sending everything to ``log_file`` (nothing to the console)."""
    path.write_text(
        f"""status = error
name = mm
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c{{1}})%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
"""
    )
    return path


def new_cluster_id() -> str:
    """A KRaft cluster id (a Uuid in URL-safe base64), never starting with "-"
    (the storage tool would read it as an option)."""
    while True:
        value = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not value.startswith("-"):
            return value


def one_node_props(port: int, controller_port: int, data_dir: Path) -> dict[str, object]:
    """server.properties of a one-node KRaft cluster, PLAINTEXT on ``port``: internal
    topics with one replica and one partition (a single coordinator to load), no
    topic created by a client's metadata request, records kept until deleted."""
    return {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@{procs.LOOPBACK}:{controller_port}",
        "listeners": (
            f"PLAINTEXT://{procs.LOOPBACK}:{port},CONTROLLER://{procs.LOOPBACK}:{controller_port}"
        ),
        "advertised.listeners": f"PLAINTEXT://{procs.LOOPBACK}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": data_dir,
        "num.partitions": 1,
        "default.replication.factor": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "false",
        # records with old timestamps (a drill's, a test's) must not vanish mid-run
        "log.retention.ms": -1,
        # the controller's no-op record (liveness of the metadata log) every 5 s
        # instead of 0.5 s: one node has no follower to tell, and an idle broker
        # then costs 0.9 instead of 1.3 CPU-s a minute (with LEAN_JVM_FLAGS)
        "metadata.max.idle.interval.ms": 5000,
    }


def format_storage(jars: Path, config: Path, log4j2: Path, *args: str) -> None:
    """``kafka-storage format`` for ``config`` with a new cluster id (``args``: SCRAM
    users and the like), from this process's template of the same format where there
    is one (:mod:`mm.embedded.formatted`); raises MirrorError with the tool's output
    when it fails."""

    def run_format(cluster_id: str) -> None:
        fmt = subprocess.run(
            java_cmd(
                jars,
                *("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
                *args,
                heap="256m",
                log4j2=log4j2,
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if fmt.returncode != 0:
            raise MirrorError(
                f"formatting Apache Kafka's storage for {config} failed (exit {fmt.returncode}):\n"
                f"{fmt.stdout[-2000:]}\n{fmt.stderr[-4000:]}"
            )

    format_from_template(config, (str(jars), *args), new_cluster_id(), new_cluster_id, run_format)


def coordinator_ready(admin: Any, timeout: float) -> str | None:
    """None once the cluster answers metadata and its group coordinator describes
    groups; else what it answered. Right after start the coordinator answers
    COORDINATOR_LOAD_IN_PROGRESS, which AdminClient reports without retrying."""
    group = "__mm-embedded-ready"
    try:
        admin.list_topics(timeout=timeout)
        described = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
        described.result(timeout + 1)
    except Exception as exc:  # not up yet: the caller asks again
        # A failed future keeps its exception, whose traceback holds this frame and
        # so the client: a cycle only the collector frees, maybe after the broker
        # stopped, when librdkafka's destroy can hang (seen: `mm embedded up` not
        # exiting after Ctrl-C). Without the traceback the client goes with the frame.
        exc.__traceback__ = None
        return str(exc)
    return None


class KRaftCluster(LocalCluster):
    """One embedded cluster on Apache Kafka; the cluster is named ``name`` in logs."""

    durable = True  # local disk: a kill and restart keep what it acknowledged
    profile = PROFILE

    def __init__(
        self,
        name: str,
        *,
        run_dir: Path,
        die_with_parent: bool = True,
        startup_timeout: float = 90.0,
        heap: str = HEAP,
        java_options: Sequence[str] | None = None,
        jvm_flags: Sequence[str] = LEAN_JVM_FLAGS,
    ) -> None:
        super().__init__()
        self.name = name
        self.dir = Path(run_dir) / f"{name}-kafka"
        self.storage_engine = f"file://{self.dir / 'data'}"
        self.log_path = self.dir / "server.log"
        self.out_path = self.dir / "kafka.out"
        self.die_with_parent = die_with_parent
        self.startup_timeout = startup_timeout
        self.heap = heap
        self.java_options = java_options
        self.jvm_flags = tuple(jvm_flags)
        self._controller_port: int | None = None
        # new ports picked for this start (free a moment before it): another process
        # may take one first, and the broker then exits; it starts again on new ones
        self._port_retries = PORT_RETRIES
        # a start's probe client that gave up with a request in flight: an
        # AdminClient destroyed then can crash the process, so it is kept for the
        # cluster's life (one that answered is destroyed at once, see wait_ready)
        self._probes: list[Any] = []

    def start(self) -> ClusterInfo:
        """Start the broker (formatting its storage the first time) and wait until it
        serves groups."""
        if self.is_running():
            return self.info()
        self.spawn()
        self.wait_ready()
        return self.info()

    def spawn(self) -> None:
        """Start the JVM without waiting (start several, then :meth:`wait_ready` each)."""
        if self.is_running():
            return
        jars = require_jars()
        config = self.dir / "server.properties"
        log4j2 = self.dir / "log4j2.properties"
        if self._port is None:  # a new cluster: nothing of an earlier one in its directory
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir.mkdir(parents=True)
            self._port = procs.free_port()
            self._controller_port = procs.free_port()
            while self._controller_port == self._port:
                self._controller_port = procs.free_port()
            data = self.dir / "data"
            write_properties(config, one_node_props(self._port, self._controller_port, data))
            write_log4j2(log4j2, self.log_path)
            format_storage(jars, config, log4j2)
        argv = java_cmd(
            jars,
            "kafka.Kafka",
            str(config),
            heap=self.heap,
            log4j2=log4j2,
            java_options=self.java_options,
            flags=self.jvm_flags,
        )
        self._proc = procs.spawn(argv, log_path=self.out_path, die_with_parent=self.die_with_parent)

    def _lost_port_race(self) -> bool:
        if self._port_retries <= 0:
            return False
        self._port_retries -= 1
        try:
            log = self.log_path.read_text(errors="replace")
        except OSError:
            return False
        return BIND_FAILED in log

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last: str | None = "no answer"
        admin: Any = None
        while True:
            if not self.is_running():
                rc = self._proc.poll() if self._proc else None
                self._proc = None
                if admin is not None:
                    self._probes.append(admin)
                    admin = None
                if self._lost_port_race():
                    self._port = None  # spawn picks new ports and formats again
                    self.spawn()
                    continue
                raise MirrorError(
                    f"embedded cluster {self.name} (Apache Kafka) exited during start "
                    f"({rc}); its log:\n{procs.log_tail(self.log_path)}\n"
                    f"{procs.log_tail(self.out_path)}"
                )
            if procs.port_open(procs.LOOPBACK, self.port):
                if admin is None:
                    from confluent_kafka.admin import AdminClient

                    conf: dict[str, Any] = {
                        "bootstrap.servers": self.bootstrap_servers,
                        "logger": QUIET_LOGGER,
                    }
                    admin = AdminClient(conf)
                last = coordinator_ready(admin, 5.0)
                if last is None:
                    # destroyed now, idle, while its broker answers: librdkafka's
                    # destroy can wait forever for a broker thread whose broker is
                    # gone (seen: `mm demo` hung after stopping its clusters). A new
                    # probe per start: one that knew a killed broker did not find the
                    # restarted one in 90 s.
                    del admin
                    self._port_retries = 0  # a restart keeps its ports
                    break
            if time.monotonic() > deadline:
                if admin is not None:
                    self._probes.append(admin)
                self.stop()
                raise MirrorError(
                    f"embedded cluster {self.name} (Apache Kafka) was not ready within "
                    f"{self.startup_timeout:g}s ({last}); its log: {self.log_path}"
                )
            time.sleep(0.2)
        _log().info(
            "embedded cluster started",
            cluster=self.name,
            bootstrap_servers=self.bootstrap_servers,
            broker="Apache Kafka",
            pid=self.pid,
            log=str(self.log_path),
        )

    def stop(self, grace: float = STOP_GRACE) -> None:
        if self._proc is not None:
            procs.stop_child(self._proc, grace)
            _log().info("embedded cluster stopped", cluster=self.name)
        self._proc = None

    def restart(self, grace: float = STOP_GRACE) -> ClusterInfo:
        """Stop (if running) and start again on the same port and data."""
        self.stop(grace)
        return self.start()
