"""The failover point: where the mirror stood when consumers left the source (pure).

Per mirrored partition: the mirror's committed position on the target (the next
source offset it would have copied: everything below it is on the target, nothing
at or after it), the newest source end seen and, from the two, the loss: offsets
the source held that never reached the target (transaction markers included), and
the seconds of data they span at most (from the newest mirrored record's timestamp
to when that end was seen). It is recorded on the target by `mm failover`, so
failing back later knows which records on the source diverged.

The figure has a kind (:func:`loss_kind`), and :func:`loss_sentence` says it in the
words the runbook and the drill use:

- ``exact``: the source answered at the failover and its ends were read then;
- ``lower_bound``: it did not; the ends are the newest a job published
  (:mod:`mm.source.ends`), seen some seconds before the failover: what the source
  acknowledged after that is not counted, so the real loss is at least this. A 0
  here is "0 known", never "nothing lost";
- ``unknown``: no published end covers every partition.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

Key = tuple[str, int]

FAILOVER_POINTS_TOPIC = "mm-failover-points.{source}.internal"

EXACT = "exact"
LOWER_BOUND = "lower_bound"
UNKNOWN = "unknown"
#: who saw the ends: the source itself, read at the failover, else a job's publication
SEEN_AT_FAILOVER = "source"


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
    ends_seen_ms: int | None  # when the ends below were read (None: never published)
    partitions: list[PartitionPoint] = field(default_factory=list)
    # SEEN_AT_FAILOVER, or the job that published them ("mirror", "status"); points
    # recorded before this field existed hold published ends: "mirror"
    ends_seen_by: str | None = None
    # why the source's ends were not read at the failover (None: they were, or no try)
    source_unread: str | None = None

    @property
    def loss_kind(self) -> str:
        return loss_kind(self.loss_offsets, self.ends_seen_by)

    @property
    def ends_age_seconds(self) -> float | None:
        """How long before the point was taken the ends were seen."""
        return ends_age(self.recorded_ms, self.ends_seen_ms)

    @property
    def loss_offsets(self) -> int | None:
        """Total loss; None when some partition's loss is unknown, or no end was seen
        (no partition either: nothing known, not 0)."""
        losses = [p.loss_offsets for p in self.partitions]
        if self.ends_seen_ms is None or any(x is None for x in losses):
            return None
        return sum(x for x in losses if x is not None)

    @property
    def loss_seconds(self) -> float | None:
        """The largest span of unmirrored data; None when unknown."""
        spans = [p.loss_seconds for p in self.partitions]
        return None if any(x is None for x in spans) else max(spans, default=0.0)  # type: ignore[type-var]

    def to_json(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in asdict(self).items() if k != "partitions"},
            "loss_offsets": self.loss_offsets,
            "loss_kind": self.loss_kind,
            "ends_age_seconds": self.ends_age_seconds,
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
                # absent from points recorded before the figure had a kind: those
                # were always taken against the mirror's published ends
                doc.get("ends_seen_by", None if doc["ends_seen_ms"] is None else "mirror"),
                doc.get("source_unread"),
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
    ends_seen_by: str | None = "mirror",
    source_unread: str | None = None,
) -> FailoverPoint:
    """The point from the mirror's positions and the ends it saw (both keyed by source
    partition) and the newest mirrored timestamps (keyed by source partition).

    The point covers the partitions of the topics the flow mirrors (``mirrored``, the
    configured topic filter) that have a position or a published end: a position
    left by a topic the flow no longer mirrors is not part of it, and neither is an
    end published by a mirror of another topic list. A partition the published ends
    do not cover (none published, or an older publication than its position) is kept
    with its loss unknown, never dropped: failback must know every mirrored partition.

    ``ends_seen_by``: :data:`SEEN_AT_FAILOVER` when ``ends_seen`` are the source's
    ends read now (the figure is exact), else the job that published them (a lower
    bound); ``source_unread`` says why the source was not read.
    """
    ends_keys = set(ends_seen) if ends_seen is not None else set()
    keys = sorted(k for k in set(positions) | ends_keys if mirrored(k[0]))
    by = None if ends_seen is None else ends_seen_by
    point = FailoverPoint(flow, source, target, recorded_ms, ends_seen_ms, [], by, source_unread)
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


def loss_kind(loss_offsets: int | None, ends_seen_by: str | None) -> str:
    """``exact`` | ``lower_bound`` | ``unknown`` (see the module's docstring)."""
    if loss_offsets is None:
        return UNKNOWN
    return EXACT if ends_seen_by == SEEN_AT_FAILOVER else LOWER_BOUND


def ends_age(recorded_ms: int, ends_seen_ms: int | None) -> float | None:
    """Seconds from when the ends were seen to the failover (never negative: the
    ends of another host's clock may be a little ahead)."""
    return None if ends_seen_ms is None else max(0.0, (recorded_ms - ends_seen_ms) / 1000)


def loss_sentence(
    kind: str,
    offsets: int | None,
    age_seconds: float | None,
    seen_by: str | None,
    source: str = "A",
) -> str:
    """The figure in words, as `mm failover` prints it and the drill reports it.

    Never a bare 0 unless exact: a lower bound says how much is known and how long
    before the failover the source was last seen."""
    if kind == EXACT:
        return (
            f"loss: {offsets} offsets not mirrored, exact: {source} answered, its end "
            "offsets were read at the failover (records and transaction markers)"
        )
    if kind == LOWER_BOUND:
        age = "an unknown time" if age_seconds is None else f"{age_seconds:.1f} s"
        return (
            f"loss: at least {offsets} offsets not mirrored ({offsets} known), a lower "
            f"bound: {source} was last seen {age} before the failover (by the {seen_by}); "
            f"records {source} acknowledged after that are not counted"
        )
    if age_seconds is None:
        return (
            f"loss: unknown: {source} was not read at the failover and no end offsets of "
            f"{source} that a job published could be read"
        )
    return (
        f"loss: unknown: the end offsets of {source} last seen ({age_seconds:.1f} s before "
        f"the failover, by the {seen_by}) do not cover every mirrored partition"
    )


def point_loss_sentence(point: FailoverPoint) -> str:
    return loss_sentence(
        point.loss_kind, point.loss_offsets, point.ends_age_seconds, point.ends_seen_by,
        point.source,
    )  # fmt: skip
