"""The start probe lets go of its client at once, whatever the coordinator answered."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from mm.embedded.kraft import coordinator_ready

pytestmark = pytest.mark.unit


class _Admin:
    """Answers metadata; describes the group with a future failed as ``error`` says."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def list_topics(self, timeout: float) -> object:
        return object()

    def describe_consumer_groups(self, groups: list[str], request_timeout: float) -> Any:
        future: Future[object] = Future()
        if self.error is None:
            future.set_result(object())
        else:
            future.set_exception(self.error)
        return {groups[0]: future}


@pytest.fixture
def no_collector() -> Iterator[None]:
    # only reference counting frees objects here, as when the collector has not run
    # before the broker stops
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("error", "answer"),
    [(None, None), (RuntimeError("COORDINATOR_LOAD_IN_PROGRESS"), "COORDINATOR_LOAD_IN_PROGRESS")],
)
def test_the_probe_holds_no_reference_to_its_client(
    no_collector: None, error: Exception | None, answer: str | None
) -> None:
    admin = _Admin(error)
    gone = weakref.ref(admin)
    assert coordinator_ready(admin, 1.0) == answer
    del admin
    # the client must be destroyed now, while its broker answers: destroyed later by
    # the collector, after the broker stopped, librdkafka's destroy can hang
    assert gone() is None
