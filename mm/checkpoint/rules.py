"""When to emit a checkpoint and when to sync a group's offsets (pure; no I/O).

Checkpoints (per group and partition):

* **never ahead of the mirror**: a checkpoint is only built from an answer of
  :meth:`OffsetSyncStore.translate`, which is None for an offset the mirror has
  not passed; then nothing newer is emitted for that partition;
* **never backwards, unless the last one is ahead**: a translation below the
  last emitted downstream offset is emitted when the group itself moved
  backwards on the source (its committed offset is below the last emitted
  upstream offset), or when the history now proves the last checkpoint ahead:
  its downstream offset is above the highest the exact translation of the
  group's offset can be (``bound``, :meth:`mm.checkpoint.store.PartitionHistory.bound`;
  a target topic deleted and mirrored again, a checkpoint an older version or
  another writer's history put too far). Otherwise (a conservative translation
  of a stretch the last checkpoint translated exactly) the last one stands;
* **only when changed**: the same (upstream, downstream, metadata) is not
  written twice.

Group offset sync (KIP-545, ``sync.group.offsets.enabled``): translated offsets
are committed into the same group on the target only while that group has no
active members there, and only forward, except for partitions where the target
group has no offset at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm_client.records import Checkpoint

# (target topic, partition)
TP = tuple[str, int]


@dataclass(frozen=True)
class GroupOffset:
    """A source group's committed offset for one source partition."""

    offset: int
    metadata: str = ""


def should_emit(
    last: Checkpoint | None,
    upstream: int,
    downstream: int,
    metadata: str,
    bound: int | None = None,
) -> bool:
    """May a checkpoint (upstream, downstream, metadata) follow ``last`` for its key?

    ``bound``: the highest the exact translation of ``upstream`` can be (None: unknown).
    """
    if last is None:
        return True
    if (last.upstream_offset, last.downstream_offset, last.metadata) == (
        upstream,
        downstream,
        metadata,
    ):
        return False
    if downstream < last.downstream_offset:
        # backwards only when the group went backwards on the source, or the last
        # checkpoint is proven ahead
        return upstream < last.upstream_offset or _proven_ahead(last, bound)
    return True


def _proven_ahead(last: Checkpoint, bound: int | None) -> bool:
    return bound is not None and last.downstream_offset > bound


def next_checkpoint(
    group: str,
    target_topic: str,
    partition: int,
    committed: GroupOffset,
    translated: int | None,
    last: Checkpoint | None,
    bound: int | None = None,
) -> Checkpoint | None:
    """The checkpoint to emit now for one group partition, or None."""
    if translated is None or committed.offset < 0:
        return None
    if not should_emit(last, committed.offset, translated, committed.metadata, bound):
        return None
    return Checkpoint(
        group, target_topic, partition, committed.offset, translated, committed.metadata
    )


def is_backwards(
    last: Checkpoint | None, upstream: int, translated: int | None, bound: int | None = None
) -> bool:
    """True when a translation was withheld because it would move a checkpoint back."""
    return (
        last is not None
        and translated is not None
        and translated < last.downstream_offset
        and upstream >= last.upstream_offset
        and not _proven_ahead(last, bound)
    )


IDLE_STATES = frozenset({"EMPTY", "DEAD"})


def group_is_idle(state: str) -> bool:
    """No members on the target, nor any joining: EMPTY or DEAD only.

    Any other state means members, even when the broker lists none: STABLE and the
    rebalancing states (some brokers describe a stable group with an empty member
    list), and UNKNOWN, which some brokers answer while a consumer is joining
    (commits into the group then fail with UNKNOWN_MEMBER_ID). A group that never
    existed is DEAD on Apache Kafka and EMPTY on some brokers. (The embedded
    broker does all three, see :mod:`mm.kafka.profile`.)
    """
    return state.upper() in IDLE_STATES


def plan_group_sync(
    checkpoints: Mapping[TP, int], target_offsets: Mapping[TP, int]
) -> dict[TP, int]:
    """Offsets to commit into an idle target group: forward only, or where it has none."""
    out: dict[TP, int] = {}
    for tp, offset in checkpoints.items():
        have = target_offsets.get(tp, -1)
        if have < 0 or offset > have:
            out[tp] = offset
    return out
