"""Moving consumer groups to translated offsets on a target cluster: the per-group
decision (pure: :func:`judge_group`) and the target's group reads.

Shared by `mm failover` and `mm switchover`. A group is moved only when it is
provably idle on the target (:func:`mm.checkpoint.rules.group_is_idle`: EMPTY or
DEAD); STABLE, the rebalancing states and UNKNOWN (what some brokers answer while
a consumer joins) are refused, and so is a group whose state cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# (target topic, partition)
TP = tuple[str, int]

MOVED = "moved"
UNCHANGED = "unchanged"
DRY_RUN = "dry-run"
REFUSED = "refused"
NO_CHECKPOINTS = "no-checkpoints"
FAILED = "failed"


@dataclass(frozen=True)
class Row:
    """One partition of one group: its offset on the target before, and the translation."""

    group: str
    topic: str
    partition: int
    before: int | None
    after: int
    upstream: int | None
    note: str


@dataclass
class GroupResult:
    group: str
    status: str
    rows: list[Row] = field(default_factory=list)
    state: str | None = None
    members: int | None = None
    message: str | None = None

    @property
    def failed(self) -> bool:
        return self.status in (REFUSED, FAILED)


def note_for(before: int | None, after: int, *, dry_run: bool, refused: bool = False) -> str:
    """``refused`` for every partition of a refused group; else ``unchanged``, or what
    happens to a partition moving from ``before`` to ``after``."""
    if refused:
        return REFUSED
    if before == after:
        return UNCHANGED
    note = DRY_RUN if dry_run else MOVED
    if before is not None and after < before:
        note += ", backwards"
    return note


def plan_rows(
    group: str,
    translated: Mapping[TP, int],
    before: Mapping[TP, int],
    *,
    dry_run: bool,
    refused: bool = False,
    upstream: Mapping[TP, int] | None = None,
) -> list[Row]:
    """One row per translated partition, sorted; ``before`` lacks partitions never committed."""
    return [
        Row(
            group,
            topic,
            partition,
            before.get((topic, partition)),
            after,
            (upstream or {}).get((topic, partition)),
            note_for(before.get((topic, partition)), after, dry_run=dry_run, refused=refused),
        )
        for (topic, partition), after in sorted(translated.items())
    ]


def changes(rows: Iterable[Row]) -> dict[TP, int]:
    """The partitions whose committed offset differs from the translation."""
    return {(r.topic, r.partition): r.after for r in rows if r.before != r.after}


def group_status(rows: list[Row], *, dry_run: bool) -> str:
    if not changes(rows):
        return UNCHANGED
    return DRY_RUN if dry_run else MOVED


class TargetGroups:
    """The target cluster's group reads (one AdminClient, requests in parallel)."""

    def __init__(self, admin_conf: Mapping[str, Any], timeout: float) -> None:
        from mm_client.kafka import new_admin

        self.admin = new_admin(admin_conf)
        self.timeout = timeout

    def describe(self, groups: list[str]) -> dict[str, tuple[str, int] | Exception]:
        """Group -> (state name, members listed), or the error describing it."""
        from mm_client.kafka import describe_groups

        return {
            g: d if isinstance(d, Exception) else (d.state, d.members)
            for g, d in describe_groups(self.admin, groups, self.timeout).items()
        }

    def committed(self, groups: list[str]) -> dict[str, dict[TP, int] | Exception]:
        """Group -> its committed offsets (partitions without one left out), or the error."""
        from mm_client.kafka import group_offsets_or_errors

        out: dict[str, dict[TP, int] | Exception] = {}
        for g, tps in group_offsets_or_errors(self.admin, groups, self.timeout).items():
            if isinstance(tps, Exception):
                out[g] = tps
                continue
            bad = [tp for tp in tps if tp.error is not None]
            if bad:
                out[g] = RuntimeError(
                    f"committed offsets of group {g}: "
                    + ", ".join(f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in bad)
                )
                continue
            out[g] = {(tp.topic, tp.partition): tp.offset for tp in tps if tp.offset >= 0}
        return out


def judge_group(
    group: str,
    cluster: str,
    described: tuple[str, int] | Exception,
    before: Mapping[TP, int] | Exception,
    translated: Mapping[TP, int],
    upstream: Mapping[TP, int],
    *,
    dry_run: bool,
) -> GroupResult:
    """What failing ``group`` over on ``cluster`` does (pure): refused unless the group
    is provably idle there (its state read and EMPTY or DEAD); otherwise its rows
    and status (moved / unchanged / dry-run) before anything is committed."""
    from mm.checkpoint.rules import group_is_idle

    if isinstance(described, Exception):
        return GroupResult(
            group,
            REFUSED,
            plan_rows(group, translated, {}, dry_run=dry_run, refused=True, upstream=upstream),
            message=f"group {group!r}: its state on {cluster} could not be read, so it "
            f"cannot be shown to have no consumers there ({described}); retry when the "
            "cluster answers. Its offsets were not changed",
        )
    if isinstance(before, Exception):
        return GroupResult(group, FAILED, message=f"group {group!r}: {before}")
    state, members = described
    if not group_is_idle(state):
        joining = "; a consumer may be joining it" if state.upper() == "UNKNOWN" else ""
        return GroupResult(
            group,
            REFUSED,
            plan_rows(group, translated, before, dry_run=dry_run, refused=True, upstream=upstream),
            state,
            members,
            f"group {group!r} is not idle on {cluster} (state {state}, {members} member(s) "
            f"listed{joining}): only an Empty or Dead group is moved; stop its consumers "
            "there and retry. Its offsets were not changed",
        )
    rows = plan_rows(group, translated, before, dry_run=dry_run, upstream=upstream)
    return GroupResult(group, group_status(rows, dry_run=dry_run), rows, state, members)


def _failed(row: Row) -> Row:
    if row.note == UNCHANGED:
        return row
    return Row(row.group, row.topic, row.partition, row.before, row.after, row.upstream, FAILED)


def move_groups(
    admin_conf: Mapping[str, Any],
    cluster: str,
    translations: Mapping[str, Mapping[TP, tuple[int, int | None]]],
    dry_run: bool,
    timeout: float,
) -> dict[str, GroupResult]:
    """Commit each group's translated offsets on ``cluster`` where :func:`judge_group`
    allows it. ``translations``: group -> (target topic, partition) -> (translated
    offset, source offset or None). A failed commit fails that group only."""
    from mm_client import commit_group_offsets

    from mm.errors import MirrorError

    groups = sorted(translations)
    if not groups:
        return {}
    reads = TargetGroups(admin_conf, timeout)
    described = reads.describe(groups)
    committed = reads.committed(groups)
    out: dict[str, GroupResult] = {}
    for g in groups:
        translated = {tp: after for tp, (after, _up) in translations[g].items()}
        upstream = {tp: up for tp, (_after, up) in translations[g].items() if up is not None}
        result = judge_group(
            g, cluster, described[g], committed[g], translated, upstream, dry_run=dry_run
        )
        todo = changes(result.rows) if result.status not in (REFUSED, FAILED) else {}
        if todo and not dry_run:
            try:
                # judge_group has decided every move, backward ones included
                commit_group_offsets(admin_conf, g, todo, timeout, allow_rewind=True)
            except MirrorError as exc:
                result = GroupResult(
                    g,
                    FAILED,
                    [_failed(r) for r in result.rows],
                    result.state,
                    result.members,
                    f"group {g!r}: committing its offsets on {cluster} failed: {exc}",
                )
        out[g] = result
    return out
