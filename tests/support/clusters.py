"""Kafka clusters for the tests, found or started once per session.

Per cluster name (A, B, C, ...), in order:
1. ``MMTEST_<NAME>_BOOTSTRAP`` set -> that external cluster, used as is;
2. by default (``MMTEST_BROKER=kafka``) -> a one-node Apache Kafka 4.3.1 (KRaft)
   from the jars of mm/embedded/kafka-pom.xml (``MM_KAFKA_JARS``, see support.apache_kafka);
   without the jars the tests fail naming the fix, never fall back;
3. ``MMTEST_BROKER=embedded``: a Docker engine answers -> an Apache Kafka
   container (KRaft, single node), otherwise an embedded Tansu broker (see
   mm.embedded). ``MMTEST_DOCKER=0`` skips the Docker probe.
"""

from __future__ import annotations

import base64
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mm.embedded import EmbeddedCluster, EmbeddedClusters, KRaftCluster, probe, procs
from mm.kafka.profile import EMBEDDED, KAFKA, BrokerProfile
from support.apache_kafka import KRaftBroker

ENV_BOOTSTRAP = "MMTEST_{name}_BOOTSTRAP"
ENV_BROKER = "MMTEST_BROKER"
BROKER_KINDS = ("kafka", "embedded")
DEFAULT_KAFKA_IMAGE = "apache/kafka:3.9.1"


# The tests write their configs without naming a profile (mm.kafka.profile): a session
# whose clusters are embedded sets the embedded broker's profile for all of it, and a
# test that starts an embedded cluster of its own sets it for that test only
# (:func:`use_embedded_profile`), so the Apache Kafka tests after it keep the default.
ENV_PROFILE = "MM_MM_BROKER_PROFILE"


def use_embedded_profile(monkeypatch: Any) -> None:
    """Give the mm processes and configs of one test the embedded broker's profile."""
    monkeypatch.setenv(ENV_PROFILE, EMBEDDED.name)


@dataclass(frozen=True)
class KafkaCluster:
    name: str
    bootstrap_servers: str
    kind: str  # "external", "kafka", "docker" or "embedded"
    log_path: Path | None = None

    @property
    def profile(self) -> BrokerProfile:
        """The cluster's broker profile, for product functions a test calls itself."""
        return EMBEDDED if self.kind == "embedded" else KAFKA


def external_bootstrap(name: str) -> str | None:
    return os.environ.get(ENV_BOOTSTRAP.format(name=name.upper())) or None


def broker_kind() -> str:
    """``$MMTEST_BROKER``: "kafka" (Apache Kafka from its jars, the default) or "embedded"."""
    kind = os.environ.get(ENV_BROKER, "") or "kafka"
    if kind not in BROKER_KINDS:
        raise ValueError(f"{ENV_BROKER}={kind!r}: expected one of {', '.join(BROKER_KINDS)}")
    return kind


def any_external() -> list[str]:
    return sorted(k for k in os.environ if k.startswith("MMTEST_") and k.endswith("_BOOTSTRAP"))


def docker_available() -> bool:
    """A quick check: a socket or DOCKER_HOST first, then a ping with a short timeout."""
    if os.environ.get("MMTEST_DOCKER") == "0":
        return False
    sockets = [Path("/var/run/docker.sock"), Path.home() / ".docker/run/docker.sock"]
    if not os.environ.get("DOCKER_HOST") and not any(s.exists() for s in sockets):
        return False
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


class DockerKafka:
    """Apache Kafka in a container (KRaft, one node acting as broker and controller).

    testcontainers' KafkaContainer only boots Confluent images, so the official
    apache/kafka image runs in a generic container. The advertised listener must
    name the host port, so that port is chosen before the container starts.
    """

    def __init__(self, name: str, image: str | None = None, timeout: float = 120.0) -> None:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.docker_client import DockerClient

        self.name = name
        host = DockerClient().host()
        port = procs.free_port()
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        env = {
            "CLUSTER_ID": cluster_id,
            "KAFKA_NODE_ID": "1",
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{port}",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
            "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        }
        image = image or os.environ.get("MMTEST_KAFKA_IMAGE", DEFAULT_KAFKA_IMAGE)
        self.container: Any = DockerContainer(image).with_bind_ports(9092, port)
        for key, value in env.items():
            self.container.with_env(key, value)
        self.bootstrap_servers = f"{host}:{port}"
        self.container.start()
        deadline = time.monotonic() + timeout
        while not probe.answers_metadata(self.bootstrap_servers, timeout=2.0):
            if time.monotonic() > deadline:
                logs = self.container.get_logs()
                self.stop()
                raise RuntimeError(f"Kafka container {name} did not come up:\n{logs!r}")
            time.sleep(0.5)

    def stop(self) -> None:
        self.container.stop()


class KafkaFactory:
    """Clusters by name for a test session: the same name gives the same cluster."""

    def __init__(self, run_dir: Path | None = None) -> None:
        self.run_dir = run_dir or Path(tempfile.mkdtemp(prefix="mm-test-brokers-"))
        self._clusters: dict[str, KafkaCluster] = {}
        self._embedded: EmbeddedClusters | None = None
        self._containers: list[DockerKafka] = []
        self._brokers: list[KRaftBroker] = []
        self._docker: bool | None = None

    @property
    def use_docker(self) -> bool:
        if self._docker is None:
            self._docker = docker_available()
        return self._docker

    def cluster(self, name: str) -> KafkaCluster:
        found = self._clusters.get(name)
        if found is None:
            found = self._clusters[name] = self._make(name)
        return found

    def _make(self, name: str) -> KafkaCluster:
        bootstrap = external_bootstrap(name)
        if bootstrap:
            return KafkaCluster(name, bootstrap, "external")
        if broker_kind() == "kafka":
            broker = KRaftBroker(self.run_dir / f"kafka-{name}")
            self._brokers.append(broker)
            return KafkaCluster(name, broker.bootstrap, "kafka", broker.log_path)
        if self.use_docker:
            container = DockerKafka(name)
            self._containers.append(container)
            return KafkaCluster(name, container.bootstrap_servers, "docker")
        cluster = self.embedded.add(name)
        os.environ[ENV_PROFILE] = EMBEDDED.name  # every session cluster is embedded
        return KafkaCluster(name, cluster.bootstrap_servers, "embedded", cluster.log_path)

    @property
    def embedded(self) -> EmbeddedClusters:
        if self._embedded is None:
            self._embedded = EmbeddedClusters(self.run_dir, broker="tansu")
        return self._embedded

    def durable_unavailable_reason(self) -> str | None:
        """Why restart tests cannot run in this session (None if they can)."""
        external = any_external()
        if external:
            return f"durable (restartable) clusters are embedded-only; {', '.join(external)} set"
        if self.use_docker:
            return "durable (restartable) clusters are embedded-only; this session uses Docker"
        return None

    def durable(self, name: str) -> EmbeddedCluster | KRaftCluster:
        """A new durable embedded cluster (S3 storage on the session's moto server)."""
        if name in self.embedded.clusters:
            raise ValueError(f"embedded cluster {name} already exists")
        return self.embedded.add(name, durable=True)

    def remove(self, name: str) -> None:
        self._clusters.pop(name, None)
        self.embedded.remove(name)

    def describe(self) -> str:
        lines = [
            f"{c.name}: {c.bootstrap_servers} ({c.kind}"
            + (f", log {c.log_path})" if c.log_path else ")")
            for c in self._clusters.values()
        ]
        if self._embedded is not None:
            lines += [
                f"{n}: {c.bootstrap_servers} (embedded durable, log {c.log_path})"
                for n, c in self._embedded.clusters.items()
                if c.durable
            ]
        return "\n".join(lines)

    def close(self) -> None:
        for broker in self._brokers:
            broker.stop()
        self._brokers.clear()
        for container in self._containers:
            container.stop()
        self._containers.clear()
        if self._embedded is not None:
            self._embedded.stop()
