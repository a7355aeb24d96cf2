"""The mirror's fencing unit: a stable map of target partitions onto shards (pure logic).

Kafka Connect's exactly-once sources (KIP-618, what MirrorMaker 2 runs on) give each
task one transactional.id and many partitions. The mirror does the same with a
*shard*: a set of target partitions written by one transactional producer whose
id names the flow, the map's generation and the shard
(:meth:`ShardMap.transactional_id`). What makes that exactly once is that a
partition is only ever written through one id at a time:

- **A partition never moves within a generation.** A partition the map has not
  seen (a new topic, more partitions) joins the shard with the fewest partitions,
  lowest index first, taken in (topic, partition) order; a partition whose topic
  went away keeps its entry, so a topic created again comes back to the same
  shard. Such additions keep the generation: every id stays what it was.
- **Moving partitions is a new generation.** A different shard count (or the
  first map of a flow that mirrored with one id per partition, generation 0)
  gives generation ``g + 1`` with a fresh balanced map, and every id of the
  previous generation must be fenced (``init_transactions`` on each, which aborts
  what it left open and stops a zombie from committing) before the new map is
  recorded and before any shard of it writes.

What is stored, and where, and the fencing itself are I/O (not here): the map's
JSON form is :meth:`ShardMap.to_json` / :func:`parse_shard_map`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mm.errors import MirrorError

TopicPartition = tuple[str, int]
#: the JSON form's version (:func:`parse_shard_map` refuses others)
FORMAT = 1
#: generation 0: the ids mirrors used before shards, one per target partition
LEGACY_GENERATION = 0


def default_shard_count(cores: int, partitions: int) -> int:
    """Shards for a flow when ``mm.mirror.shards`` is ``auto``: two per core, so a
    shard that is slow this batch (a hot partition) leaves cores to the others,
    never more than there are partitions, at least one."""
    return max(1, min(max(1, partitions), 2 * max(1, cores)))


def legacy_transactional_id(prefix: str, topic: str, partition: int) -> str:
    """The id generation 0 wrote ``topic[partition]`` with (one per target partition)."""
    return f"{prefix}.{topic}.{partition}"


@dataclass(frozen=True)
class ShardMap:
    """Generation ``generation`` of a flow's map: ``assignment[(topic, partition)]`` is
    the shard, in ``range(shards)``, that writes that target partition."""

    generation: int
    shards: int
    assignment: Mapping[TopicPartition, int]

    def __post_init__(self) -> None:
        if self.generation <= LEGACY_GENERATION or self.shards < 1:
            raise ValueError(f"generation {self.generation}, {self.shards} shards: both >= 1")
        bad = {tp: s for tp, s in self.assignment.items() if not 0 <= s < self.shards}
        if bad:
            raise ValueError(f"shards outside 0..{self.shards - 1}: {bad}")

    def transactional_id(self, prefix: str, shard: int) -> str:
        return f"{prefix}.g{self.generation}.s{shard}"

    def transactional_ids(self, prefix: str) -> list[str]:
        return [self.transactional_id(prefix, s) for s in range(self.shards)]

    def members(self, shard: int) -> list[TopicPartition]:
        """The partitions ``shard`` writes, in (topic, partition) order."""
        return sorted(tp for tp, s in self.assignment.items() if s == shard)

    def loads(self) -> list[int]:
        counts = [0] * self.shards
        for s in self.assignment.values():
            counts[s] += 1
        return counts

    def to_json(self) -> str:
        topics: dict[str, dict[str, int]] = {}
        for (topic, partition), shard in sorted(self.assignment.items()):
            topics.setdefault(topic, {})[str(partition)] = shard
        return json.dumps(
            {
                "format": FORMAT,
                "generation": self.generation,
                "shards": self.shards,
                "topics": topics,
            },
            separators=(",", ":"),
            sort_keys=True,
        )


def parse_shard_map(text: str, where: str) -> ShardMap:
    """A map from :meth:`ShardMap.to_json`; ``where`` names its origin in errors."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"expected an object with format {FORMAT}")
        assignment = {
            (str(topic), int(partition)): int(shard)
            for topic, partitions in raw["topics"].items()
            for partition, shard in partitions.items()
        }
        return ShardMap(int(raw["generation"]), int(raw["shards"]), assignment)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise MirrorError(
            f"the mirror's shard map in {where} cannot be read ({exc}); expected the JSON"
            f" this version of mm writes (format {FORMAT})"
        ) from None


def balanced(partitions: Iterable[TopicPartition], shards: int) -> dict[TopicPartition, int]:
    """A fresh assignment: partitions in (topic, partition) order dealt round the
    shards, so loads differ by one at most."""
    return {tp: i % shards for i, tp in enumerate(sorted(set(partitions)))}


def extended(current: ShardMap, partitions: Iterable[TopicPartition]) -> ShardMap:
    """``current`` with every partition it has not seen added (same generation): each
    joins the shard with the fewest partitions, lowest index first, in (topic,
    partition) order. Nothing already in the map moves."""
    new = sorted(set(partitions) - set(current.assignment))
    if not new:
        return current
    loads = current.loads()
    assignment = dict(current.assignment)
    for tp in new:
        shard = min(range(current.shards), key=lambda s: (loads[s], s))
        assignment[tp] = shard
        loads[shard] += 1
    return ShardMap(current.generation, current.shards, assignment)


@dataclass(frozen=True)
class Transition:
    """What the driver does before a batch: when ``new_generation``, fence every id
    in ``fence``, then record ``map``; otherwise record ``map`` when ``changed``
    (partitions added). No shard writes before ``map`` is recorded."""

    map: ShardMap
    fence: tuple[str, ...]
    changed: bool
    new_generation: bool


def transition(
    stored: ShardMap | None,
    partitions: Iterable[TopicPartition],
    shards: int,
    prefix: str,
) -> Transition:
    """The map for a batch over ``partitions`` with ``shards`` shards, from the map
    last recorded (``stored``; None: none yet, so the flow may have mirrored with
    one id per partition, generation 0).

    The same shard count keeps the generation and only adds partitions. Another
    count, or no map yet, starts the next generation from a balanced map; the ids
    to fence first are the previous generation's: its shards' ids, or for
    generation 0 the per-partition id of every partition known (those of the batch
    and of the stored map)."""
    if shards < 1:
        raise ValueError(f"{shards} shards: expected at least 1")
    wanted = set(partitions)
    if stored is not None and stored.shards == shards:
        grown = extended(stored, wanted)
        return Transition(grown, (), grown is not stored, new_generation=False)
    known = wanted | set(stored.assignment if stored is not None else ())
    if stored is None:
        fence = tuple(legacy_transactional_id(prefix, t, p) for t, p in sorted(known))
        generation = LEGACY_GENERATION + 1
    else:
        fence = tuple(stored.transactional_ids(prefix))
        generation = stored.generation + 1
    fresh = ShardMap(generation, shards, balanced(known, shards))
    return Transition(fresh, fence, changed=True, new_generation=True)
