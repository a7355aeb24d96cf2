"""A Python worker's kept mirror state belongs to one run of the mirror job
(mm.source.task.enter_run): Spark keeps its Python workers for the SparkContext's
life, and `mm run` restarts a failed mirror job in the same context."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from mm.source import task
from mm.source.spec import FlowRuntime


class _Client:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def clean_worker() -> Iterator[None]:
    task.enter_run(dataclasses.replace(_rt("setup"), run_id="\0none"))
    yield
    task.enter_run(dataclasses.replace(_rt("setup"), run_id="\0none"))


def _rt(run_id: str) -> FlowRuntime:
    return FlowRuntime("A", "B", {}, {}, {}, {}, "s", False, "g", "p", run_id=run_id)


@pytest.mark.unit
@pytest.mark.usefixtures("clean_worker")
def test_a_new_run_starts_without_the_previous_runs_clients_and_records() -> None:
    first = _rt("run-1")
    task.enter_run(first)
    pool = task.worker_pool(first)
    client = _Client()
    with pool.lease("txn-producer", {"transactional.id": "mm.A.B.g1.s0"}, lambda _conf: client):
        pass
    task._SYNCS_WRITTEN[("mm", "A.t", 0)] = "batch-7"

    task.enter_run(first)  # the same run's next task keeps all of it
    assert task.worker_pool(first) is pool and pool.idle() == 1 and not client.closed
    assert task._SYNCS_WRITTEN == {("mm", "A.t", 0): "batch-7"}

    second = _rt("run-2")
    task.enter_run(second)
    assert client.closed, "the previous run's pooled producer was not closed"
    assert pool.idle() == 0
    assert task.worker_pool(second) is not pool
    assert task._SYNCS_WRITTEN == {}
