"""Embedded clusters for `mm embedded`, `mm demo`, `mm drill` and tests: Apache Kafka
(:mod:`mm.embedded.kraft`) where its jars are present, else the embedded broker
(:mod:`mm.embedded.tansu`, with a moto S3 server for durable clusters).

``broker`` chooses: ``kafka``, ``tansu``, or ``auto`` (the default): Apache Kafka
when :func:`mm.embedded.kafka_jars.find_jars` finds the jars, else the embedded
broker. Each cluster's :class:`ClusterInfo` names the broker profile its clients
declare (``mm.broker.profile``).
"""

from __future__ import annotations

import atexit
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from mm.embedded import kraft, procs, tansu
from mm.embedded.cluster_info import ClusterInfo
from mm.embedded.kafka_jars import KAFKA_VERSION, find_jars
from mm.embedded.kraft import LEAN_JVM_FLAGS, KRaftCluster
from mm.embedded.s3 import MotoServer, bucket_for
from mm.embedded.tansu import MEMORY_STORAGE, EmbeddedCluster
from mm.errors import MirrorError, UsageError

BROKERS: Final = ("auto", "kafka", "tansu")
BROKER_NAMES: Final = {"kafka": f"Apache Kafka {KAFKA_VERSION}", "tansu": "embedded broker Tansu"}

Cluster = EmbeddedCluster | KRaftCluster


def resolve_broker(broker: str) -> str:
    """``kafka`` or ``tansu`` for a ``--broker`` value (``auto``: kafka when its jars
    are found)."""
    if broker not in BROKERS:
        raise UsageError(f"--broker {broker!r}: expected one of {', '.join(BROKERS)}")
    if broker == "auto":
        return "kafka" if find_jars() is not None else "tansu"
    return broker


class EmbeddedClusters:
    """Several independent clusters plus, for durable ones, a shared moto S3 server.

    Use as a context manager; an atexit hook also stops whatever is still running.
    """

    def __init__(
        self,
        run_dir: Path | str | None = None,
        *,
        broker: str = "auto",
        die_with_parent: bool = True,
        startup_timeout: float | None = None,
        jvm_flags: Sequence[str] = LEAN_JVM_FLAGS,
    ) -> None:
        """``jvm_flags``: of the Apache Kafka brokers; the benches pass () to measure
        on brokers as users run them (the JVM's defaults)."""
        if run_dir is None:
            run_dir = tempfile.mkdtemp(prefix="mm-embedded-")
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.broker = resolve_broker(broker)
        self.die_with_parent = die_with_parent
        self.startup_timeout = startup_timeout
        self.jvm_flags = tuple(jvm_flags)
        self.clusters: dict[str, Cluster] = {}
        self.moto: MotoServer | None = None
        self._atexit_registered = False

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __getitem__(self, name: str) -> Cluster:
        return self.clusters[name]

    def start(
        self, names: tuple[str, ...] | list[str] = ("A", "B"), durable: bool = False
    ) -> dict[str, ClusterInfo]:
        if self.broker == "kafka":  # several JVMs start faster side by side
            self._register_atexit()
            fresh = [self._kafka(n) for n in names if n not in self.clusters]
            for cluster in fresh:
                cluster.spawn()
            for cluster in fresh:
                cluster.wait_ready()
        return {name: self.add(name, durable=durable).info() for name in names}

    def _kafka(self, name: str) -> KRaftCluster:
        cluster = KRaftCluster(
            name,
            run_dir=self.run_dir,
            die_with_parent=self.die_with_parent,
            startup_timeout=self.startup_timeout or 90.0,
            jvm_flags=self.jvm_flags,
        )
        self.clusters[name] = cluster
        return cluster

    def add(self, name: str, *, durable: bool = False) -> Cluster:
        """Start cluster ``name`` (or return it if it already runs). On Apache Kafka
        every cluster is durable (local disk)."""
        existing = self.clusters.get(name)
        if existing is not None:
            if durable and not existing.durable:
                raise MirrorError(f"embedded cluster {name} exists with durable={existing.durable}")
            existing.start()
            return existing
        self._register_atexit()
        if self.broker == "kafka":
            kafka = self._kafka(name)
            kafka.start()
            return kafka
        storage, env = MEMORY_STORAGE, {}
        if durable:
            moto = self._moto()
            bucket = bucket_for(name)
            if any(c.storage_engine == f"s3://{bucket}/" for c in self.clusters.values()):
                raise MirrorError(f"embedded cluster {name}: bucket {bucket} is already in use")
            moto.create_bucket(bucket)
            storage, env = f"s3://{bucket}/", moto.tansu_env()
        cluster = EmbeddedCluster(
            name,
            run_dir=self.run_dir,
            storage_engine=storage,
            env=env,
            die_with_parent=self.die_with_parent,
            startup_timeout=self.startup_timeout or 30.0,
        )
        self.clusters[name] = cluster
        cluster.start()
        return cluster

    def _moto(self) -> MotoServer:
        if self.moto is None:
            self.moto = MotoServer(self.run_dir / "moto.log", die_with_parent=self.die_with_parent)
            self.moto.start(timeout=self.startup_timeout or 30.0)
        return self.moto

    def remove(self, name: str) -> None:
        """Stop cluster ``name`` and forget it (its bucket stays on the moto server)."""
        cluster = self.clusters.pop(name, None)
        if cluster is not None:
            cluster.stop()

    def infos(self) -> dict[str, ClusterInfo]:
        return {name: c.info() for name, c in self.clusters.items()}

    def stop(self) -> None:
        """Stop every broker, then the moto server. Safe to call more than once."""
        running = [c.process for c in self.clusters.values() if c.process is not None]
        grace = kraft.STOP_GRACE if self.broker == "kafka" else tansu.STOP_GRACE
        procs.stop_children(running, grace)
        for cluster in self.clusters.values():
            cluster.stop()  # reaped already: just logs and forgets
        if self.moto is not None:
            self.moto.stop()
        self._unregister_atexit()

    def release(self) -> None:
        """Leave every process running and stop tracking it (``--detach``)."""
        for cluster in self.clusters.values():
            cluster.release()
        if self.moto is not None:
            self.moto.release()
        self._unregister_atexit()

    def _register_atexit(self) -> None:
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True

    def _unregister_atexit(self) -> None:
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False
