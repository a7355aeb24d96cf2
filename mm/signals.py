"""Stopping long-running commands cleanly on SIGTERM/SIGINT (one helper for all)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals(
    stop: threading.Event,
    log: Any = None,
    signals: tuple[signal.Signals, ...] = DEFAULT_SIGNALS,
) -> Callable[[], None]:
    """Set ``stop`` when one of ``signals`` arrives; returns a function restoring the
    previous handlers. Outside the main thread (where Python cannot take signals)
    it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, _frame: Any) -> None:
        if log is not None:
            log.info("stop requested", signal=signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in signals}

    def restore() -> None:
        for sig, prev in previous.items():
            signal.signal(sig, prev)

    return restore


class terminate_as_interrupt:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread, so a
    command that cleans up in ``finally`` on Ctrl-C (stopping the processes and
    brokers it started) does the same when a supervisor or ``kill`` stops it; the
    default action would end the process at once and leave its children running.
    Outside the main thread it does nothing."""

    def __enter__(self) -> terminate_as_interrupt:
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():

            def handler(_signum: int, _frame: Any) -> None:
                raise KeyboardInterrupt

            self._previous = signal.signal(signal.SIGTERM, handler)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
