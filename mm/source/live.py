"""A running mirror's positions and source ends between its micro-batches (driver side).

A micro-batch reports each partition's position and planned end when it ends
(:func:`mm.source.job.batch_handler`). A continuous mirror's tasks keep copying
for up to ``mm.mirror.task.continue.seconds`` (mm.source.sweep), and a batch
may wait on a slow cluster, so between batches the flow's lag (the metrics'
``mm_mirror_partition_lag``, the "mirror progress" summary) would stand still
while the mirror moves, or fall behind. Every :data:`INTERVAL_S` the mirror reads
what its tasks committed (the flow's state group on the target: the next source
offset of each partition, committed in the same transactions as the records)
and the source's ends (read_committed) of the partitions its batches named,
which keeps the lag as fresh as that. Records and bytes are still counted when a
batch ends (the rows carry them).

A read that fails leaves the figures as they were (the batch's, later) and says
so at DEBUG: the mirror's own errors are reported by its batches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mm.logs import get_logger

Key = tuple[str, int]
INTERVAL_S = 5.0


class LivePositions:
    """Keeps ``stats.positions`` and ``stats.ends`` (a :class:`mm.source.job.FlowStats`)
    fresh: every ``interval`` s (:meth:`tick`) reads the committed positions
    (``read_positions``) and the source ends (``read_ends``) of the partitions the
    batches named. A position only moves forward here (a batch's report is as new);
    an end is taken as read."""

    def __init__(
        self,
        stats: Any,
        read_positions: Callable[[Sequence[Key]], Mapping[Key, int]],
        read_ends: Callable[[Sequence[Key]], Mapping[Key, int]],
        interval: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        partitions: Callable[[], Sequence[Key]] = lambda: (),
    ) -> None:
        """``partitions``: the flow's partitions, asked while no batch has named any
        (a first batch that continues for long)."""
        self.stats, self.interval, self._clock = stats, interval, clock
        self._read_positions, self._read_ends = read_positions, read_ends
        self._partitions = partitions
        self._read_at = clock()

    def tick(self) -> None:
        now = self._clock()
        if now - self._read_at < self.interval:
            return
        self._read_at = now
        st = self.stats
        keys = sorted(st.ends)  # a copy: batches add to it on another thread
        try:
            keys = keys or sorted(self._partitions())
            if not keys:
                return
            positions = self._read_positions(keys)
            ends = self._read_ends(keys)
        except Exception as exc:
            get_logger("mm.mirror").debug("positions between batches not read", error=str(exc))
            return
        for k, pos in positions.items():
            if pos > st.positions.get(k, -1):
                st.positions[k] = pos
        for k, end in ends.items():
            st.ends[k] = end


def live_positions(cfg: Any, flow: Any, stats: Any, timeout: float = 10.0) -> LivePositions:
    """:class:`LivePositions` of ``flow`` (a :class:`mm.config.model.FlowConfig`),
    with the flow's client settings."""
    from mm.kafka.watermarks import watermarks
    from mm.source.runtime import state_group
    from mm.source.topics import select_topics
    from mm.status.reads import group_offsets, topic_partitions

    src, tgt = cfg.cluster(flow.source), cfg.cluster(flow.target)
    policy, group = flow.policy(), state_group(flow)
    admin, src_admin = dict(tgt.librdkafka("admin")), dict(src.librdkafka("admin"))
    consumer = {k: str(v) for k, v in src.librdkafka("consumer").items()}
    where = f"target cluster {flow.target}"

    def read_positions(keys: Sequence[Key]) -> dict[Key, int]:
        by_target = {(policy.format_remote_topic(flow.source, t), p): (t, p) for t, p in keys}
        committed = group_offsets(admin, [group], where, timeout).get(group, {})
        return {by_target[k]: pos for k, pos in committed.items() if k in by_target}

    def read_ends(keys: Sequence[Key]) -> dict[Key, int]:
        marks = watermarks(consumer, list(keys), timeout, profile=src.profile)
        return {k: hi for k, (_lo, hi) in marks.items()}

    def partitions() -> list[Key]:
        counts = topic_partitions(src_admin, f"source cluster {flow.source}", timeout)
        selected = select_topics(
            counts, topic_filter=flow.topic_filter, policy=policy, target_alias=flow.target
        )
        return [(t, p) for t in selected for p in range(counts[t])]

    return LivePositions(stats, read_positions, read_ends, partitions=partitions)


def keep_fresh(lives: Sequence[LivePositions], halt: threading.Event, step: float = 1.0) -> None:
    """Tick ``lives`` every ``step`` s on a daemon thread until ``halt`` is set (its
    reads may wait on a slow cluster: never on the thread that supervises the
    queries and answers a stop)."""

    def loop() -> None:
        while not halt.wait(step):
            for live in lives:
                live.tick()

    threading.Thread(target=loop, name="mm-mirror-live", daemon=True).start()
