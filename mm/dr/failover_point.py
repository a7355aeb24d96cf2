"""The failover point: where the mirror stood when consumers left the source (pure).

Per mirrored partition: the mirror's committed position on the target (the next
source offset it would have copied: everything below it is on the target, nothing
at or after it), the newest source end the mirror saw (:mod:`mm.source.ends`) and,
from the two, the estimated loss: offsets the source held that never reached the
target (transaction markers included, so an upper bound on records), and the
seconds of data they span (from the newest mirrored record's timestamp to when
that end was seen). It is recorded on the target by `mm failover`, so failing
back later knows which records on the source diverged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

Key = tuple[str, int]

FAILOVER_POINTS_TOPIC = "mm-failover-points.{source}.internal"


def failover_points_topic(source: str) -> str:
    return FAILOVER_POINTS_TOPIC.format(source=source)


@dataclass
class PartitionPoint:
    topic: str
    partition: int
    target_topic: str
    mirrored_to: int | None  # the mirror's position (exclusive); None: never mirrored
    source_end_seen: int | None  # None: the mirror published no end for it
    newest_mirrored_ms: int | None  # timestamp of the newest record on the target
    loss_offsets: int | None = None
    loss_seconds: float | None = None


@dataclass
class FailoverPoint:
    flow: str
    source: str
    target: str
    recorded_ms: int
    ends_seen_ms: int | None  # when the mirror read the ends below (None: never published)
    partitions: list[PartitionPoint] = field(default_factory=list)

    @property
    def loss_offsets(self) -> int | None:
        """Total estimated loss; None when some partition's loss is unknown."""
        losses = [p.loss_offsets for p in self.partitions]
        return None if any(x is None for x in losses) else sum(x for x in losses if x is not None)

    @property
    def loss_seconds(self) -> float | None:
        """The largest span of unmirrored data; None when unknown."""
        spans = [p.loss_seconds for p in self.partitions]
        return None if any(x is None for x in spans) else max(spans, default=0.0)  # type: ignore[type-var]

    def to_json(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in asdict(self).items() if k != "partitions"},
            "loss_offsets": self.loss_offsets,
            "loss_seconds": self.loss_seconds,
            "partitions": [asdict(p) for p in self.partitions],
        }

    def encode(self) -> tuple[bytes, bytes]:
        return self.flow.encode(), json.dumps(self.to_json(), separators=(",", ":")).encode()

    @staticmethod
    def decode(value: bytes | None) -> FailoverPoint:
        """Raises ValueError naming what is wrong."""
        try:
            if value is None:
                raise ValueError("null value")
            doc = json.loads(value)
            parts = [PartitionPoint(**p) for p in doc["partitions"]]
            return FailoverPoint(
                doc["flow"],
                doc["source"],
                doc["target"],
                int(doc["recorded_ms"]),
                doc["ends_seen_ms"],
                parts,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a failover point ({exc!r}): {(value or b'')[:80]!r}") from None


def failover_point(
    flow: str,
    source: str,
    target: str,
    recorded_ms: int,
    positions: Mapping[Key, int],
    ends_seen: Mapping[Key, int] | None,
    ends_seen_ms: int | None,
    newest_ms: Mapping[Key, int | None],
    remote: Callable[[str], str],
    mirrored: Callable[[str], bool] = lambda _topic: True,
) -> FailoverPoint:
    """The point from the mirror's positions and the ends it saw (both keyed by source
    partition) and the newest mirrored timestamps (keyed by source partition).

    The point covers the partitions of the topics the flow mirrors (``mirrored``, the
    configured topic filter) that have a position or a published end: a position
    left by a topic the flow no longer mirrors is not part of it, and neither is an
    end published by a mirror of another topic list. A partition the published ends
    do not cover (none published, or an older publication than its position) is kept
    with its loss unknown, never dropped: failback must know every mirrored partition.
    """
    ends_keys = set(ends_seen) if ends_seen is not None else set()
    keys = sorted(k for k in set(positions) | ends_keys if mirrored(k[0]))
    point = FailoverPoint(flow, source, target, recorded_ms, ends_seen_ms)
    for t, p in keys:
        pos = positions.get((t, p))
        end = None if ends_seen is None else ends_seen.get((t, p))
        newest = newest_ms.get((t, p))
        row = PartitionPoint(t, p, remote(t), pos, end, newest)
        if end is not None:
            row.loss_offsets = max(0, end - (pos or 0))
            if row.loss_offsets == 0:
                row.loss_seconds = 0.0
            elif newest is not None and ends_seen_ms is not None:
                row.loss_seconds = max(0.0, (ends_seen_ms - newest) / 1000)
        point.partitions.append(row)
    return point
