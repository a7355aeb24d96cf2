"""The exactly-once transaction's protocol (mm.kafka.txn.Transaction), the one the
mirror and the restore both write with: call order, aborts, and the failure's cause.
The protocol itself runs against Apache Kafka in the mirror's and the restore's
exactly-once tests; here, what the object decides."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mm.kafka.txn import Transaction

pytestmark = pytest.mark.unit


class _Producer:
    """Records the transactional calls; ``fail`` maps a method to the error it raises."""

    def __init__(self, fail: dict[str, KafkaError] | None = None, left: int = 0) -> None:
        self.calls: list[str] = []
        self.fail = fail or {}
        self.left = left

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise KafkaException(self.fail[name])

    def list_topics(self, topic: str, timeout: float) -> None:
        self._call("list_topics")

    def init_transactions(self, timeout: float) -> None:
        self._call("init_transactions")

    def begin_transaction(self) -> None:
        self._call("begin_transaction")

    def send_offsets_to_transaction(
        self, positions: Any, group_metadata: Any, timeout: float
    ) -> None:
        self._call("send_offsets_to_transaction")

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit_transaction")

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort_transaction")

    def flush(self, timeout: float) -> int:
        self.calls.append("flush")
        return self.left


def _abortable(code: int) -> KafkaError:
    return KafkaError(code, "failed", txn_requires_abort=True)


POSITIONS = [TopicPartition("t", 0, 5)]


def test_init_reads_metadata_then_fences() -> None:
    producer = _Producer()
    Transaction(producer).init("t", 10)
    assert producer.calls == ["list_topics", "init_transactions"]


def test_a_commit_adds_the_positions_then_runs_the_hook_then_commits() -> None:
    producer = _Producer()
    Transaction(producer).commit(POSITIONS, object(), offsets_timeout=1, commit_timeout=1,
                                 before_commit=lambda: producer.calls.append("hook"))  # fmt: skip
    assert producer.calls == ["send_offsets_to_transaction", "hook", "commit_transaction"]


def test_a_commit_that_needs_an_abort_aborts_and_still_raises() -> None:
    producer = _Producer({"commit_transaction": _abortable(KafkaError.REQUEST_TIMED_OUT)})
    with pytest.raises(KafkaException):
        Transaction(producer).commit(POSITIONS, object(), offsets_timeout=1, commit_timeout=1)
    assert producer.calls[-1] == "abort_transaction"


def test_a_fenced_commit_is_not_aborted_here() -> None:
    fenced = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
    producer = _Producer({"commit_transaction": fenced})
    with pytest.raises(KafkaException):
        Transaction(producer).commit(POSITIONS, object(), offsets_timeout=1, commit_timeout=1)
    assert "abort_transaction" not in producer.calls


def test_positions_alone_are_a_transaction_of_their_own() -> None:
    producer = _Producer()
    Transaction(producer).commit_positions(POSITIONS, object(), 1)
    assert producer.calls == ["begin_transaction", "send_offsets_to_transaction",
                              "commit_transaction"]  # fmt: skip


def test_an_abort_that_fails_is_left_to_the_broker() -> None:
    producer = _Producer({"abort_transaction": KafkaError(KafkaError._FENCED, "x", fatal=True)})
    Transaction(producer).abort(1)
    assert producer.calls == ["abort_transaction"]


def test_a_purged_delivery_names_the_transactions_cause() -> None:
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed")
    producer = _Producer({"begin_transaction": denied}, left=2)
    txn = Transaction(producer)
    assert txn.delivered(1) == 2
    error = txn.cause(KafkaError(KafkaError._PURGE_QUEUE))
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # any other delivery error is the error itself; none stays none
    timed_out = KafkaError(KafkaError._MSG_TIMED_OUT)
    assert Transaction(_Producer()).cause(timed_out) is timed_out
    assert Transaction(_Producer()).cause(None) is None


def test_the_cause_is_read_after_the_reports_delivered_serves() -> None:
    """The delivery reports run inside flush(): an error one of them records must
    be the one the caller then gets (reading it before the wait saw none)."""

    class Reports:
        error: KafkaError | None = None

    reports = Reports()
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed")

    class _Reporting(_Producer):
        def flush(self, timeout: float) -> int:
            reports.error = KafkaError(KafkaError._PURGE_QUEUE)
            return super().flush(timeout)

    txn = Transaction(_Reporting({"begin_transaction": denied}))
    assert txn.delivered(1) == 0
    error = txn.cause(reports.error)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
