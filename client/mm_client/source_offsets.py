"""Translating source offsets kept outside Kafka groups (pure; no I/O).

Applications that store their own positions (in a database, a Spark checkpoint, a
Flink savepoint) hold a list of (topic, partition, offset) on the source. Each one
translates through the checkpoint job's history (:class:`mm_client.sync_store.
OffsetSyncStore`) by the same rule as a group's committed offset: exact where the
offset syncs prove it, below the exact answer otherwise (``exact`` False), never
ahead. Beyond what the history can answer:

* an offset past the mirror's position (records the mirror had not copied when the
  history was published) answers the translated end of what was mirrored, and
  ``not_mirrored`` counts the source offsets between the two (transaction markers
  included, so at most that many records): what a failover to that answer loses;
* an offset below the oldest sync kept, or of a partition the history does not
  know, gets no answer and a ``problem`` saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mm_client.sync_store import OffsetSyncStore

__all__ = ["SourceOffset", "SourceOffsetTranslation", "parse_source_offsets", "translate_with"]

SourceOffset = tuple[str, int, int]


@dataclass(frozen=True)
class SourceOffsetTranslation:
    """One source offset on the target.

    ``target_offset``: where to resume on ``target_topic`` (None: no answer, see
    ``problem``). ``exact``: the answer is the exact one; False means it may be
    below it (re-reads, never skips). ``not_mirrored``: source offsets at or past
    the mirror's position up to ``offset`` (0 when the mirror had passed it).
    """

    topic: str
    partition: int
    offset: int
    target_topic: str
    target_offset: int | None
    exact: bool
    not_mirrored: int = 0
    problem: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "target_topic": self.target_topic,
            "target_offset": self.target_offset,
            "exact": self.exact,
            "not_mirrored": self.not_mirrored,
            "problem": self.problem,
        }


def translate_with(
    store: OffsetSyncStore,
    offsets: Iterable[SourceOffset],
    target_topic: Callable[[str], str],
) -> list[SourceOffsetTranslation]:
    """Each ``(topic, partition, offset)`` of the source translated by ``store``, in
    the order given; ``target_topic`` names a source topic's copy."""
    out = []
    for topic, partition, offset in offsets:
        out.append(_one(store, topic, partition, offset, target_topic(topic)))
    return out


def _one(
    store: OffsetSyncStore, topic: str, partition: int, offset: int, target: str
) -> SourceOffsetTranslation:
    def none(problem: str) -> SourceOffsetTranslation:
        return SourceOffsetTranslation(topic, partition, offset, target, None, False, 0, problem)

    h = store.history(topic, partition)
    oldest = None if h is None else h.oldest
    if h is None or oldest is None:
        return none(
            f"no offset history for {topic}/{partition}: the mirror has not copied it, or "
            "the checkpoint job has not read its offset syncs yet"
        )
    if offset < oldest:
        return none(
            f"the history of {topic}/{partition} reaches back to offset {oldest} only "
            f"(older syncs were pruned with the source log); {offset} cannot be translated "
            "exactly: translate it by timestamp (mm_client.translate_by_timestamp)"
        )
    mirrored_to = h.mirrored_to
    asked = min(offset, mirrored_to)
    got = h.lookup(asked)
    if got is None:  # unreachable: oldest <= asked <= the mirror's position
        return none(f"no translation for {topic}/{partition} offset {asked}")
    return SourceOffsetTranslation(
        topic, partition, offset, target, got.offset, got.exact, offset - asked
    )


def parse_source_offsets(text: str) -> list[SourceOffset]:
    """``"orders:0:1234,orders:1:99"`` as [(topic, partition, offset), ...].

    Raises ValueError naming the item that is wrong and the form expected. The
    topic may itself hold ``:`` (the last two fields are the numbers)."""
    out: list[SourceOffset] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        topic, sep1, rest = item.rpartition(":")
        head, sep2, partition = topic.rpartition(":")
        if not (sep1 and sep2 and head):
            raise ValueError(f"{item!r}: expected TOPIC:PARTITION:OFFSET (e.g. orders:0:1234)")
        try:
            p, o = int(partition), int(rest)
        except ValueError:
            raise ValueError(
                f"{item!r}: PARTITION and OFFSET must be whole numbers (TOPIC:PARTITION:OFFSET)"
            ) from None
        if p < 0 or o < 0:
            raise ValueError(f"{item!r}: PARTITION and OFFSET must not be negative")
        out.append((head, p, o))
    if not out:
        raise ValueError("no offsets given: expected TOPIC:PARTITION:OFFSET[,...]")
    return out
