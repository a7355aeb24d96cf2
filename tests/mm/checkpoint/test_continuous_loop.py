"""The continuous checkpoint job's loop: a query that stopped ends the job with its cause."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mm.checkpoint.job import _run_continuous
from mm.errors import MirrorError

pytestmark = pytest.mark.unit


class _StoppedQuery:
    """Like a Spark StreamingQuery that ended: awaitTermination refuses a timeout <= 0
    (as PySpark does) and returns at once otherwise."""

    name = "checkpoints A->B"
    isActive = False

    def __init__(self) -> None:
        self.waits: list[Any] = []

    def awaitTermination(self, timeout: Any = None) -> bool:
        self.waits.append(timeout)
        if timeout is not None and timeout <= 0:
            raise ValueError(f"Value for `timeout` must be positive, got {timeout!r}")
        return True


class _Worker:
    class flow:
        emit_checkpoints_interval_seconds = 1.0

    def tick_if_due(self) -> None:
        raise AssertionError("no round runs once a query stopped")


def test_a_stopped_query_ends_the_job_with_a_clear_error() -> None:
    q = _StoppedQuery()
    with pytest.raises(MirrorError, match="query checkpoints A->B stopped"):
        _run_continuous([q], [_Worker()], threading.Event())  # type: ignore[list-item]
    assert q.waits and all(w is not None and w > 0 for w in q.waits)


class _RunningQuery(_StoppedQuery):
    isActive = True

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self.stop = stop

    def awaitTermination(self, timeout: Any = None) -> bool:
        self.stop.set()  # a signal arrives while the loop waits
        return super().awaitTermination(timeout)


class _TickingWorker(_Worker):
    ticks = 0

    def tick_if_due(self) -> None:
        self.ticks += 1


def test_a_stop_request_ends_the_loop_without_error() -> None:
    stop = threading.Event()
    q, w = _RunningQuery(stop), _TickingWorker()
    _run_continuous([q], [w], stop)  # type: ignore[list-item]
    assert len(q.waits) == 1 and w.ticks == 1
