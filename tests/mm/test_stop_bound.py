"""StopBound: a stop that overruns its bound ends the process with one line; one that
finishes in time leaves the command's own line (the watchdog's decisions, without
a process to end: ``end`` records the exit code)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mm.signals import BOUNDED_STOP_EXIT, StopBound, bounded_stop_line


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))


def _watchdogs_ended() -> None:
    """The watchdog threads have returned (each waits at most its 0.2 s bound)."""
    for t in threading.enumerate():
        if t.name == "mm-stop-bound":
            t.join(5)
            assert not t.is_alive()


def _bound(log: Log, ended: list[int], unanswered: dict[str, str]) -> StopBound:
    def end(code: int) -> None:
        ended.append(code)

    return StopBound("run", log, lambda: unanswered, seconds=0.2, end=end)


def test_an_overrun_logs_one_line_naming_the_silent_cluster_and_ends_with_0() -> None:
    log, ended = Log(), []
    bound = _bound(log, ended, {"A": "cluster A (h:1) did not answer within 1s: timed out"})
    bound.requested()
    bound.requested()  # a second signal: still one clock
    _watchdogs_ended()
    assert ended == [BOUNDED_STOP_EXIT] == [0]
    late = threading.Thread(target=bound.finished)  # the command's own stop, too late
    late.start()
    late.join(5)
    assert not late.is_alive()  # returns once the watchdog ended "the process"
    [(event, fields)] = log.lines
    assert event == "run stopped on request within 10 s"
    assert fields["reason"].startswith("cluster A did not answer (frozen?): ")
    assert "never committed" in fields["reason"]
    assert fields["unanswered"] == ["cluster A (h:1) did not answer within 1s: timed out"]


def test_a_stop_finished_in_time_leaves_no_line_and_no_exit() -> None:
    log, ended = Log(), []
    bound = _bound(log, ended, {"A": "no answer"})
    bound.requested()
    bound.finished()
    _watchdogs_ended()
    assert ended == [] and log.lines == []


def test_no_request_no_watchdog() -> None:
    log, ended = Log(), []
    bound = _bound(log, ended, {})
    bound.finished()
    bound.requested()  # a signal after the stop finished: nothing left to bound
    assert not any(t.name == "mm-stop-bound" for t in threading.enumerate())
    assert ended == [] and log.lines == []


def test_every_cluster_answering_is_said_too() -> None:
    event, fields = bounded_stop_line("mirror", {})
    assert event == "mirror stopped on request within 10 s"
    assert fields["reason"].startswith("every cluster answers now")
    assert fields["unanswered"] == [] and fields["exit_code"] == 0


def test_a_patient_stop_goes_on_while_every_cluster_answers_and_ends_when_one_does_not() -> None:
    """`mm backup`'s: past the bound the stop goes on while the probe finds every
    cluster answering; the first probe that finds one silent ends it, naming it."""
    log, ended = Log(), []
    answers: list[dict[str, str]] = [{}, {}, {"A": "cluster A (h:1) did not answer"}]
    probes: list[int] = []

    def probe() -> dict[str, str]:
        probes.append(1)
        return answers[min(len(probes), len(answers)) - 1]

    bound = StopBound("backup", log, probe, seconds=0.1, patient=True, end=ended.append)
    bound.requested()
    _watchdogs_ended()
    assert len(probes) == 3 and ended == [0]
    [(event, fields)] = log.lines
    assert event == "backup stopped on request within 10 s"
    assert fields["unanswered"] == ["cluster A (h:1) did not answer"]


def test_a_patient_stop_that_finishes_while_clusters_answer_leaves_no_line() -> None:
    log, ended = Log(), []
    probed: list[int] = []
    twice = threading.Event()

    def probe() -> dict[str, str]:
        probed.append(1)
        if len(probed) >= 2:
            twice.set()
        return {}

    bound = StopBound("backup", log, probe, seconds=0.1, patient=True, end=ended.append)
    bound.requested()
    assert twice.wait(5)  # past the bound: probed again and again, every cluster answering
    bound.finished()
    _watchdogs_ended()
    assert ended == [] and log.lines == []


def test_work_off_the_main_thread_gives_its_result_or_its_exception() -> None:
    from mm.signals import off_the_main_thread

    seen: list[str] = []
    assert off_the_main_thread(lambda: seen.append(threading.current_thread().name) or 7) == 7
    assert seen == ["mm-work"]  # not the main thread, where signal handlers run

    def fails() -> int:
        raise KeyError("x")

    with pytest.raises(KeyError):
        off_the_main_thread(fails)
