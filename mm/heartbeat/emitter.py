"""Writes MM2 heartbeats for a set of flows into their source clusters' ``heartbeats``.

One idempotent producer per source cluster; each :meth:`HeartbeatEmitter.emit`
writes one ``Heartbeat(source, target, now)`` per flow and waits for the
acknowledgements, so a failure is reported against the flow that suffered it.

Errors that retrying cannot fix (authorization, authentication) become a
:class:`HeartbeatWriteError` with a message saying what to grant or to disable;
the others (timeouts, a broker restarting) are reported per flow and retried at
the next interval by the job.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer
from mm_client.connection import admin_client
from mm_client.kafka import (
    REFUSAL_CODES,
    AcknowledgedProducer,
    describe_exception,
    ensure_topic,
    error_code,
    latest_wins_producer_conf,
    new_producer,
)
from mm_client.records import Heartbeat

from mm.config import FlowConfig, MirrorConfig
from mm.errors import KafkaOperationError, MirrorError

# librdkafka / broker codes after which writing heartbeats cannot succeed by retrying
FATAL_CODES = REFUSAL_CODES | frozenset(
    {
        "POLICY_VIOLATION",
        "INVALID_REPLICATION_FACTOR",
        "INVALID_CONFIG",
        "_INVALID_ARG",
    }
)
DELIVERY_TIMEOUT_MS = 10_000
TOPIC_CONFIG = {"cleanup.policy": "compact"}


class HeartbeatWriteError(MirrorError):
    """Heartbeats cannot be written to a source cluster (exit code 1, no retry)."""


@dataclass
class HeartbeatStats:
    """What one flow's heartbeats did so far."""

    emitted: int = 0
    failed: int = 0
    last_timestamp: int | None = None
    last_error: str | None = None

    def summary(self) -> str:
        text = f"emitted={self.emitted} failed={self.failed}"
        if self.last_error:
            text += f" last_error={self.last_error!r}"
        return text


def unwritable_message(code: str | None, topic: str, cluster: str, flows: str, detail: str) -> str:
    """The user-facing explanation of a heartbeat write that cannot succeed."""
    if code and "AUTHORIZATION" in code:
        what = (
            f"not authorized to write heartbeats to topic {topic} on cluster {cluster} "
            f"({detail}). Grant the {cluster} producer's principal WRITE and DESCRIBE on "
            f"topic {topic} (and CREATE, or create it: 1 partition, cleanup.policy=compact)"
        )
    elif code and "AUTHENTICATION" in code:
        what = f"cannot authenticate to cluster {cluster} ({detail}); check {cluster}.sasl.*"
    else:
        what = f"cannot write heartbeats to topic {topic} on cluster {cluster}: {detail}"
    return f"{what}, or set emit.heartbeats.enabled = false for {flows}"


class HeartbeatEmitter:
    """Heartbeats of ``flows`` (each must have emit.heartbeats.enabled)."""

    def __init__(self, cfg: MirrorConfig, flows: Iterable[FlowConfig], *, log: Any) -> None:
        self.flows = list(flows)
        self.log = log
        self._cfg = cfg
        self._producers: dict[str, Producer] = {}
        self.stats = {f.name: HeartbeatStats() for f in self.flows}

    # --- set-up -------------------------------------------------------------------------
    def topic(self, flow: FlowConfig) -> str:
        return flow.policy().heartbeats_topic()

    def _flows_of(self, cluster: str, topic: str) -> str:
        return ", ".join(
            f.name for f in self.flows if f.source == cluster and self.topic(f) == topic
        )

    def prepare(self, timeout: float = 30.0) -> None:
        """Create every source's heartbeats topic when missing (1 partition, compacted)."""
        done: set[tuple[str, str]] = set()
        for flow in self.flows:
            key = (flow.source, self.topic(flow))
            if key in done:
                continue
            done.add(key)
            try:
                ensure_topic(
                    admin_client(self._cfg.cluster(flow.source).librdkafka("admin")),
                    key[1],
                    f"cluster {flow.source}",
                    flow.heartbeats_topic_replication_factor,
                    config=TOPIC_CONFIG,
                    timeout=timeout,
                )
            except KafkaOperationError as exc:
                if exc.code in FATAL_CODES:
                    raise HeartbeatWriteError(
                        unwritable_message(
                            exc.code, key[1], flow.source, self._flows_of(*key), str(exc)
                        )
                    ) from exc
                raise

    def _producer(self, cluster: str) -> Producer:
        producer = self._producers.get(cluster)
        if producer is None:
            conf = latest_wins_producer_conf(self._cfg.cluster(cluster).librdkafka("producer"))
            conf.update({"linger.ms": 0, "delivery.timeout.ms": DELIVERY_TIMEOUT_MS})
            producer = self._producers[cluster] = new_producer(conf)
        return producer

    # --- emitting -----------------------------------------------------------------------
    def emit(self, flows: Iterable[FlowConfig]) -> dict[str, str | None]:
        """One heartbeat per flow, acknowledged; returns flow name -> error (None if ok).

        Raises HeartbeatWriteError when a write failed in a way retrying cannot fix.
        """
        flows = list(flows)
        errors: dict[str, str | None] = {f.name: None for f in flows}
        codes: dict[str, str | None] = {}
        sent: dict[str, Heartbeat] = {}
        # one per source cluster, for this emit: failures are tagged with the flow's name
        producers: dict[str, AcknowledgedProducer] = {}

        for flow in flows:
            beat = Heartbeat.now(flow.source, flow.target)
            producer = producers.get(flow.source)
            if producer is None:
                producer = producers[flow.source] = AcknowledgedProducer(
                    self._producer(flow.source)
                )
            try:
                producer.produce(
                    self.topic(flow),
                    beat.value_bytes(),
                    beat.key_bytes(),
                    tag=flow.name,
                    partition=0,
                    timestamp=beat.timestamp,
                )
                sent[flow.name] = beat
            except KafkaException as exc:
                errors[flow.name] = describe_exception(exc)
                codes[flow.name] = error_code(exc)
        deadline = time.monotonic() + DELIVERY_TIMEOUT_MS / 1000 + 5
        for cluster, producer in producers.items():
            acks = producer.wait(max(0.1, deadline - time.monotonic()))
            for failure in acks.failures:
                errors[failure.tag] = failure.error.str()
                codes[failure.tag] = failure.error.name()
            if acks.unacknowledged:
                for flow in flows:
                    if flow.source == cluster and errors[flow.name] is None:
                        errors[flow.name] = (
                            f"{acks.unacknowledged} heartbeats not acknowledged in time"
                        )
                        codes[flow.name] = "_TIMED_OUT"
        by_name = {f.name: f for f in flows}
        for name, error in errors.items():
            st = self.stats[name]
            if error is None:
                st.emitted += 1
                st.last_timestamp = sent[name].timestamp
                st.last_error = None
                continue
            st.failed += 1
            st.last_error = error
            flow = by_name[name]
            code = codes.get(name)
            if code in FATAL_CODES:
                topic = self.topic(flow)
                raise HeartbeatWriteError(
                    unwritable_message(
                        code, topic, flow.source, self._flows_of(flow.source, topic), error
                    )
                )
            self.log.error(
                "heartbeat not written; retried next interval",
                flow=name,
                cluster=flow.source,
                topic=self.topic(flow),
                error=error,
                code=code,
                failed_total=st.failed,
            )
        return errors

    def close(self) -> None:
        for producer in self._producers.values():
            producer.flush(5)
        self._producers.clear()
