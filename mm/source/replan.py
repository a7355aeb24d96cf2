"""When a continuous mirror's running micro-batch should end: a new plan is wanted.

A continuous mirror's tasks keep copying after their planned ranges
(:mod:`mm.source.sweep`) until ``mm.mirror.task.continue.seconds`` after they
started. A batch boundary costs the records written meanwhile about a second
(the batch ends, Spark plans the next, the tasks start again), so the longer a
task continues the fewer boundaries a record meets. What a task cannot see is
what only the planner knows: a new topic or partition, an idle partition's
position moved by an operator, a position due for its refresh. And what one
task sees (a partition that stopped: a deleted topic, a refused record) the
other tasks of the batch do not.

So either side asks for a new plan with one record, key ``<flow>@replan``, in
the flow's shard-map topic on the target (``mm-mirror-shards.<source>.internal``:
the tasks already read it, the planner already writes it; the map's own key is
the flow, so readers of the map skip these records). A task is planned with the
topic's end offset at planning time (its *plan mark*); it ends its continuation
once the topic's end has moved past that mark: a replan request, or a newer
shard map, was written since. The next batch is planned with the new end.

- The planner's watcher (:class:`ReplanWatcher`, a thread of the streaming
  reader's process while a batch runs) asks when its check finds work for a
  plan (:meth:`mm.source.reader.MirrorStreamReader._replan_reason`).
- A task asks when one of its partitions stopped (the planner decides about it),
  but not before :data:`STOPPED_PARTITION_BATCH_S` into its batch: a partition
  that fails at every plan must not turn the mirror into a batch a second.

Exactly once does not depend on any of this: a batch ending early or late only
moves where the next plan starts (mm.source.sweep's argument holds for any
deadline).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping

from mm.logs import get_logger

#: seconds between two reads of the shard-map topic's end by a task (a replan is
#: seen that much later at most, plus the current sweep)
WATCH_INTERVAL_S = 0.5
#: seconds between two checks of the planner's watcher
CHECK_INTERVAL_S = 1.0
#: a task with a stopped partition asks for a new plan no earlier than this into its
#: batch (the continuation's default before replan requests existed)
STOPPED_PARTITION_BATCH_S = 5.0

REPLAN_SUFFIX = "@replan"


def replan_key(flow: str) -> bytes:
    """The record key of ``flow``'s replan requests in its shard-map topic."""
    return f"{flow}{REPLAN_SUFFIX}".encode()


def replan_value(why: str, by: str, time_ms: int) -> bytes:
    return json.dumps({"why": why, "by": by, "time_ms": time_ms}, separators=(",", ":")).encode()


class PlanWatch:
    """Whether the plan a task runs is still the newest: the shard-map topic's end
    (``end_offset``) has not moved past ``mark`` (read at most every ``interval``
    s; shared by a task's shard threads). ``mark < 0``: not watched (always current)."""

    def __init__(
        self,
        mark: int,
        end_offset: Callable[[], int],
        interval: float = WATCH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mark, self._end_offset = mark, end_offset
        self.interval, self._clock = interval, clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._stale = False

    def current(self) -> bool:
        if self.mark < 0:
            return True
        with self._lock:
            if self._stale:
                return False
            now = self._clock()
            if self._read_at is not None and now - self._read_at < self.interval:
                return True
            self._read_at = now
            try:
                end = self._end_offset()
            except Exception as exc:
                # the watch only shortens a batch: unread, the task runs its full time
                get_logger("mm.mirror.task").warning(
                    "shard map topic's end not read; the batch runs its full time",
                    error=str(exc),
                )
                self.mark = -1
                return True
            self._stale = end > self.mark
            return not self._stale


class TaskPace:
    """When a task's continuation ends: its plan is no longer the newest (``watch``),
    or one of its partitions stopped (:meth:`stopped`) and the batch has run
    ``min_seconds``; then it asks for a new plan itself (``request``, once), so
    the batch's other tasks end too."""

    def __init__(
        self,
        watch: PlanWatch,
        request: Callable[[str], None],
        started: float,
        min_seconds: float = STOPPED_PARTITION_BATCH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.watch, self._request = watch, request
        self.started, self.min_seconds, self._clock = started, min_seconds, clock
        self._lock = threading.Lock()
        self._why: str | None = None
        self._asked = False

    def stopped(self, why: str) -> None:
        """A partition of the task stopped (``why``): the planner should decide."""
        with self._lock:
            if self._why is None:
                self._why = why

    def keep_going(self) -> bool:
        with self._lock:
            if self._asked:
                return False
            if self._why is not None and self._clock() >= self.started + self.min_seconds:
                self._asked = True
                why = self._why
            else:
                why = None
        if why is not None:
            try:
                self._request(why)
            except Exception as exc:
                # the other tasks then end at their own time; this one ends now
                get_logger("mm.mirror.task").warning(
                    "new plan not requested", why=why, error=str(exc)
                )
            return False
        return self.watch.current()


class ReplanWatcher(threading.Thread):
    """The planner's side: while a batch runs (between :meth:`armed` and
    :meth:`disarmed`), every ``interval`` s asks ``check`` whether a new plan is
    wanted (a reason, or None) and, once per batch, ``request`` s it. A check that
    raises is logged and tried again."""

    def __init__(
        self,
        check: Callable[[], str | None],
        request: Callable[[str], None],
        interval: float = CHECK_INTERVAL_S,
    ) -> None:
        super().__init__(name="mm-replan-watcher", daemon=True)
        self._check, self._request, self.interval = check, request, interval
        self._cond = threading.Condition()
        self._batch = 0  # 0: no batch running
        self._asked = 0  # the batch a request was written for
        self._closed = False

    def armed(self, batch: int) -> None:
        with self._cond:
            self._batch = batch
            self._cond.notify_all()

    def disarmed(self) -> None:
        with self._cond:
            self._batch = 0

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def run(self) -> None:
        log = get_logger("mm.mirror.planner")
        failed = 0  # the batch whose failed check was logged: one line per batch
        while True:
            with self._cond:
                while not self._closed and (self._batch == 0 or self._batch == self._asked):
                    self._cond.wait()
                if self._closed:
                    return
                self._cond.wait(self.interval)
                batch = self._batch
            if batch == 0 or batch == self._asked:
                continue
            try:
                why = self._check()
                with self._cond:
                    if why is not None and self._batch != batch:
                        why = None  # that batch ended meanwhile: its plan is done
                if why is not None:
                    self._request(why)
                    self._asked = batch
                    log.info("new plan requested", why=why)
            except Exception as exc:
                if failed != batch:
                    failed = batch
                    log.warning("new plan not checked; tried again", error=str(exc))


def topics_changed(
    planned: Mapping[str, tuple[int, str]], now: Mapping[str, tuple[int, str]]
) -> str | None:
    """What changed between the topics a batch was planned with and the topics now
    mirrored (topic -> (partitions, target topic)), in words; None when nothing did."""
    parts = []
    new = sorted(set(now) - set(planned))
    gone = sorted(set(planned) - set(now))
    grown = sorted(t for t in set(now) & set(planned) if now[t] != planned[t])
    if new:
        parts.append(f"new topics {', '.join(new[:5])}" + (" ..." if len(new) > 5 else ""))
    if gone:
        parts.append(f"topics no longer mirrored {', '.join(gone[:5])}")
    if grown:
        parts.append(
            "topics changed "
            + ", ".join(f"{t} ({planned[t][0]} -> {now[t][0]} partitions)" for t in grown[:5])
        )
    return "; ".join(parts) or None
