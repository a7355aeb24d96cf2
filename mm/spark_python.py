"""``mm-spark-python``: the Python executable the jobs hand to Spark.

Spark starts its Python processes (the executors' worker daemon, and one fresh
planner process per query for a Python data source such as the mirror's) as
``<python> -m <module>`` with ``$SPARK_HOME/python/lib/pyspark.zip`` first on
``PYTHONPATH``. That zip holds sources only and zip imports cache no bytecode, so
every such process compiles PySpark again: about 0.6-0.9 s of each mirror query's
start on a 2-core machine. When the zip is the installed PySpark's own copy (a
pip-installed PySpark: same files), this launcher drops it from ``sys.path`` so
the installed, byte-compiled package is imported instead, then runs the module as
``python -m`` would. A zip from anywhere else (a separate Spark distribution) is
kept. Anything but ``-m MODULE`` is handed to the interpreter unchanged.

It also takes Spark's Python processes out of the terminal's process group
(:func:`leave_foreground_group`), so Ctrl-C stops the job through its driver,
runs every worker daemon as the quiet one (``DAEMONS``), and ends quietly a
process whose JVM hung up on it (:func:`run_until_hung_up`).

Stdlib only, imports nothing of PySpark or of the toolkit: it runs first in
every Spark Python process.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence

ZIP_NAME = "pyspark.zip"
# Spark names its worker daemon by ``spark.python.daemon.module`` for task workers
# only; the daemon of a Python data source's planner workers is always PySpark's
# own. Both run as the quiet daemon (mm.spark_daemon): a planner worker whose JVM
# hung up during its handshake (a stopping job) printed a traceback otherwise.
DAEMONS = {"pyspark.daemon": "mm.spark_daemon"}
# what a Spark Python process meets when the JVM closed its socket: the end of its
# input, or a write to a connection the other end has closed
HUNG_UP: tuple[type[BaseException], ...] = (EOFError, BrokenPipeError, ConnectionResetError)


def installed_pyspark_zip(path: Sequence[str]) -> str | None:
    """The ``pyspark.zip`` an installed PySpark ships, if a directory on ``path`` has one."""
    for entry in path:
        if not entry or entry.endswith(".zip") or not os.path.isdir(entry):
            continue
        if os.path.isfile(os.path.join(entry, "pyspark", "__init__.py")):
            candidate = os.path.join(entry, "pyspark", "python", "lib", ZIP_NAME)
            return os.path.realpath(candidate) if os.path.isfile(candidate) else None
    return None


def without_zip(path: Sequence[str], own_zip: str | None) -> list[str]:
    """``path`` minus the entries naming ``own_zip`` (the installed PySpark's zip)."""
    if own_zip is None:
        return list(path)
    return [p for p in path if not (p.endswith(ZIP_NAME) and os.path.realpath(p) == own_zip)]


def leave_foreground_group() -> None:
    """Puts this process (and the workers it forks) in a process group of its own.

    A terminal's Ctrl-C signals its whole foreground process group. PySpark keeps
    the JVM out of it (SIGINT ignored) but its worker daemon restores the default
    handler in every worker, so a worker died of KeyboardInterrupt in the middle
    of a micro-batch and Spark printed its traceback and some thousand lines of
    Java stack before the driver could stop the job in order. Only the driver
    takes the signal now, and stops Spark. These processes still end with the
    JVM: they read from it and exit at the end of its input.
    """
    try:
        os.setpgid(0, 0)
    except OSError:  # already a group (or session) leader: nothing to leave
        pass


def gave_up_on_us(exc: BaseException) -> bool:
    """PySpark's CANNOT_OPEN_SOCKET: the process could not connect back to its JVM.

    Spark's JVM waits 10 s for a Python process it started to connect and
    authenticate, then fails the task or query ("Python worker failed to connect
    back") and closes its socket; a process that starts later than that on a
    starved host (seen: a 2-core machine running four test workers) finds nobody
    there. The JVM has already reported it, and the job restarts the query.
    Recognised by name: this module imports nothing of PySpark."""
    condition = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    return (
        type(exc).__name__ == "PySparkRuntimeError"
        and callable(condition)
        and condition() == "CANNOT_OPEN_SOCKET"
    )


def _end_quietly(line: str | None = None) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is sys.stderr and line:
                stream.write(line + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass
    # not sys.exit: at shutdown the interpreter would flush the socket's file
    # again and print "Exception ignored" with the same broken pipe
    os._exit(1)


def run_until_hung_up(module: str) -> None:
    """Runs ``module`` as ``python -m`` would; a hang-up reaching the top ends the process
    with code 1 and no traceback.

    A stopping job stops its streaming query, and the JVM closes the socket of the
    query's planner process (PySpark's ``python_streaming_source_runner``) while
    it waits for its next call. The runner then tries to send the EOFError back
    over the closed socket, and the interpreter printed both tracebacks to the
    driver's stderr: ``mm mirror`` stopped by SIGTERM ended with a traceback
    although nothing had gone wrong. Only an exception that reached the top of
    the process is taken, so the runner has already done what it does with an
    error (send it to the JVM); the JVM, which closed the socket, knows the query
    ended. A process the JVM had given up waiting for (:func:`gave_up_on_us`) ends
    with one line saying so. Every other exception is printed as before.
    """
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except HUNG_UP:
        _end_quietly()
    except Exception as exc:
        if not gave_up_on_us(exc):
            raise
        _end_quietly(
            f"mm-spark-python: {module} started too late for its Spark JVM, which had "
            f"stopped waiting for it ({exc}); Spark reports the failure and the job "
            "runs the query again"
        )


def main() -> None:
    leave_foreground_group()
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "-m":
        os.execv(sys.executable, [sys.executable, *args])
    module = DAEMONS.get(args[1], args[1])
    # as `python -m`: the working directory first, not this script's directory
    path = [os.getcwd(), *sys.path[1:]]
    own_zip = installed_pyspark_zip(path)
    sys.path[:] = without_zip(path, own_zip)
    env_path = os.environ.get("PYTHONPATH")
    if env_path:
        # processes started (not forked) from here resolve PySpark the same way
        os.environ["PYTHONPATH"] = os.pathsep.join(without_zip(env_path.split(os.pathsep), own_zip))
    sys.argv = [module, *args[2:]]
    run_until_hung_up(module)


if __name__ == "__main__":
    main()
