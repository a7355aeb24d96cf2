"""Run the `mm` command line as a user would: the one place tests start `mm`.

:func:`run_command` runs a command to its end and returns its exit code, stdout and
stderr. A command that ends by itself (``--once``, verify, switchover, failover,
failback, translate, position, restore, one status) runs in this test worker's
process, against the one Spark JVM this worker keeps: starting a JVM per command
was most of the suite's time (13-18 s each, against about 2 s in process). What a
separate process gives is kept: stdout and stderr at the file descriptors (C-level
writes too), the JVM's and Spark's Python workers' output of the run appended to
stderr, SystemExit as the exit code, an escaped exception as a traceback and exit
1, the working directory, environment, signal handlers and logging context put
back, and the run's streaming queries stopped as a process exit would.

The SparkContext (with Spark's Python daemon and workers) is kept for the worker's
next command when that command asks for the same Spark settings, as the jobs of one
long-running `mm run` share theirs: a command's own ``spark.stop()`` is deferred to
that point. What a Python worker keeps for the mirror (pooled producers, committed
floors) belongs to one run of the mirror job and is dropped by the next run's first
task (mm.source.task.enter_run), as it is when `mm run` restarts a failed job.
Measured on Apache Kafka, 4 partitions of 2,000 records: `mm mirror
--once` of a new topic 4.2-4.8 s with a new SparkContext per command, 1.3-1.9 s with
the kept one; with nothing new 1.7-1.8 s against 0.9 s. A command that asks for other
Spark settings (``spark.*`` keys, the class archive setting) gets a new context;
one on a cluster's master (not ``local``) is stopped after its command, which frees
the cluster's executors; ``MMTEST_KEEP_SPARK=0`` gives every command its own.

Tests about a process (signals, kills, stop, long-running jobs, `mm run`, the
drill) start one: ``process=True``, or a long-running command, always does.
``MMTEST_IN_PROCESS=0`` runs every command in its own process. A command whose
environment differs from the worker JVM's where Spark's Python workers read it
(e.g. cloud credentials), or that asks for other logging, gets its own process too.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import io
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MM = [sys.executable, "-m", "mm"]

# commands that always end by themselves
_ENDING = {"verify", "switchover", "failover", "failback", "translate", "position", "restore"}
# commands that end by themselves with --once
_ONCE = {"mirror", "checkpoint", "heartbeat"}
# the environment before any test changed it: the worker JVM's (and so its Python
# workers') environment
_BASE_ENV = dict(os.environ)
# not read by the JVM or Spark's Python workers: pytest's own, this harness's, and
# mm's configuration overrides (read by the command, in this process), except its
# logging settings
_NOT_FOR_WORKERS = ("PYTEST_", "MMTEST_", "MM_")
_WORKER_READS = ("MM_LOG_LEVEL", "MM_LOG_FORMAT")
_PYTHONS = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
# set in this process's environment by PySpark itself whenever a SparkContext starts
# (from its settings, the same for every command here), and never put back: after a
# test that built a SparkSession of its own they would otherwise send every later
# command of the worker to a process of its own (seen: all 52 of one worker's)
_SET_BY_PYSPARK = ("SPARK_BUFFER_SIZE", "SPARK_AUTH_SOCKET_TIMEOUT")


def _worker_state() -> dict[str, Any]:
    """This process's JVM log, set once: kept on ``sys`` because this module is
    imported both as tests.support.cli and support.cli."""
    state: dict[str, Any] = sys.__dict__.setdefault("_mm_test_in_process", {})
    return state


@dataclass
class CommandRun:
    """A finished `mm` command: exit code, outputs, wall seconds."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def events(self, name: str) -> list[dict[str, Any]]:
        """The JSON log events called ``name`` that the run wrote to stderr."""
        out = []
        for line in self.stderr.splitlines():
            if line.startswith("{") and f'"{name}"' in line:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == name:
                    out.append(event)
        return out

    def json(self) -> dict[str, Any]:
        try:
            out: dict[str, Any] = json.loads(self.stdout)
        except ValueError:
            raise AssertionError(f"not JSON:\n{self.describe()}") from None
        return out

    def describe(self) -> str:
        return (
            f"exit {self.returncode} after {self.seconds:.1f}s\n--- stdout\n{self.stdout[-4000:]}"
            f"\n--- stderr (tail)\n{self.stderr[-8000:]}"
        )


def mm_env() -> dict[str, str]:
    """The environment an `mm` command runs with: this interpreter for Spark's
    Python processes, JSON logs (tests read their events)."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["MM_LOG_FORMAT"] = "json"
    return env


def run_command(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    while_waiting: Callable[[], Any] | None = None,
    keep: Path | None = None,
    process: bool = False,
) -> CommandRun:
    """``mm <args>`` in ``cwd`` with ``env`` (default :func:`mm_env`), to its end.

    ``while_waiting`` is called repeatedly until the command ends (e.g. to keep a
    consumer polling). ``keep``: a path prefix; the outputs are also written to
    ``<keep>.out`` and ``<keep>.err`` for post-mortems. A command still running
    after ``timeout`` fails the test.
    """
    env = dict(mm_env() if env is None else env)
    why_not = _why_a_process(args, env, process)
    started = time.monotonic()
    if why_not is None:
        run = _in_process(list(args), cwd, env, timeout, while_waiting)
    else:
        run = _subprocess(list(args), cwd, env, timeout, while_waiting)
    run.seconds = time.monotonic() - started
    _log_command(args, why_not, run)
    if keep is not None:
        keep.with_suffix(".out").write_text(run.stdout)
        keep.with_suffix(".err").write_text(run.stderr)
    return run


def _why_a_process(args: Sequence[str], env: Mapping[str, str], process: bool) -> str | None:
    """Why ``mm <args>`` gets a process of its own (None: it runs in this one)."""
    if process:
        return "asked for"
    if os.environ.get("MMTEST_IN_PROCESS", "1") == "0":
        return "MMTEST_IN_PROCESS=0"
    if not ends_by_itself(args):
        return "long-running"
    if "--log-level" in args:
        return "--log-level"
    if env.get("MM_LOG_LEVEL", "INFO").upper() != "INFO":
        return "MM_LOG_LEVEL"
    differ = _env_differences(env)
    return f"environment: {', '.join(differ)}" if differ else None


def _log_command(args: Sequence[str], why_not: str | None, run: CommandRun) -> None:
    """With ``MMTEST_COMMAND_LOG`` set, one JSON line per command appended to that
    file (test, arguments, in process or why not, seconds, exit code): where the
    suite's time goes."""
    path = os.environ.get("MMTEST_COMMAND_LOG")
    if not path:
        return
    line = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
        "args": list(args),
        "in_process": why_not is None,
        "why_a_process": why_not,
        "seconds": round(run.seconds, 2),
        "returncode": run.returncode,
    }
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


def ends_by_itself(args: Sequence[str]) -> bool:
    """Whether ``mm <args>`` ends by itself (no long-running mode asked for)."""
    if not args:
        return False
    command = args[0]
    if command in _ENDING:
        return True
    if command in _ONCE or command == "backup":
        if "--once" in args:
            return True
        return command == "backup" and any(a in ("ls", "compact", "verify") for a in args[1:])
    if command == "status":
        return not any(a in ("--watch", "--serve") or a.startswith("--serve=") for a in args)
    return False


def _jvm_env() -> dict[str, str]:
    """The environment the worker JVM starts with (and its Python workers inherit)."""
    return {**_BASE_ENV, **dict.fromkeys(_PYTHONS, sys.executable), "MM_LOG_FORMAT": "json"}


def _env_differences(env: Mapping[str, str]) -> list[str]:
    """The variables where ``env`` gives Spark's Python workers, or mm's logging
    (configured once per process), other than what the worker JVM gives them: a
    command with any needs its own process (e.g. cloud credentials a task reads)."""

    def seen(e: Mapping[str, str]) -> dict[str, str]:
        return {
            k: v
            for k, v in e.items()
            if k not in _PYTHONS
            and k not in _SET_BY_PYSPARK
            and (k in _WORKER_READS or not k.startswith(_NOT_FOR_WORKERS))
        }

    mine, jvm = seen(env), seen(_jvm_env())
    return sorted(k for k in mine.keys() | jvm.keys() if mine.get(k) != jvm.get(k))


def _subprocess(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    while_waiting: Callable[[], Any] | None,
) -> CommandRun:
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [*MM, *args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,  # killed whole (its JVM too) on timeout
        )
        try:
            deadline = time.monotonic() + timeout
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    err.seek(0)
                    raise AssertionError(
                        f"mm {' '.join(args)} did not end within {timeout:.0f}s\n"
                        f"{err.read()[-8000:]}"
                    )
                if while_waiting is not None:
                    while_waiting()
                else:
                    time.sleep(0.05)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # a JVM left behind by a crashed driver
            proc.wait(30)
        out.seek(0)
        err.seek(0)
        return CommandRun(proc.returncode, out.read(), err.read(), 0.0)


def _in_process(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    while_waiting: Callable[[], Any] | None,
) -> CommandRun:
    jvm_log = _worker_jvm()
    jvm_from = jvm_log.stat().st_size
    done = threading.Event()
    timed_out = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not done.wait(0.05):
            if while_waiting is not None:
                while_waiting()
            if time.monotonic() > deadline and not timed_out.is_set():
                timed_out.set()
                _thread.interrupt_main()  # the command sees Ctrl-C

    watcher = threading.Thread(target=watch, daemon=True)
    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path = Path(tmp, "out"), Path(tmp, "err")
        with _as_a_process(cwd, env), _outputs(out_path, err_path) as (_out, err):
            watcher.start()
            try:
                with _kept_spark():
                    code = _main(args, err)
            finally:
                done.set()
                watcher.join()
                _end_command(keep=not timed_out.is_set() and _keep_spark())
        stdout = out_path.read_text(errors="replace")
        stderr = err_path.read_text(errors="replace")
    with jvm_log.open("rb") as f:
        f.seek(jvm_from)
        stderr += f.read().decode(errors="replace")
    if timed_out.is_set():
        raise AssertionError(
            f"mm {' '.join(args)} did not end within {timeout:.0f}s\n{stderr[-8000:]}"
        )
    return CommandRun(code, stdout, stderr, 0.0)


def _main(args: list[str], err: io.TextIOBase) -> int:
    """`mm`'s main as ``python -m mm`` runs it: SystemExit is the exit code, an escaped
    exception a traceback on stderr and exit 1."""
    from mm.cli import main

    try:
        return int(main(args) or 0)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=err)
        return 1
    except BaseException:
        traceback.print_exc(file=err)
        return 1


def _keep_spark() -> bool:
    return os.environ.get("MMTEST_KEEP_SPARK", "1") != "0"


def _stop_spark() -> None:
    """Stop the worker's SparkContext, if one runs (its JVM stays)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkContext._active_spark_context
    _worker_state().pop("spark_settings", None)
    if active is None:
        return
    session = SparkSession._instantiatedSession
    stop = _worker_state().get("session_stop", SparkSession.stop)
    with contextlib.suppress(Exception):
        if session is not None and session.sparkContext is active:
            stop(session)
        else:
            active.stop()


def _end_command(keep: bool) -> None:
    """Stop what the command left running, as its process's exit would: its streaming
    queries, and (unless ``keep``) the SparkContext."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    session = SparkSession._instantiatedSession
    active = SparkContext._active_spark_context
    # an application on a cluster's master holds that cluster's executors: not kept
    keep = keep and active is not None and str(active.master).startswith("local")
    if keep and session is not None:
        try:
            for query in session.streams.active:
                query.stop()
        except Exception:  # a context the command broke: not one to keep
            keep = False
    if not keep:
        _stop_spark()
    gc.collect()  # Kafka clients the command dropped are closed now, not later


@contextlib.contextmanager
def _kept_spark() -> Iterator[None]:
    """While a command runs in process: its ``build_spark`` reuses the kept
    SparkContext when the settings it asks for are those the context was built with
    (else the context is stopped and a new one built), and its ``spark.stop()`` is left
    to :func:`_end_command`."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    import mm.spark_session as spark_session

    state = _worker_state()
    build = spark_session.build_spark
    stop = state.setdefault("session_stop", SparkSession.stop)

    def build_kept(
        app_name: str, spark_conf: Mapping[str, str], class_archive: str = "auto"
    ) -> Any:
        wanted = (tuple(sorted(dict(spark_conf).items())), class_archive)
        if SparkContext._active_spark_context is not None and state.get("spark_settings") != wanted:
            _stop_spark()
        spark = build(app_name, spark_conf, class_archive)
        state["spark_settings"] = wanted
        return spark

    spark_session.build_spark = build_kept  # type: ignore[assignment]
    SparkSession.stop = lambda self: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        spark_session.build_spark = build  # type: ignore[assignment]
        SparkSession.stop = stop  # type: ignore[method-assign]


@contextlib.contextmanager
def _as_a_process(cwd: Path, env: dict[str, str]) -> Iterator[None]:
    """``cwd``, ``env``, a fresh logging context, and the root logger a new `mm`
    process has (mm's logging.basicConfig: WARNING and up on stderr; pytest's capture
    handlers would otherwise stand in for it); all put back after."""
    import logging

    import structlog

    old_cwd, old_env = os.getcwd(), dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    root = logging.getLogger()
    root_handlers, root_level = root.handlers[:], root.level
    stderr = logging.StreamHandler(_CurrentStderr())  # type: ignore[arg-type]
    stderr.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    root.handlers, root.level = [stderr], logging.WARNING
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    structlog.contextvars.clear_contextvars()
    try:
        yield
    finally:
        root.handlers, root.level = root_handlers, root_level
        structlog.contextvars.clear_contextvars()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        os.environ.clear()
        os.environ.update(old_env)
        os.chdir(old_cwd)


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


@contextlib.contextmanager
def _outputs(out_path: Path, err_path: Path) -> Iterator[tuple[io.TextIOBase, io.TextIOBase]]:
    """stdout and stderr into the two files, at the descriptors too (librdkafka and
    other C code write there)."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()  # type: ignore[union-attr]
    saved = os.dup(1), os.dup(2)
    with open(out_path, "a", buffering=1) as out, open(err_path, "a", buffering=1) as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield out, err
        finally:
            out.flush()
            err.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _worker_jvm() -> Path:
    """This worker's Spark JVM, started once with the product's defaults and
    :func:`_jvm_env`; its output (and its Python workers') goes into a file each run
    reads its part of."""
    state = _worker_state()
    if "jvm_log" in state:
        return Path(state["jvm_log"])
    from pyspark import SparkConf, SparkContext

    from mm.spark_classes import java_options, with_java_options
    from mm.spark_session import DEFAULTS, require_java, spark_python

    java = require_java()
    log = Path(tempfile.mkdtemp(prefix="mm-test-jvm-")) / "jvm.log"
    log.touch()
    env = _jvm_env()
    env["PYSPARK_PYTHON"] = spark_python(env["PYSPARK_PYTHON"])
    with _as_a_process(Path.cwd(), env), _outputs(log, log):
        # as a new mm process starts it: from the class archive where one is ready
        options, _ = java_options("auto", DEFAULTS, java)
        conf = SparkConf(loadDefaults=False).setAll(
            list(with_java_options(DEFAULTS, options).items())
        )
        SparkContext._ensure_initialized(conf=conf)
    state["jvm_log"] = str(log)
    return log


def run_mm(*args: str, cwd: Path, timeout: float = 60.0) -> CommandRun:
    """``mm <args>`` in ``cwd`` (see :func:`run_command`)."""
    return run_command(args, cwd=cwd, timeout=timeout)


class MMProcess:
    """A long-running `mm` subprocess whose stdout lines can be awaited."""

    def __init__(self, *args: str, cwd: Path, stderr_path: Path) -> None:
        self._stderr = open(stderr_path, "w")  # a file: a full pipe would block the child
        self.proc = subprocess.Popen(
            [*MM, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(self, match: Callable[[str], bool], timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching line from mm; got {self.lines}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise EOFError(f"mm exited ({self.proc.poll()}) without it; got {self.lines}")
            self.lines.append(line)
            if match(line):
                return line

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._stderr.close()
