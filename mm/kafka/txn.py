"""The exactly-once transaction, written once for every job that writes in
transactions (the mirror and the restore).

A :class:`Transaction` is a transactional producer's protocol:

- :meth:`~Transaction.init` fences every older producer of the same
  ``transactional.id`` and aborts what it left open (after a metadata request,
  which spares librdkafka's coordinator lookup a 0.5 s retry timer);
- :meth:`~Transaction.begin`, then records with :meth:`~Transaction.produce` (the
  hot loops call the producer's own ``produce`` and fall back to it when the
  queue is full);
- :meth:`~Transaction.delivered` waits for the records' acknowledgements, and
  :meth:`~Transaction.cause` then names what failed them (:func:`transaction_error`:
  the cause, not librdkafka's purge);
- :meth:`~Transaction.commit` puts the job's positions (consumer-group offsets on
  the target) into the same transaction as its records and commits; a commit that
  leaves the transaction needing an abort aborts it;
- :meth:`~Transaction.commit_positions` moves positions alone;
- :meth:`~Transaction.abort`, which a fenced or failed producer may not manage:
  the broker (or the next ``init_transactions`` of the id) aborts it then.

Errors are librdkafka's ``KafkaException``: the caller names what it was writing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from mm_client.kafka import kafka_error, produce_retrying


def transaction_error(producer: Any) -> KafkaError | None:
    """The error that failed the open transaction, if one did.

    librdkafka purges a failed transaction's records, so their delivery reports
    say only _PURGE_QUEUE; the cause (a topic the principal may not write, say) is
    kept in the producer's transaction state, which any transactional call outside
    its allowed states reports. Beginning a transaction inside one changes nothing.
    """
    try:
        producer.begin_transaction()
    except KafkaException as exc:
        err = kafka_error(exc)
        if err is not None and err.code() != KafkaError._STATE:
            return err
    return None


class Transaction:
    """The exactly-once protocol over one transactional ``producer`` (module doc)."""

    __slots__ = ("producer",)

    def __init__(self, producer: Any) -> None:
        self.producer = producer

    def init(self, topic: str, timeout: float) -> None:
        """Fence older producers of this id; ``topic``'s metadata first (see module doc)."""
        self.producer.list_topics(topic, timeout=timeout)
        self.producer.init_transactions(timeout)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
        """``produce``, polling while the producer's queue is full."""
        produce_retrying(self.producer, topic, *args, **kwargs)

    def delivered(self, timeout: float) -> int:
        """Wait up to ``timeout`` for every record's acknowledgement (delivery reports
        are served meanwhile); the records still unacknowledged."""
        return int(self.producer.flush(timeout))

    def cause(self, error: KafkaError | None) -> KafkaError | None:
        """What failed the transaction, given the first delivery error seen: that
        error, or for librdkafka's purge the transaction's own error behind it.
        Ask after :meth:`delivered`: the reports arrive during it."""
        if error is not None and error.code() == KafkaError._PURGE_QUEUE:
            return transaction_error(self.producer) or error
        return error

    def commit(
        self,
        positions: Sequence[TopicPartition],
        group_metadata: Any,
        *,
        offsets_timeout: float,
        commit_timeout: float,
        before_commit: Callable[[], None] | None = None,
    ) -> None:
        """Add ``positions`` to the open transaction, run ``before_commit``, commit."""
        producer = self.producer
        try:
            producer.send_offsets_to_transaction(list(positions), group_metadata, offsets_timeout)
            if before_commit is not None:
                before_commit()
            producer.commit_transaction(commit_timeout)
        except KafkaException as exc:
            err = kafka_error(exc)
            if err is not None and err.txn_requires_abort():
                self.abort(30)
            raise

    def commit_positions(
        self, positions: Sequence[TopicPartition], group_metadata: Any, timeout: float
    ) -> None:
        """A transaction of ``positions`` alone."""
        self.begin()
        self.commit(positions, group_metadata, offsets_timeout=timeout, commit_timeout=timeout)

    def abort(self, timeout: float) -> None:
        try:
            self.producer.abort_transaction(timeout)
        except KafkaException:
            pass  # fenced or fatal: the broker (or the next init_transactions) aborts it
