"""A partition's committed records in an offset range, read as the cluster allows.

Apache Kafka serves read_committed consumers exactly the committed records (its
fetch responses list the aborted transactions), over every listener the cluster
has: TLS, mutual TLS, SASL. So on a cluster whose broker profile says so
(:attr:`mm.kafka.profile.BrokerProfile.read_committed_exact`) a read_committed
consumer built from the cluster's own consumer settings reads the range.

A broker that serves aborted records to read_committed consumers (the embedded
broker) is read with :mod:`mm.kafka.rawlog` instead, which applies Kafka's rule to
the stored batches and markers itself; that reader speaks plain TCP only, so such
a cluster must be PLAINTEXT (:meth:`LogReader.check` says so up front).

Both paths yield :class:`mm.kafka.rawlog.LogRecord` in offset order and fill a
:class:`mm.kafka.rawlog.ScanStats`. The consumer cannot see aborted records nor
markers: it counts the offsets of the range that held no committed record
(``ScanStats.gap_offsets``) and the offsets above the last stable offset that it
could not read yet (``ScanStats.open_offsets``) instead of transactions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, TopicPartition
from mm_client.kafka.clients import new_consumer, reader_conf, throwaway_group

from mm.errors import ConfigError
from mm.kafka.profile import KAFKA, BrokerProfile
from mm.kafka.rawlog import (
    DEFAULT_PAGE_BYTES,
    Connection,
    Headers,
    LogRecord,
    RawLogError,
    ScanStats,
    scan_committed,
)

# ``end`` for "to the end of the log" (the stable end on the consumer path)
TO_THE_END = 1 << 62


@dataclass(frozen=True)
class LogReader:
    """How to read one cluster's committed records (picklable: Spark tasks carry it).

    ``consumer_conf``: the cluster's librdkafka consumer settings (bootstrap
    servers, security), without a ``logger``; ``alias`` names the cluster in errors.
    """

    alias: str
    consumer_conf: Mapping[str, Any] = field(default_factory=dict)
    profile: BrokerProfile = KAFKA
    client_id: str = "mm"

    @property
    def raw(self) -> bool:
        """True when the cluster is read with the raw reader (Fetch over plain TCP)."""
        return not self.profile.read_committed_exact

    def check(self, command: str) -> None:
        """ConfigError before anything is read when this cluster cannot be read:
        the raw reader is needed and the listener is not PLAINTEXT."""
        protocol = str(self.consumer_conf.get("security.protocol", "PLAINTEXT"))
        if self.raw and protocol.upper() != "PLAINTEXT":
            raise ConfigError(
                f"{self.alias}.security.protocol",
                protocol,
                f"PLAINTEXT: {command} reads this cluster with mm's raw log reader, which "
                f"speaks plain TCP only, because its broker profile is {self.profile.name} "
                f"(read_committed consumers get aborted records there); on Apache Kafka "
                f"(mm.broker.profile = kafka) every security protocol is read",
            )

    def scan(
        self,
        leader: str | None,
        topic: str,
        partition: int,
        start: int,
        end: int,
        stats: ScanStats,
        *,
        timeout: float = 60.0,
        page_bytes: int = DEFAULT_PAGE_BYTES,
        offsets_only: bool = False,
    ) -> Iterator[LogRecord]:
        """The committed records of ``topic[partition]`` with ``start <= offset < end``
        in offset order (``end`` :data:`TO_THE_END`: to the end of the log).

        ``leader``: the partition leader's ``host:port``, needed by the raw reader only.
        A start below the log start is an error (RawLogError), never a silent skip.
        """
        if self.raw:
            if leader is None:
                raise RawLogError(f"{topic}[{partition}] on {self.alias}: no leader to read from")
            with Connection(leader, timeout, client_id=self.client_id) as conn:
                yield from scan_committed(
                    conn,
                    topic,
                    partition,
                    start,
                    end,
                    stats,
                    page_bytes=page_bytes,
                    timeout=timeout,
                    offsets_only=offsets_only,
                )
        else:
            yield from self._consume(topic, partition, start, end, stats, timeout)

    def _consume(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        stats: ScanStats,
        timeout: float,
    ) -> Iterator[LogRecord]:
        stats.read_to = start
        if start >= end:
            return
        where = f"{topic}[{partition}] on {self.alias}"
        conf = reader_conf(
            self.consumer_conf,
            # a start that retention deleted is an error, never a jump to the log start
            {
                "auto.offset.reset": "error",
                "client.id": self.client_id,
                # the end of a range is learnt from an empty fetch: do not wait long for it
                "fetch.wait.max.ms": 100,
            },
            # under "__mm-" as every throwaway reader of mm: one prefixed ACL (DESCRIBE,
            # for librdkafka's coordinator lookup) lets them all read
            group=throwaway_group(f"__{self.client_id}-read"),
            drop=("group.instance.id",),
        )
        consumer = new_consumer(conf)
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            # the deadline is per step of progress, as the raw reader's
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RawLogError(
                        f"{where}: read to offset {stats.read_to} of [{start}, {end}) and "
                        f"nothing more for {timeout:g}s"
                    )
                # consume() waits for a full batch or its timeout: keep the timeout short
                want = max(1, min(500, end - stats.read_to))
                for m in consumer.consume(want, min(left, 0.05)):
                    err = m.error()
                    offset = m.offset() or 0
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            # the stable end: what is past it is not decided yet
                            stop = min(offset, end)
                            stats.gap_offsets += max(0, stop - stats.read_to)
                            stats.read_to = max(stats.read_to, stop)
                            if end != TO_THE_END and offset < end:
                                stats.open_offsets += end - offset
                            return
                        raise RawLogError(
                            f"{where}: read at offset {stats.read_to} (reader group "
                            f"{conf['group.id']}): {err.str()}",
                            code=err.name(),
                        )
                    if offset >= end:
                        stats.gap_offsets += max(0, end - stats.read_to)
                        stats.read_to = end
                        return
                    stats.gap_offsets += max(0, offset - stats.read_to)
                    stats.read_to = offset + 1
                    ts_type, ts = m.timestamp()
                    yield LogRecord(
                        offset,
                        m.key(),
                        m.value(),
                        _headers(m.headers()),
                        ts,
                        ts_type,
                    )
                    deadline = time.monotonic() + timeout
                    if offset + 1 >= end:
                        return
        finally:
            consumer.close()


def _headers(found: Any) -> Headers:
    """A consumer's headers (a list of pairs, or None) as the raw reader gives them."""
    return tuple((str(k), v if v is None else bytes(v)) for k, v in found or ())


def reader_of(cluster: Any, client_id: str = "mm") -> LogReader:
    """The :class:`LogReader` of a :class:`mm.config.ClusterConfig`."""
    return LogReader(
        cluster.alias,
        dict(cluster.librdkafka("consumer")),
        cluster.profile,
        client_id,
    )
