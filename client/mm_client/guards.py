"""What applying translated offsets must refuse or report: pure decisions, no I/O.

A failover done by hand goes wrong quietly in three ways, each of which looks
like success to the service:

* **no offsets at all**: a misspelt group, or one the mirror does not
  checkpoint, translates to ``{}`` (MM2's meaning); applied, the consumer starts
  at its reset policy and ``latest`` skips the backlog -> :func:`require_offsets`;
* **partitions without a checkpoint**: the group's other partitions start at the
  reset policy too -> :func:`without_checkpoint` and :func:`reset_outcome`, named
  in a warning and in the result;
* **moving backwards**: re-running a failover after the service has run on the
  target moves the group back to the checkpoint and re-processes what it already
  did -> :func:`rewinds`, refused unless the caller passes ``allow_rewind=True``;
* **the source topic's name**: ``orders`` on the target is not the mirror's copy
  (``A.orders``); committing for it hangs or, with auto-creation, makes an empty
  topic -> :func:`misnamed_topics`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mm_client.errors import NoCheckpointsError, RewindRefusedError, TopicNotOnTargetError
from mm_client.policy import ReplicationPolicy
from mm_client.topic_partition import TopicPartition
from mm_client.translated import TranslatedOffsets

__all__ = [
    "misnamed_topics",
    "refuse_rewinds",
    "require_offsets",
    "reset_outcome",
    "rewinds",
    "without_checkpoint",
]


def require_offsets(offsets: Mapping[TopicPartition, int]) -> None:
    """Raise :class:`NoCheckpointsError` when there is nothing to apply."""
    if offsets:
        return
    if isinstance(offsets, TranslatedOffsets):
        others = offsets.other_groups
        more = f" (and {len(others) - 20} more)" if len(others) > 20 else ""
        named = ", ".join(others[:20]) + more
        raise NoCheckpointsError(
            f"group {offsets.group!r} has no checkpoint from {offsets.source_alias} in "
            f"{offsets.checkpoints_topic} on {offsets.bootstrap_servers}: applied as is, its "
            "consumer would start at its auto.offset.reset (latest skips the backlog). "
            + (
                f"Groups that have checkpoints there: {named}. Check the group's name"
                if others
                else "No group has checkpoints there yet: is the checkpoint job running"
            )
            + f", and that the mirror's groups setting matches {offsets.group!r}.",
            group=offsets.group,
            other_groups=others,
        )
    raise NoCheckpointsError(
        "no offsets to apply: the mapping is empty (translate_offsets answers {} for a "
        "group without checkpoints); applied as is, the consumer would start at its "
        "auto.offset.reset",
        group=None,
        other_groups=(),
    )


def without_checkpoint(
    offsets: Mapping[TopicPartition, int], partition_counts: Mapping[str, int]
) -> list[TopicPartition]:
    """Partitions of the offsets' topics that have no offset, sorted."""
    missing = []
    for topic in sorted({tp.topic for tp in offsets}):
        for partition in range(partition_counts.get(topic, 0)):
            tp = TopicPartition(topic, partition)
            if tp not in offsets:
                missing.append(tp)
    return missing


def reset_outcome(reset: str | None) -> str:
    """What a partition without an offset does at the consumer's start, in words."""
    if reset is None:
        return (
            "start at the consumer's auto.offset.reset (librdkafka's and kafka-python's "
            "default, latest, skips their records on the target)"
        )
    value = reset.lower()
    if value in ("latest", "largest", "end"):
        return "start at auto.offset.reset=latest: their records already on the target are skipped"
    if value in ("earliest", "smallest", "beginning"):
        return "start at auto.offset.reset=earliest: read from the start of the target's log"
    return f"start at auto.offset.reset={reset} (none: the consumer raises when it reaches them)"


def rewinds(
    offsets: Mapping[TopicPartition, int], committed: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int]]:
    """Partitions the offsets would move backwards: partition -> (committed, new)."""
    return {
        tp: (committed[tp], offset)
        for tp, offset in sorted(offsets.items())
        if tp in committed and committed[tp] > offset
    }


def refuse_rewinds(
    group: str | None, moves: Mapping[TopicPartition, tuple[int, int]], cluster: str
) -> None:
    """Raise :class:`RewindRefusedError` naming every backward move, if any."""
    if not moves:
        return
    listed = ", ".join(
        f"{tp} {now} -> {new} ({now - new} offsets again)" for tp, (now, new) in moves.items()
    )
    who = "the consumer's group" if group is None else f"group {group!r}"
    raise RewindRefusedError(
        f"{who} on {cluster} has already committed past the translated offsets: "
        f"{listed}. It has consumed on this cluster since the failover (or the failover ran "
        "twice, by the team and by the operator); moving it back processes those records "
        "again. Nothing was changed; pass allow_rewind=True to move it back anyway.",
        group=group or "",
        rewinds=dict(moves),
    )


def misnamed_topics(
    topics: Iterable[str],
    on_target: Iterable[str],
    policy: ReplicationPolicy,
    source_alias: str | None,
    cluster: str,
) -> None:
    """Raise :class:`TopicNotOnTargetError` for topics the target does not have.

    The message names the mirror's copy of each: the remote name by the policy
    when ``source_alias`` is known and that topic exists, otherwise every topic on
    the target whose original name is the one asked for.
    """
    existing = set(on_target)
    absent = sorted(set(topics) - existing)
    if not absent:
        return
    suggestions: dict[str, list[str]] = {}
    for topic in absent:
        if source_alias is not None:
            remote = policy.format_remote_topic(source_alias, topic)
            found = [remote] if remote in existing else []
        else:
            found = sorted(t for t in existing if t != topic and policy.original_topic(t) == topic)
        suggestions[topic] = found
    parts = []
    for topic, found in suggestions.items():
        if found:
            parts.append(f"{topic!r} (the mirror's copy there is {' or '.join(map(repr, found))})")
        else:
            parts.append(f"{topic!r} (no mirrored copy of it either)")
    raise TopicNotOnTargetError(
        f"topic(s) not on {cluster}: {', '.join(parts)}. On the target, consume and commit "
        "the remote topic (mm_client.target_topics resolves the names); nothing was changed.",
        suggestions=suggestions,
    )
