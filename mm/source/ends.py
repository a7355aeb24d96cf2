"""The source end offsets jobs have seen, kept on the target for the failover point.

The mirror's planner lists every mirrored partition's end offset (read_committed)
for each micro-batch; `mm status --watch` / `--serve` reads them every round. At
most every :data:`PUBLISH_INTERVAL_S` each writes them as one record to
``mm-mirror-ends.<source>.internal`` on the target (value: JSON ``{"flow",
"time_ms", "ends": {topic: {partition: end}}, "by"}``; key: the flow for the
mirror, ``<flow>@<by>`` for another job, so compaction keeps the newest of each:
one job's older read never replaces another's newer one). When the source is
unreachable, `mm failover` takes the newest of them (by ``time_ms``): with the
mirror's committed position it gives a lower bound on what the source held that
never reached the target, without asking the source.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Key = tuple[str, int]

ENDS_TOPIC = "mm-mirror-ends.{source}.internal"
PUBLISH_INTERVAL_S = 1.0  # the loss estimate is at most this stale (plus one read)
ENDS_TOPIC_CONFIG = {"cleanup.policy": "compact"}
MIRROR = "mirror"  # records without "by" are the mirror's (written before it existed)
STATUS = "status"


def ends_topic(source: str) -> str:
    return ENDS_TOPIC.format(source=source)


def ends_key(flow: str, by: str = MIRROR) -> bytes:
    """The record key of ``by``'s publications for ``flow`` (the mirror's: the flow)."""
    return (flow if by == MIRROR else f"{flow}@{by}").encode()


@dataclass(frozen=True)
class SeenEnds:
    flow: str
    time_ms: int  # when the job read them
    ends: dict[Key, int]
    by: str = MIRROR  # the job that read them


def encode_ends(
    flow: str, time_ms: int, ends: Mapping[Key, int], by: str = MIRROR
) -> tuple[bytes, bytes]:
    by_topic: dict[str, dict[str, int]] = {}
    for (t, p), end in sorted(ends.items()):
        by_topic.setdefault(t, {})[str(p)] = end
    value: dict[str, Any] = {"flow": flow, "time_ms": time_ms, "ends": by_topic}
    if by != MIRROR:  # the mirror's records stay as they were
        value["by"] = by
    return ends_key(flow, by), json.dumps(value, separators=(",", ":")).encode()


def decode_ends(value: bytes | None) -> SeenEnds:
    """Raises ValueError naming what is wrong."""
    try:
        if value is None:
            raise ValueError("null value")
        doc = json.loads(value)
        ends = {
            (t, int(p)): int(end) for t, parts in doc["ends"].items() for p, end in parts.items()
        }
        return SeenEnds(str(doc["flow"]), int(doc["time_ms"]), ends, str(doc.get("by", MIRROR)))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a mirror-ends record ({exc!r}): {(value or b'')[:80]!r}") from None


def newest_seen(publications: Mapping[str, SeenEnds | None]) -> SeenEnds | None:
    """The newest read among each job's newest publication (None: none valid)."""
    valid = [s for s in publications.values() if s is not None]
    return max(valid, key=lambda s: s.time_ms, default=None)


class EndsPublisher:
    """Produces the ends seen at most every ``interval`` seconds (asynchronously: a
    failed delivery is logged, the next publication replaces it)."""

    def __init__(
        self,
        producer: Any,
        topic: str,
        flow: str,
        interval: float = PUBLISH_INTERVAL_S,
        log: Callable[..., None] | None = None,
        clock: Callable[[], float] = time.time,
        by: str = MIRROR,
    ) -> None:
        self._producer, self._topic, self._flow, self._by = producer, topic, flow, by
        self._interval, self._log, self._clock = interval, log, clock
        self._last = float("-inf")
        # the planner's thread and the refresher's (EndsRefresher) both publish
        self._lock = threading.Lock()

    @property
    def interval(self) -> float:
        return self._interval

    def due(self) -> bool:
        return self._clock() - self._last >= self._interval

    def seen(self, ends: Mapping[Key, int], read_at: float | None = None) -> bool:
        """Publish ``ends`` if the last publication is ``interval`` old; True if it did.
        ``read_at``: when the read of ``ends`` started (default: now)."""
        with self._lock:
            now = self._clock()
            self._producer.poll(0)  # serve the previous delivery report
            if now - self._last < self._interval or not ends:
                return False
            at = now if read_at is None else read_at
            key, value = encode_ends(self._flow, int(at * 1000), ends, self._by)
            self._producer.produce(self._topic, value, key, on_delivery=self._delivered)
            self._last = now
            return True

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None and self._log is not None:
            self._log("source ends not published", topic=self._topic, error=str(err))

    def close(self) -> None:
        self._producer.flush(10)


class EndsRefresher(threading.Thread):
    """Keeps the published ends fresh while a micro-batch runs.

    The planner reads the ends once per micro-batch; a batch that takes a minute (a
    backlog, a slow broker) would leave the newest publication a minute old, and a
    failover in that minute would underestimate the loss. This thread reads them
    itself whenever the last publication is due again.
    """

    def __init__(
        self,
        publisher: EndsPublisher,
        read: Callable[[Sequence[Key]], Mapping[Key, int]],
        log: Callable[..., None] | None = None,
        step: float = 0.25,
    ) -> None:
        super().__init__(name="mm-mirror-ends", daemon=True)
        self._publisher, self._read, self._log, self._step = publisher, read, log, step
        self._partitions: tuple[Key, ...] = ()
        self._halt = threading.Event()

    def watch(self, partitions: Sequence[Key]) -> None:
        """The mirrored partitions (the planner's newest topic list)."""
        self._partitions = tuple(partitions)

    def halt(self) -> None:
        self._halt.set()

    def run(self) -> None:
        while not self._halt.wait(self._step):
            partitions = self._partitions
            if not partitions or not self._publisher.due():
                continue
            try:
                self._publisher.seen(self._read(partitions))
            except Exception as exc:
                # the source may be down: that is when the last publication matters
                # most, and it stays; the planner reports the source's errors itself
                if self._log is not None:
                    self._log("source ends not read", error=str(exc))
                self._halt.wait(self._publisher.interval)  # not a line per step
