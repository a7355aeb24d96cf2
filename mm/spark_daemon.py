"""Spark's Python worker daemon, without the traceback of a worker the JVM hung up on.

Spark forks every Python worker from one daemon process (``pyspark.daemon``). When
a task is interrupted (a stopping job stops its streaming query in the middle of a
micro-batch), the JVM closes that worker's socket. The worker's last flush then
fails with a reset connection, and with ``spark.python.daemon.killWorkerOnFlushFailure``
(on by default) the daemon prints that exception's traceback to the driver's
stderr: ``mm run`` stopped by SIGTERM ended with a traceback although nothing had
gone wrong. The JVM already knows the task ended (it ended it), so this daemon
ends such a worker quietly, exactly as the daemon ends a worker that failed:
the worker process exits and Spark starts a new one when it needs one. Every
other exception is the daemon's as before.

Spark runs it through ``spark.python.daemon.module`` (set by
:mod:`mm.spark_session`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mm.spark_python import HUNG_UP


def quiet_when_hung_up(worker: Callable[..., int]) -> Callable[..., int]:
    """``worker``, returning a failure code instead of raising when the JVM hung up."""

    def run(*args: Any) -> int:
        try:
            return worker(*args)
        except HUNG_UP:
            return 1  # the daemon's code for a worker that must not be reused

    return run


def main() -> None:
    import pyspark.daemon as daemon

    # the manager looks ``worker`` up in its module each time it forks a worker
    daemon.worker = quiet_when_hung_up(daemon.worker)
    daemon.manager()


if __name__ == "__main__":
    main()


def quiet_accumulator_server(server: Any) -> None:
    """The driver's side of the same hang-up: PySpark's accumulator server (a
    ``socketserver`` thread in the driver) reads each task's accumulator updates,
    and when a stop ends Spark while an update is being read, the JVM closes the
    connection and the server prints the EOFError's traceback to stderr (seen:
    `mm checkpoint` stopped by Ctrl-C 0.1 s after a round). Such a read ends
    quietly; every other error is printed as before."""
    if server is None:
        return
    printed = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], HUNG_UP):
            return  # Spark is stopping: the update's task has ended with it
        printed(request, client_address)

    server.handle_error = handle_error
