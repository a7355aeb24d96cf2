"""`mm failover`'s proof of the translations it commits, where the source answers.

A failover commits each group's checkpointed translation on the target. When the
source still answers (a failover ahead of planned maintenance, a partial outage),
each translation is proven by content as `mm switchover` proves it: the first
committed record at or after the checkpoint's source offset must be the copy of
the first committed record at or after its target offset. Per group partition:

- ``proven``: it is, and the group has not committed past the checkpoint on the
  source since: resuming on the target reads exactly what is next on the source;
- ``conservative``: the group reads records again, never skips one: either the
  translation is behind the exact offset (the record next on the target is the
  copy of one before the checkpoint's, found within :data:`COPY_WINDOW` source
  offsets back; mm's checkpoints are behind where the offset syncs do not prove
  more), or it is exact but the group committed further on the source after its
  newest checkpoint;
- ``unprovable``: why, in words: the source did not answer, a record is gone
  (retention), or the copy is not where the translation points.

The failover never waits on the proof: the groups move as they would without it
(a source in trouble is why one fails over), and the report says what was proven.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mm.config import FlowConfig, MirrorConfig

if TYPE_CHECKING:  # imported where used: the proof's readers load Kafka clients
    from mm.dr.switchover_run import FlowReads
    from mm.verify.reads import ClusterMeta

PROVEN = "proven"
CONSERVATIVE = "conservative"
UNPROVABLE = "unprovable"

#: how long the source may take to answer before the proof is given up
ANSWER_SECONDS = 5.0
#: how far back, in source offsets, a translation behind the exact one is looked for
COPY_WINDOW = 10_000

Key = tuple[str, int]


@dataclass(frozen=True)
class MirroredEnd:
    """A translation to the end of what was mirrored: nothing follows it on the target,
    the target's last record before it is the copy of source offset ``last_copied``
    (below the checkpoint's), and the source's next record for the group,
    ``first_missing``, never reached the target."""

    last_copied: int
    first_missing: int


def classify(
    verdict: str | None,
    checkpointed: int,
    on_source: int | None,
    copy_from: int | None = None,
    mirrored_end: MirroredEnd | None = None,
) -> tuple[str, str]:
    """(status, reason) of one translation: ``verdict`` is the content proof's (None:
    exact), ``checkpointed`` the checkpoint's source offset, ``on_source`` the group's
    committed offset on the source now (None: none or unknown), ``copy_from`` where the
    translation is not exact: the source offset of the record found next on the
    target, when it is one before ``checkpointed`` (the translation is behind).

    ``mirrored_end``: the content proof found nothing after the translation on the
    target, and the record before it is the copy of one the group had read. That is
    the exact translation (one past the last mirrored record below the group's
    offset): the group skips nothing that reached the target and reads nothing
    again there; the source records from ``first_missing`` on are the failover's
    loss, which the failover point counts, not the translation's."""
    if verdict is not None and mirrored_end is not None:
        return PROVEN, (
            f"exact at the end of what was mirrored: the target's last record before it "
            f"is the copy of source offset {mirrored_end.last_copied}; source offsets from "
            f"{mirrored_end.first_missing} on never reached the target (the failover's loss)"
        )
    if verdict is not None:
        if copy_from is not None and copy_from < checkpointed:
            return CONSERVATIVE, (
                f"behind: the target's next record there is the copy of source offset "
                f"{copy_from}, so the group reads source offsets {copy_from}-"
                f"{checkpointed - 1} again"
            )
        return UNPROVABLE, verdict
    if on_source is not None and on_source > checkpointed:
        return CONSERVATIVE, (
            f"the group committed {on_source} on the source after its checkpoint at "
            f"{checkpointed}: it reads up to {on_source - checkpointed} offsets again"
        )
    return PROVEN, "the next record on the target is the copy of the next one on the source"


@dataclass(frozen=True)
class PartitionProof:
    group: str
    topic: str  # on the target
    partition: int
    status: str
    reason: str


@dataclass
class FailoverProof:
    source_answered: bool
    message: str | None = None  # why nothing could be proven (the source is down)
    partitions: list[PartitionProof] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys((PROVEN, CONSERVATIVE, UNPROVABLE), 0)
        for p in self.partitions:
            out[p.status] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "source_answered": self.source_answered,
            "message": self.message,
            **self.counts(),
            "partitions": [
                {
                    "group": p.group,
                    "topic": p.topic,
                    "partition": p.partition,
                    "status": p.status,
                    "reason": p.reason,
                }
                for p in self.partitions
            ],
        }


def prove_failover(
    cfg: MirrorConfig,
    flow: FlowConfig,
    translations: Mapping[str, Mapping[Key, tuple[int, int | None]]],
    timeout: float,
) -> FailoverProof:
    """Prove ``translations`` (group -> (target topic, partition) -> (target offset,
    checkpointed source offset)) on the source, if it answers within
    :data:`ANSWER_SECONDS`. Never raises for a source that is down or a partition
    that cannot be read: the proof says so."""
    from mm.dr.groups import TargetGroups
    from mm.dr.switchover import translation_verdict
    from mm.dr.switchover_run import FlowReads, source_offset_of_copy, translation_records
    from mm.reach import unreachable
    from mm.verify import reads

    down = unreachable(cfg, [flow.source], min(timeout, ANSWER_SECONDS))
    if down:
        return FailoverProof(False, f"not proven: {down[flow.source]}")
    try:
        f = FlowReads(cfg, flow, timeout)
        src_bounds = reads.log_bounds(f.src_consumer, f.keys, timeout, f.src_profile)
        tgt_keys = sorted({k for t in translations.values() for k in t if k[0] in f.upstream_of})
        tgt_ends = f.copy_ends(tgt_keys)
        tgt_meta = reads.cluster_meta(f.tgt_admin, f"cluster {flow.target}", timeout)
        on_source = TargetGroups(cfg.cluster(flow.source).librdkafka("admin"), timeout).committed(
            sorted(translations)
        )
    except Exception as exc:  # the source answered, then failed: say so, move on
        return FailoverProof(False, f"not proven: {flow.source} could not be read: {exc}")
    proof = FailoverProof(True)
    for group, parts in sorted(translations.items()):
        committed = on_source.get(group)
        for (tt, p), (down_offset, up_offset) in sorted(parts.items()):
            topic = f.upstream_of.get(tt)
            if topic is None or up_offset is None:
                status, reason = (
                    UNPROVABLE,
                    (
                        f"{tt} is not a topic {flow.name} mirrors now"
                        if topic is None
                        else "the checkpoint has no source offset"
                    ),
                )
            else:
                src_start, src_end = src_bounds.get((topic, p), (0, 0))
                tgt_end = tgt_ends.get((tt, p), 0)
                copy_from = None
                at_end = None
                try:
                    src_next, tgt_next = translation_records(
                        f, tgt_meta, (topic, p), up_offset, down_offset, src_end, tgt_end
                    )
                    verdict = translation_verdict(down_offset, tgt_end, src_next, tgt_next)
                    if verdict is not None and tgt_next is not None:
                        copy_from = source_offset_of_copy(
                            f, (topic, p), tgt_next, up_offset, COPY_WINDOW, src_start
                        )
                    elif verdict is not None and src_next is not None:
                        at_end = _mirrored_end(f, tgt_meta, (topic, p), src_next.offset,
                                               up_offset, down_offset, src_start)  # fmt: skip
                except Exception as exc:  # a record gone to retention, a read refused
                    verdict = f"could not be read: {exc}"
                now = None if not isinstance(committed, dict) else committed.get((topic, p))
                status, reason = classify(verdict, up_offset, now, copy_from, at_end)
            proof.partitions.append(PartitionProof(group, tt, p, status, reason))
    return proof


def _mirrored_end(
    f: FlowReads,
    tgt_meta: ClusterMeta,
    key: Key,
    first_missing: int,
    upstream: int,
    downstream: int,
    src_start: int,
) -> MirroredEnd | None:
    """:class:`MirroredEnd` when the target's last committed record before
    ``downstream`` (within :data:`COPY_WINDOW` offsets) is the copy of a source record
    below ``upstream``; None otherwise (nothing before it there, or not a copy)."""
    from mm.dr.switchover_run import last_before, source_offset_of_copy

    last = last_before(f, tgt_meta, key, downstream, COPY_WINDOW)
    if last is None:
        return None
    copied = source_offset_of_copy(f, key, last, upstream, COPY_WINDOW, src_start)
    return None if copied is None else MirroredEnd(copied, first_missing)
