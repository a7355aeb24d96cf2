"""Open transactions told from a partition's two ends, and Kafka's abort command (pure)."""

from __future__ import annotations

import pytest

from mm.dr.switchover import SwitchoverReport
from mm.dr.transactions import abort_commands, open_transactions

pytestmark = pytest.mark.unit


def test_a_transaction_is_open_where_the_log_end_passes_the_committed_end() -> None:
    committed = {("t", 0): 40, ("t", 1): 7, ("u", 0): 0}
    logs = {("t", 0): 44, ("t", 1): 7, ("u", 0): 0}
    assert open_transactions(committed, logs) == {("t", 0): (40, 44)}
    # a partition whose log end was not read is not guessed open
    assert open_transactions(committed, {("t", 1): 9}) == {("t", 1): (7, 9)}
    assert open_transactions({}, logs) == {}


def test_the_abort_command_starts_at_the_transactions_first_offset() -> None:
    assert abort_commands("h1:9092,h2:9092", [("t", 0, 40), ("u", 3, 12)]) == (
        "kafka-transactions.sh --bootstrap-server h1:9092,h2:9092 abort --topic t "
        "--partition 0 --start-offset 40; kafka-transactions.sh --bootstrap-server "
        "h1:9092,h2:9092 abort --topic u --partition 3 --start-offset 12"
    )
    assert abort_commands("h:1", []) == ""


def test_the_switchover_report_lists_open_transactions_and_is_not_ok() -> None:
    report = SwitchoverReport("A->B", "A", "B", False, False, 1.0)
    doc = report.to_json()
    assert doc["open_transactions"] == [] and doc["open_transactions_checked"] is True
    report.open_transactions = {("t", 0): (40, 44)}
    report.stopped_at = "producers"
    report.problems.append("a transaction is open on A in t[0]")
    doc = report.to_json()
    assert doc["open_transactions"] == [
        {"topic": "t", "partition": 0, "read_committed_end": 40, "log_end": 44}
    ]
    assert not doc["ok"]
