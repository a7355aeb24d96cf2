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
        logger_factory=structlog.PrintLoggerFactory(file=_STDERR),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    # py4j and friends log through stdlib; keep them quiet unless asked.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr)
    _configured = True


def get_logger(name: str | None = None, **context: Any) -> Any:
    """A structlog logger bound with ``component=name`` and any extra context."""
    # lazy proxy: safe to create at import time, before configure_logging()
    if name:
        context = {"component": name, **context}
    return structlog.get_logger(**context)
