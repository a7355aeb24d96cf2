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
