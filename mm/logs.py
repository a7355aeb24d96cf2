"""structlog set-up, done once per process.

JSON lines on stderr by default (ISO UTC timestamps); human-readable console
output when stderr is a terminal. Events carry context (flow, topic, partition)
through ``structlog.contextvars`` or ``log.bind``.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

_configured = False
_program = "mm"


def set_program(name: str) -> None:
    """The running command (``mm mirror``): plain lines on stderr start with it."""
    global _program
    _program = name


def program() -> str:
    return _program


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time: a logger configured while
    stderr was a stream that later closed (a test's capture, a redirected run)
    must not fail every later event with "I/O operation on closed file"."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_STDERR = _CurrentStderr()


def configure_logging(level: str | None = None, *, json: bool | None = None) -> None:
    """Configure structlog and stdlib logging once; later calls are no-ops.

    ``json`` None means: JSON unless stderr is a TTY. ``MM_LOG_LEVEL`` and
    ``MM_LOG_FORMAT`` (json|console) override the defaults.
    """
    global _configured
    if _configured:
        return
    level_name = (level or os.environ.get("MM_LOG_LEVEL") or "INFO").upper()
    numeric = logging.getLevelNamesMapping().get(level_name, logging.INFO)
    fmt = os.environ.get("MM_LOG_FORMAT")
    if json is None:
        json = (fmt == "json") if fmt else not sys.stderr.isatty()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if json:
        renderer = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.format_exc_info)
    else:
        renderer = structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # one write per event (message and newline together): Spark's Python workers
        # share the executor's stderr, unbuffered, and print()'s two writes let one
        # worker's event land between another's message and its newline
        logger_factory=structlog.WriteLoggerFactory(file=_STDERR),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    # py4j and friends log through stdlib; keep them quiet unless asked.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=_STDERR)
    _route_librdkafka()
    _configured = True


class _ToStructlogDebug(logging.Handler):
    """Re-emits stdlib records as structlog events at debug level."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            get_logger("librdkafka").debug(
                "librdkafka", message=record.getMessage(), level_name=record.levelname
            )
        except Exception:  # a log line must never break the client calling back
            self.handleError(record)


def _route_librdkafka() -> None:
    """librdkafka's own lines (``%3|...|FAIL|...`` per refused connection, hundreds
    before a command could say "cluster A did not answer") go to the structured
    log at debug level, not to stderr: the command's error says what matters."""
    from mm_client.kafka.clients import LIBRDKAFKA_LOGGER

    LIBRDKAFKA_LOGGER.handlers[:] = [_ToStructlogDebug()]
    LIBRDKAFKA_LOGGER.setLevel(logging.DEBUG)
    LIBRDKAFKA_LOGGER.propagate = False


def quiet_spark_shutdown(spark: Any = None) -> None:
    """Silence what Spark and py4j print while a job stops on a signal: the
    interrupted micro-batch's InterruptedException, the callback server's broken
    connections. The command's own "stopped" line is what the operator needs."""
    for name in ("py4j", "pyspark"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    if spark is not None:
        try:
            spark.sparkContext.setLogLevel("OFF")
            # the stopped stream thread's uncaught error (a StackOverflowError in
            # java.util.regex while Spark matches the interruption's message, seen
            # under load) is printed by the JVM straight to System.err, not through
            # log4j: after a stop request nothing the JVM prints is news
            jvm = spark.sparkContext._jvm
            jvm.java.lang.System.setErr(
                jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream())
            )
        except Exception:  # the JVM is already gone: nothing left to silence
            pass


def get_logger(name: str | None = None, **context: Any) -> Any:
    """A structlog logger bound with ``component=name`` and any extra context."""
    # lazy proxy: safe to create at import time, before configure_logging()
    if name:
        context = {"component": name, **context}
    return structlog.get_logger(**context)
