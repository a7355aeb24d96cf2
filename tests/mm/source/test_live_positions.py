"""A running mirror's lag between its micro-batches (mm.source.live; fake reads here,
the metrics test reads it from a running mirror)."""

from __future__ import annotations

from mm.source.job import FlowStats
from mm.source.live import LivePositions


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_positions_and_ends_are_read_every_interval_for_the_partitions_batches_named() -> None:
    st = FlowStats()
    st.positions = {("t", 0): 10, ("t", 1): 50}
    st.ends = {("t", 0): 10, ("t", 1): 60}
    clock, asked = Clock(), []
    committed = {("t", 0): 40, ("t", 1): 45}  # t[1]: a batch reported further already

    def positions(keys: object) -> dict[tuple[str, int], int]:
        asked.append(list(keys))  # type: ignore[call-overload]
        return dict(committed)

    live = LivePositions(st, positions, lambda _k: {("t", 0): 55, ("t", 1): 70}, 5.0, clock)
    live.tick()
    assert asked == [] and st.positions[("t", 0)] == 10  # not due yet
    clock.now = 5.0
    live.tick()
    assert asked == [[("t", 0), ("t", 1)]]
    assert st.positions == {("t", 0): 40, ("t", 1): 50}  # never moved back
    assert st.ends == {("t", 0): 55, ("t", 1): 70}
    clock.now = 7.0
    live.tick()
    assert len(asked) == 1


def test_a_failed_read_leaves_the_batch_figures() -> None:
    st = FlowStats()
    st.positions, st.ends = {("t", 0): 3}, {("t", 0): 9}

    def unreachable(_keys: object) -> dict[tuple[str, int], int]:
        raise RuntimeError("target unreachable")

    clock = Clock()
    live = LivePositions(st, unreachable, unreachable, 1.0, clock)
    clock.now = 2.0
    live.tick()
    assert st.positions == {("t", 0): 3} and st.ends == {("t", 0): 9}
    empty = FlowStats()
    LivePositions(empty, unreachable, unreachable, 0.0, clock).tick()  # nothing named yet
    assert empty.positions == {}


def test_before_any_batch_ended_the_flow_partitions_are_asked() -> None:
    st, clock = FlowStats(), Clock()
    live = LivePositions(
        st,
        lambda keys: {k: 7 for k in keys},
        lambda keys: {k: 9 for k in keys},
        1.0,
        clock,
        partitions=lambda: [("t", 1), ("t", 0)],
    )
    clock.now = 1.0
    live.tick()
    assert st.positions == {("t", 0): 7, ("t", 1): 7} and st.ends == {("t", 0): 9, ("t", 1): 9}
