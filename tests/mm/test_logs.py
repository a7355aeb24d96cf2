"""Logging keeps working when the stderr it was configured with has closed."""

from __future__ import annotations

import io
import sys

import pytest

from mm import logs


def test_events_go_to_the_current_stderr_after_the_first_one_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(logs, "_configured", False)
    monkeypatch.setattr(sys, "stderr", first)
    logs.configure_logging("INFO", json=True)
    logs.get_logger("mm.test").info("one")
    first.close()  # e.g. a test's captured stderr, gone with its test
    monkeypatch.setattr(sys, "stderr", second)
    logs.get_logger("mm.test").info("two")
    assert '"event": "two"' in second.getvalue()
