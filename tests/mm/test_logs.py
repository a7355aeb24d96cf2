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


_WRITER = """
import sys
from mm import logs
logs.configure_logging("INFO", json=True)
log = logs.get_logger("mm.test", worker=sys.argv[1])
for i in range(3000):
    log.info("mirror position refreshed", n=i, padding="x" * 200)
"""


@pytest.mark.unit
def test_two_processes_sharing_an_unbuffered_stderr_never_split_an_event(
    tmp_path: pytest.TempPathFactory,
) -> None:
    """Spark's Python workers of one executor write to its stderr, unbuffered
    (PYTHONUNBUFFERED): every event is one write, so each line holds one whole event
    (print()'s message-then-newline let another worker's event in between: two
    events on one line, which `mm` readers and log shippers cannot parse)."""
    import json
    import os
    import subprocess

    path = tmp_path / "stderr"  # type: ignore[operator]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MM_LOG_FORMAT": "json"}
    with open(path, "ab") as err:
        procs = [
            subprocess.Popen([sys.executable, "-c", _WRITER, str(w)], stderr=err, env=env)
            for w in range(2)
        ]
        assert [p.wait(120) for p in procs] == [0, 0]
    lines = path.read_text().splitlines()
    events = [json.loads(line) for line in lines]  # one whole event per line
    assert len(events) == 6000
    assert {(e["worker"], e["n"]) for e in events} == {
        (str(w), n) for w in range(2) for n in range(3000)
    }
