"""`mm status --watch` / `--serve` publishes the source ends it read, for `mm failover`.

Each round reads every mirrored partition's end on the source (read_committed). When
the mirror is stopped or dead, those reads are the newest sight of the source there
is: each flow's are written to ``mm-mirror-ends.<source>.internal`` on its target, in
the mirror's record format with ``"by": "status"`` and their own key
(:mod:`mm.source.ends`), at most every second. The read's time is when the round
started, before any read: the failover's "last seen" is never later than it was.

Only into the topic the mirror created (compacted): never a topic of the broker's
defaults. A failed publication is logged as a warning; the status goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mm.config import MirrorConfig
from mm.source.ends import STATUS, EndsPublisher, Key, ends_topic
from mm.status.model import FlowStatus, StatusReport


def seen_ends(st: FlowStatus) -> dict[Key, int] | None:
    """The source ends a flow's round read (None: the round failed, nothing to say)."""
    if st.error is not None or not st.partitions:
        return None
    return {(p.topic, p.partition): p.log_end for p in st.partitions}


class StatusEnds:
    """One publisher per flow, into its target's ends topic once that exists."""

    def __init__(
        self,
        cfg: MirrorConfig,
        log: Callable[..., None],
        *,
        producer_factory: Callable[[Mapping[str, Any]], Any] | None = None,
        topic_exists: Callable[[str, str], bool] | None = None,
    ) -> None:
        self._cfg, self._log = cfg, log
        self._new_producer = producer_factory or _producer
        self._exists = topic_exists or self._topic_on
        self._producers: dict[str, Any] = {}  # per target cluster
        self._publishers: dict[str, EndsPublisher] = {}  # per flow
        self._told: set[str] = set()  # flows whose missing topic was logged

    def publish(self, report: StatusReport) -> None:
        for st in report.flows:
            ends = seen_ends(st)
            if not ends:
                continue
            publisher = self._publisher(st)
            if publisher is not None:
                publisher.seen(ends, read_at=st.collected_at_ms / 1000)

    def _publisher(self, st: FlowStatus) -> EndsPublisher | None:
        publisher = self._publishers.get(st.flow)
        if publisher is not None:
            return publisher
        topic = ends_topic(st.source)
        try:
            exists = self._exists(st.target, topic)
        except Exception as exc:  # the target's metadata: asked again next round
            self._log("source ends not published", flow=st.flow, topic=topic, error=str(exc))
            return None
        if not exists:
            if st.flow not in self._told:
                self._told.add(st.flow)
                self._log(
                    "source ends not published: the topic is missing (the mirror creates it)",
                    flow=st.flow,
                    topic=topic,
                    cluster=st.target,
                )
            return None
        if st.target not in self._producers:
            self._producers[st.target] = self._new_producer(
                self._cfg.cluster(st.target).librdkafka("producer")
            )
        publisher = EndsPublisher(
            self._producers[st.target], topic, st.flow, log=self._log, by=STATUS
        )
        self._publishers[st.flow] = publisher
        return publisher

    def _topic_on(self, cluster: str, topic: str) -> bool:
        from mm_client.kafka import new_admin

        admin = new_admin(self._cfg.cluster(cluster).librdkafka("admin"))
        # every topic's metadata, not the one topic's: asking for a missing topic by
        # name may have the broker create it with its defaults (not compacted)
        meta = admin.list_topics(timeout=5).topics.get(topic)
        return meta is not None and meta.error is None

    def close(self) -> None:
        for producer in self._producers.values():
            producer.flush(10)


def _producer(conf: Mapping[str, Any]) -> Any:
    from mm_client.kafka import latest_wins_producer_conf, new_producer

    return new_producer(latest_wins_producer_conf(conf))
