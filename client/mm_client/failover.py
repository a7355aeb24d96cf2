"""Failover of consumer groups from a source cluster to its mirror, in Python.

The Python counterpart of MM2's ``RemoteClusterUtils.translateOffsets``:

* :func:`translate_offsets` - one group's translated offsets, from the
  checkpoints the mirror wrote to ``<source>.checkpoints.internal`` on the
  target; keys are *target* partitions (``A.orders``/0), values the offsets to
  resume at. Exact: the checkpoint job translates through offset syncs;
* :func:`translate_all` - every group matching a regex, from one read;
* :func:`plan_failover` - exact offsets where a checkpoint exists and, when the
  source is still reachable, a timestamp-based estimate for the group's other
  partitions, kept apart in ``.approximate`` (see :mod:`mm_client.fallback`).

Put the result into a consumer with :mod:`mm_client.consumers`
(``assign_translated``, ``seek_to_translated``, ``commit_translated``,
``commit_group_offsets``).

A checkpoint is as fresh as the last one the checkpoint job emitted: a group
that committed on the source after it resumes a little earlier on the target
and re-reads those records (never skips them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mm_client.checkpoints_reader import CheckpointSnapshot, GroupSelector, read_checkpoints
from mm_client.cluster_errors import ClusterUnavailableError
from mm_client.connection import Deadline, prepare
from mm_client.fallback import ApproximateOffset, by_timestamp
from mm_client.policy import ReplicationPolicy
from mm_client.topic_partition import TopicPartition
from mm_client.translated import TranslatedOffsets

__all__ = ["FailoverPlan", "plan_failover", "translate_all", "translate_offsets"]

logger = logging.getLogger("mm_client.failover")


def translate_offsets(
    config: Mapping[str, Any],
    source_alias: str,
    group: str,
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> TranslatedOffsets:
    """``group``'s offsets on the target, from the newest checkpoint per partition.

    ``config``: librdkafka properties of the cluster holding the checkpoints (the
    target of the ``source_alias`` -> target flow). Returns ``{}`` when the group
    has no checkpoint (MM2's meaning). The dict is a :class:`TranslatedOffsets`
    that also knows the group and the groups that do have checkpoints: the
    helpers of :mod:`mm_client.consumers` refuse an empty one with their names.
    Undecodable records are skipped and logged (warning on the
    ``mm_client.checkpoints`` logger); use
    :func:`mm_client.read_checkpoints` to get their count.

    Raises :class:`~mm_client.cluster_errors.CheckpointsUnavailableError` within
    ``timeout`` seconds if the cluster does not answer, the checkpoints topic does
    not exist, or its end cannot be reached.
    """
    if not isinstance(group, str) or not group:
        raise ValueError(f"group must be a non-empty string: {group!r}")
    snapshot = read_checkpoints(
        config, source_alias, lambda g: g == group, timeout, replication_policy=replication_policy
    )
    return _translated(snapshot, source_alias, group)


def _translated(snapshot: CheckpointSnapshot, source_alias: str, group: str) -> TranslatedOffsets:
    return TranslatedOffsets(
        snapshot.offsets(group),
        group=group,
        source_alias=source_alias,
        bootstrap_servers=snapshot.bootstrap_servers,
        checkpoints_topic=snapshot.topic,
        other_groups=snapshot.groups + sorted(snapshot.other_groups),
    )


def translate_all(
    config: Mapping[str, Any],
    source_alias: str,
    groups: GroupSelector = ".*",
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> dict[str, TranslatedOffsets]:
    """Every matching group's offsets (as :func:`translate_offsets`), from one read.

    ``groups``: a regex that must match the whole group name (MM2's ``groups``
    convention), a compiled pattern, or a predicate. Groups without checkpoints
    are absent from the result.
    """
    snapshot = read_checkpoints(
        config, source_alias, groups, timeout, replication_policy=replication_policy
    )
    return {
        group: TranslatedOffsets(
            offsets,
            group=group,
            source_alias=source_alias,
            bootstrap_servers=snapshot.bootstrap_servers,
            checkpoints_topic=snapshot.topic,
        )
        for group, offsets in snapshot.all_offsets().items()
    }


@dataclass(frozen=True)
class FailoverPlan:
    """Where ``group`` should resume on the target, exact and approximate kept apart.

    * ``exact``: target partition -> offset from a checkpoint;
    * ``approximate``: target partition -> :class:`ApproximateOffset` found by
      timestamp, for partitions the group committed on the source but that have
      no checkpoint (only when the source was given and answered);
    * ``unresolved``: *source* partition -> why no offset could be found;
    * ``skipped_records``: undecodable records skipped in the checkpoints topic;
    * ``fallback_error``: why the timestamp fallback did not run, if it failed
      (e.g. the source cluster is down, which is the usual reason to fail over).
    """

    group: str
    exact: dict[TopicPartition, int] = field(default_factory=dict)
    approximate: dict[TopicPartition, ApproximateOffset] = field(default_factory=dict)
    unresolved: dict[TopicPartition, str] = field(default_factory=dict)
    skipped_records: int = 0
    fallback_error: str | None = None

    @property
    def complete(self) -> bool:
        """Nothing approximate, unresolved or failed.

        Without a source cluster only checkpointed partitions are known, so a plan
        made without ``source_config`` is complete whenever its checkpoints are read.
        """
        return not self.approximate and not self.unresolved and self.fallback_error is None

    def offsets(self, *, include_approximate: bool = False) -> dict[TopicPartition, int]:
        """Offsets to hand to the seek/commit helpers.

        Exact ones only, unless ``include_approximate`` is set: the caller opts in
        to mixing estimates with exact offsets explicitly.
        """
        out = dict(self.exact)
        if include_approximate:
            for tp, approx in self.approximate.items():
                out.setdefault(tp, approx.offset)
        if isinstance(self.exact, TranslatedOffsets):
            # keeps what the helpers need to name the groups that do have checkpoints
            return self.exact.with_offsets(out)
        return out


def plan_failover(
    target_config: Mapping[str, Any],
    source_alias: str,
    group: str,
    *,
    source_config: Mapping[str, Any] | None = None,
    partitions: Iterable[tuple[str, int]] | None = None,
    timeout: float = 30.0,
    replication_policy: ReplicationPolicy | None = None,
) -> FailoverPlan:
    """Exact offsets from checkpoints, plus timestamp estimates where there are none.

    Without ``source_config`` (the source is gone) the plan holds the exact
    offsets only. With it, the group's committed offsets on the source say which
    partitions it consumes (or ``partitions``: *source* partitions to consider);
    those without a checkpoint are estimated by timestamp
    (:func:`mm_client.translate_by_timestamp`). If the source does not answer,
    the plan still holds the exact offsets and says why in ``fallback_error``.

    ``timeout`` bounds the whole call. Raises
    :class:`~mm_client.cluster_errors.CheckpointsUnavailableError` if the
    checkpoints cannot be read.
    """
    deadline = Deadline(timeout)
    target_conf, policy = prepare(target_config, replication_policy)
    snapshot = read_checkpoints(
        target_conf,
        source_alias,
        lambda g: g == group,
        deadline.remaining(0.001),
        replication_policy=policy,
    )
    exact = _translated(snapshot, source_alias, group)
    if source_config is None:
        return FailoverPlan(group, exact, skipped_records=snapshot.skipped)
    source_conf, _ = prepare(source_config)
    if deadline.remaining() < 0.1:
        return FailoverPlan(
            group,
            exact,
            skipped_records=snapshot.skipped,
            fallback_error=f"no time left for the timestamp fallback within {timeout:g}s",
        )
    try:
        fallback = by_timestamp(
            source_conf,
            target_conf,
            policy,
            source_alias,
            group,
            partitions,
            deadline,
            skip_targets=exact.keys(),
        )
    except ClusterUnavailableError as exc:
        logger.warning("timestamp fallback for group %s did not run: %s", group, exc)
        return FailoverPlan(group, exact, skipped_records=snapshot.skipped, fallback_error=str(exc))
    if fallback.approximate:
        logger.warning(
            "group %s: %d partition(s) without checkpoint translated approximately by timestamp",
            group,
            len(fallback.approximate),
        )
    return FailoverPlan(
        group,
        exact,
        dict(fallback.approximate),
        dict(fallback.unresolved),
        snapshot.skipped,
    )
