"""Transactions open on a source partition, and the way out of a hanging one (pure).

On Apache Kafka a partition's read_committed end (its last stable offset) stays at
the first offset of the oldest transaction still open there, below the log end (the
high watermark). Whatever that transaction commits later exists only on the source:
a switchover or a failback that went on would leave it behind. Such a transaction
ends when its producer commits or aborts it, or when the broker aborts it after the
producer's ``transaction.timeout.ms``; one whose abort never reached the partition
(a hanging transaction) stays open until Kafka's own tool aborts it at that first
offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

Key = tuple[str, int]


def open_transactions(
    committed_ends: Mapping[Key, int], log_ends: Mapping[Key, int]
) -> dict[Key, tuple[int, int]]:
    """Partitions whose log end is past their read_committed end: (read_committed end,
    log end)."""
    return {
        k: (end, log_ends[k])
        for k, end in sorted(committed_ends.items())
        if k in log_ends and log_ends[k] > end
    }


def abort_args(topic: str, partition: int, start: int) -> list[str]:
    """``kafka-transactions.sh``'s arguments (after ``--bootstrap-server``) that abort
    the oldest transaction open on ``topic[partition]``, which starts at ``start``
    (the partition's read_committed end)."""
    return ["abort", "--topic", topic, "--partition", str(partition), "--start-offset", str(start)]


def abort_commands(bootstrap_servers: str, open_at: Iterable[tuple[str, int, int]]) -> str:
    """Kafka's commands that abort the oldest transaction open on each (topic,
    partition, read_committed end), joined by "; "."""
    return "; ".join(
        f"kafka-transactions.sh --bootstrap-server {bootstrap_servers} {' '.join(abort_args(*o))}"
        for o in open_at
    )


def describe_open(open_at: Mapping[Key, tuple[int, int]]) -> str:
    """``T[p] (read_committed end E, log end L)`` per open partition, in order."""
    return ", ".join(
        f"{t}[{p}] (read_committed end {end}, log end {log_end})"
        for (t, p), (end, log_end) in sorted(open_at.items())
    )


def hanging_way_out(
    bootstrap_servers: str, cluster: str, open_at: Mapping[Key, tuple[int, int]]
) -> str:
    """Kafka's commands that abort a hanging transaction on each open partition of
    ``cluster``, and what a secured cluster adds to them."""
    aborts = abort_commands(
        bootstrap_servers, ((t, p, end) for (t, p), (end, _) in sorted(open_at.items()))
    )
    return f"{aborts} (with --command-config for {cluster}'s TLS/SASL settings)"


class _Producer(Protocol):
    @property
    def producer_id(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def transaction_start(self) -> int: ...
    @property
    def transactional_id(self) -> str | None: ...
    @property
    def started_ms(self) -> int | None: ...


def describe_producers(
    producers: Mapping[Key, Iterable[_Producer]], now_ms: int, where: str
) -> str:
    """``T[p]: producer 42 (epoch 0, transactional.id "x"), its transaction open since
    offset 10 for 93 s`` per open partition, from ``where`` (how they were asked)."""
    parts = []
    for (t, p), rows in sorted(producers.items()):
        for r in rows:
            tid = "none listed" if r.transactional_id is None else repr(r.transactional_id)
            age = (
                ""
                if r.started_ms is None or r.started_ms < 0
                else (f" for {max(0, now_ms - r.started_ms) / 1000:.0f} s")
            )
            parts.append(
                f"{t}[{p}]: producer {r.producer_id} (epoch {r.epoch}, transactional.id "
                f"{tid}), its transaction open since offset {r.transaction_start}{age}"
            )
    return f"{'; '.join(parts) or 'no producer listed'} ({where})"
