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


@pytest.mark.unit
def test_librdkafka_lines_go_to_the_structured_log_at_debug_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import logging

    import structlog
    from mm_client.kafka import clients
    from mm_client.kafka.clients import LIBRDKAFKA_LOGGER

    err = io.StringIO()
    monkeypatch.setattr(logs, "_configured", False)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(LIBRDKAFKA_LOGGER, "handlers", [])
    monkeypatch.setattr(LIBRDKAFKA_LOGGER, "propagate", True)
    logs.configure_logging("DEBUG", json=True)
    try:
        # as confluent-kafka calls it: (level, format, fac, name, message)
        LIBRDKAFKA_LOGGER.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#admin-1", "refused")
        assert '"event": "librdkafka"' in err.getvalue()
        assert "FAIL [rdkafka#admin-1] refused" in err.getvalue()
        assert not err.getvalue().startswith("ERROR:")  # not the root handler's line
        # every client the toolkit builds logs there, unless told otherwise
        assert clients._with_logger({"a": 1}) == {"a": 1, "logger": LIBRDKAFKA_LOGGER}
        own = logging.getLogger("mine")
        assert clients._with_logger({"logger": own})["logger"] is own
    finally:
        structlog.reset_defaults()
        logs._configured = False
    err.truncate(0)
    monkeypatch.setattr(logs, "_configured", False)
    logs.configure_logging("INFO", json=True)
    LIBRDKAFKA_LOGGER.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#admin-1", "refused")
    assert "refused" not in err.getvalue()
