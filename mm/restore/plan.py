"""What a restore does, decided from the backup's catalogs and files (pure).

**Names.** A backed-up topic ``orders`` is restored to ``<topic prefix>orders``
on the target cluster, partition for partition (never remapped). Per target
partition, the restore's position (the next *original* offset to restore) is
committed in the state group :func:`state_group` together with the records (one
transaction, the mirror's design), and each transaction also writes the offset
mapping of its records to the topic :func:`mapping_topic`; the transactional id
is :func:`transactional_id`.

**Point in time.** ``--until T`` restores each partition up to, not including,
its first record with a timestamp after ``T`` (what Kafka's offsetsForTimes(T+1)
names): a prefix of the log, never a log with holes. Records without a
timestamp (-1) never stop it. A later restore without ``--until`` (or with a
later one) continues from where this one stopped.

**Groups.** The group offsets of the newest backup run at or before ``T`` (the
newest run without ``--until``) are restored: a group committed at original
offset ``U`` resumes at the first restored record whose original offset is
``>= U`` (:func:`mm.backup.groups.resume_offset`), through the mapping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mm.backup.catalog import PartitionCatalog, SegmentEntry
from mm.backup.groups import GroupOffset, OffsetRun, resume_offset

Key = tuple[str, int]


def state_group(region: str) -> str:
    return f"mm-restore-{region}"


def mapping_topic(region: str) -> str:
    # ".internal": backups (backup.topics.exclude) and mirrors leave it out by default
    return f"mm-restore-offsets.{region}.internal"


def transactional_id(region: str, target_topic: str, partition: int) -> str:
    return f"mm-restore-{region}-{target_topic}-{partition}"


def target_topic_name(prefix: str, topic: str) -> str:
    return f"{prefix}{topic}"


def check_topic_prefix(prefix: str) -> str:
    """Raises ValueError naming what a topic prefix may hold."""
    if prefix and not re.fullmatch(r"[a-zA-Z0-9._-]+", prefix):
        raise ValueError(
            f"--topic-prefix {prefix!r}: expected letters, digits, '.', '_' or '-' only"
        )
    return prefix


def segments_from(catalog: PartitionCatalog, position: int) -> tuple[SegmentEntry, ...]:
    """The visible segments holding offsets at or past ``position``, in offset order."""
    return tuple(e for e in catalog.visible() if e.end >= position)


def start_position(catalog: PartitionCatalog, committed: int) -> int:
    """The next original offset to restore: the committed one, or the backup's first
    offset when nothing was restored yet (``committed`` < 0)."""
    if committed >= 0:
        return committed
    visible = catalog.visible()
    return visible[0].start if visible else 0


def past_until(timestamp: int, until_ms: int | None) -> bool:
    """True for the first record a restore up to ``until_ms`` must not restore."""
    return until_ms is not None and timestamp >= 0 and timestamp > until_ms


def pick_group_snapshot(times_ms: Iterable[int], until_ms: int | None) -> int | None:
    """The backup run whose group offsets are restored: the newest at or before
    ``until_ms`` (the newest of all without it); None when there is none."""
    eligible = [t for t in times_ms if until_ms is None or t <= until_ms]
    return max(eligible) if eligible else None


# --- the offset mapping -----------------------------------------------------------------


@dataclass(frozen=True)
class MappingRecord:
    """One run of a transaction: original offsets ``original ..`` restored at ``restored ..``."""

    topic: str  # the target topic
    partition: int
    original: int
    restored: int
    count: int

    def key(self) -> bytes:
        return f"{self.topic}:{self.partition}".encode()

    def value(self) -> bytes:
        return json.dumps(
            {
                "topic": self.topic,
                "partition": self.partition,
                "original": self.original,
                "restored": self.restored,
                "count": self.count,
            },
            separators=(",", ":"),
        ).encode()

    @property
    def run(self) -> OffsetRun:
        return OffsetRun(self.original, self.restored, self.count)


def decode_mapping(value: bytes | None, where: str) -> MappingRecord:
    """Raises ValueError naming ``where`` when the record is not a mapping run."""
    try:
        d = json.loads(value or b"")
        m = MappingRecord(
            str(d["topic"]),
            int(d["partition"]),
            int(d["original"]),
            int(d["restored"]),
            int(d["count"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{where}: not a restore offset mapping ({exc!r})") from None
    if m.count < 1 or m.original < 0 or m.restored < 0:
        raise ValueError(f"{where}: mapping {m}: expected offsets >= 0 and count >= 1")
    return m


def transaction_runs(
    topic: str, partition: int, originals: Sequence[int], first_restored: int
) -> list[MappingRecord]:
    """The mapping runs of one transaction whose records (original offsets
    ``originals``, increasing) were written at ``first_restored ..`` one after another."""
    out: list[MappingRecord] = []
    for i, o in enumerate(originals):
        r = first_restored + i
        last = out[-1] if out else None
        if last is not None and o == last.original + last.count:
            out[-1] = MappingRecord(topic, partition, last.original, last.restored, last.count + 1)
        else:
            out.append(MappingRecord(topic, partition, o, r, 1))
    return out


def merge_runs(runs: Iterable[OffsetRun]) -> tuple[OffsetRun, ...]:
    """A partition's runs in the order they were written, as one increasing mapping
    of the target topic's newest incarnation.

    A run that restores original offsets an earlier run already covers replaces
    that part of the earlier one: on Apache Kafka the mapping is read
    read_committed and runs never overlap; a broker that serves an aborted
    transaction's records (the embedded broker does) shows the aborted attempt first,
    then the committed retry of the same offsets, at higher target offsets (the
    aborted records and their marker hold the ones between).

    Target offsets only grow within one partition's log, so a run written below the
    restored offsets before it belongs to a new topic of the same name: the target
    topic was deleted and restored again. The runs before it describe records that
    topic no longer has, and are dropped. (A truncated target partition cannot
    produce such a run: a restore refuses to write into a partition whose end is
    below its mapping, :func:`current_runs`.)
    """
    kept: list[OffsetRun] = []
    for run in runs:
        if kept and run.restored < kept[-1].restored + kept[-1].count:
            kept.clear()  # a new incarnation of the target topic
        while kept and kept[-1].original >= run.original:
            kept.pop()
        if kept and kept[-1].original_last >= run.original:
            last = kept[-1]
            kept[-1] = OffsetRun(last.original, last.restored, run.original - last.original)
        kept.append(run)
    return tuple(kept)


def current_runs(runs: Sequence[OffsetRun], end: int) -> tuple[OffsetRun, ...] | None:
    """The mapping runs (:func:`merge_runs`) that describe the target partition as it
    is now, whose end offset (past its last record) is ``end``.

    All of them when the partition holds every record they map; none when they map
    records of a deleted topic and the partition is a new, empty one (the restored
    topic was deleted to restore it again: the restore starts over from the
    backup's start). None (no answer) when the partition has records but fewer than
    the mapping says it wrote: a truncated partition, or a recreated topic someone
    else wrote into; offsets cannot tell what it holds, and a restore into it must
    be refused.
    """
    if not runs or runs[-1].restored + runs[-1].count <= end:
        return tuple(runs)
    if end == 0:
        return ()
    return None


def lost_mapping_message(
    target_topic: str, partition: int, runs: Sequence[OffsetRun], end: int, where: str
) -> str:
    """Why a restore refuses a partition :func:`current_runs` has no answer for."""
    last = runs[-1]
    return (
        f"{target_topic}[{partition}] on {where} ends at offset {end}, but the restore's "
        f"offset mapping says it wrote records up to offset {last.restored + last.count - 1} "
        "there: records it restored are gone (a truncated partition, or the topic was "
        "recreated and written by another producer). Way out: delete topic "
        f"{target_topic} on {where} and run the restore again; it restores the backup "
        "from its start"
    )


@dataclass(frozen=True)
class GroupMove:
    """Where one group's partition resumes on the target, or why it is not moved."""

    group: str
    topic: str  # source topic
    partition: int
    original: int  # the group's offset in the backup
    target_topic: str
    target_offset: int | None  # None: not moved (reason says why)
    reason: str | None = None


def group_moves(
    offsets: Iterable[GroupOffset],
    target_names: dict[str, str],
    runs: dict[Key, tuple[OffsetRun, ...]],
    ends: dict[Key, int],
) -> list[GroupMove]:
    """Each saved group offset on a restored topic, translated to the target.

    ``target_names``: restored source topic -> target topic; ``runs`` and ``ends``
    per (target topic, partition): the mapping and the partition's end offset.
    """
    out = []
    for g in sorted(offsets, key=lambda x: (x.group, x.topic, x.partition)):
        name = target_names.get(g.topic)
        if name is None:
            continue  # a topic this restore does not restore
        key = (name, g.partition)
        if key not in ends:
            out.append(
                GroupMove(
                    g.group,
                    g.topic,
                    g.partition,
                    g.offset,
                    name,
                    None,
                    f"partition {g.partition} of {g.topic} was not restored",
                )
            )
            continue
        mapped = runs.get(key, ())
        now = current_runs(mapped, ends[key])
        if now is None:
            reason = lost_mapping_message(name, g.partition, mapped, ends[key], "the target")
            out.append(GroupMove(g.group, g.topic, g.partition, g.offset, name, None, reason))
            continue
        target = resume_offset(now, g.offset, ends[key])
        out.append(GroupMove(g.group, g.topic, g.partition, g.offset, name, target))
    return out
