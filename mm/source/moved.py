"""Positions moved under the plan: the mirror follows the target's committed positions.

Spark's checkpoint remembers how far each partition was planned; the mirror's
position is what its transactions committed in the state group on the target.
They part when an operator resets the state group's positions backwards (as the
mirror's refusals advise), or deletes the target topic and its positions to
mirror it again from the start. A partition with new data is planned anyway and
its task starts from the committed position; an idle one would never be looked
at. So the planner reads the state group every :data:`CHECK_INTERVAL_S` (a
``--once`` run: at its first batch) and asks for a *refresh* (an empty range at the planned
position, :mod:`mm.source.keepalive`) of each idle partition whose committed
position is behind the plan: its task reads the position, and mirrors from it
(or, with no position, from what the target holds: :mod:`mm.source.position`).
Only on a target whose broker keeps acknowledged commits (Apache Kafka): on the
embedded broker a lower position may be a lost commit (:mod:`mm.kafka.profile`).
"""

from __future__ import annotations

from collections.abc import Mapping

from mm.source.keepalive import REFRESH_PREFIX

# seconds between two reads of the state group's positions by the planner
CHECK_INTERVAL_S = 10.0


def split_key(key: str) -> tuple[str, int]:
    topic, _, p = key.rpartition(":")
    return topic, int(p)


def behind_plan(
    planned: Mapping[str, int],
    log_starts: Mapping[str, int],
    targets: Mapping[str, str],
    committed: Mapping[tuple[str, int], int],
) -> list[str]:
    """Keys ``"topic:partition"`` of ``planned`` (Spark's start offsets) whose committed
    position (``committed`` by target topic and partition; absent: none) is below
    the plan. A partition planned no further than its log start is left out: with
    nothing mirrored yet, no position is expected (pure)."""
    out = []
    for key, start in planned.items():
        if key.startswith(REFRESH_PREFIX):
            continue
        topic, partition = split_key(key)
        target = targets.get(topic)
        if target is None or start <= log_starts.get(key, 0):
            continue
        if committed.get((target, partition), -1) < start:
            out.append(key)
    return sorted(out)
