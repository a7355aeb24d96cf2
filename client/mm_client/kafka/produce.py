"""Producing: a full queue waited out, and records that count only once acknowledged.

:func:`produce_retrying` is a plain function so a per-record hot loop can keep
calling its locally bound ``producer.produce`` and fall back to it only when
that raises BufferError.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException

from mm_client.errors import KafkaOperationError
from mm_client.kafka.errors import is_refusal, kafka_cause, kafka_error

__all__ = [
    "FULL_QUEUE_POLL",
    "AcknowledgedProducer",
    "Acknowledgements",
    "DeliveryFailure",
    "ProducerLike",
    "produce_retrying",
]

# seconds spent serving delivery reports (which frees queue room) before producing again
FULL_QUEUE_POLL = 0.05


class ProducerLike(Protocol):
    """What is used of a confluent-kafka Producer (fakes in tests need no more)."""

    def produce(self, *args: Any, **kwargs: Any) -> None: ...

    def poll(self, *args: Any, **kwargs: Any) -> int: ...

    def flush(self, *args: Any, **kwargs: Any) -> int: ...


def produce_retrying(producer: ProducerLike, *args: Any, **kwargs: Any) -> None:
    """``producer.produce(*args, **kwargs)``, polling while its queue is full.

    librdkafka raises BufferError when its local queue is full; the queue drains
    as the broker acknowledges (or delivery times out), so this always ends.
    Other errors (KafkaException) propagate: the caller knows what to name.
    """
    while True:
        try:
            producer.produce(*args, **kwargs)
            return
        except BufferError:
            producer.poll(FULL_QUEUE_POLL)


@dataclass(frozen=True)
class DeliveryFailure:
    """A record the cluster refused: ``tag`` is what the caller passed to ``produce``."""

    tag: Any
    error: KafkaError


@dataclass(frozen=True)
class Acknowledgements:
    """What one flush found: refused records, and how many were still unanswered."""

    failures: tuple[DeliveryFailure, ...] = ()
    unacknowledged: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures and not self.unacknowledged

    def detail(self) -> str:
        """The first refusal's text, else how many records were not acknowledged."""
        if self.failures:
            return self.failures[0].error.str()
        return f"{self.unacknowledged} not acknowledged"

    def error(self, context: str, *, code: str | None = None) -> KafkaOperationError | None:
        """``"<context>: <detail>"`` as a retriable error, or None when all was acknowledged.

        ``code`` defaults to ``_TIMED_OUT`` when records were left unanswered and
        to none when only refusals were reported (their text says what failed).
        """
        if self.ok:
            return None
        refused = next((f.error for f in self.failures if is_refusal(f.error.name())), None)
        if refused is not None:  # retrying cannot help: say so, whatever the caller expected
            return KafkaOperationError(
                f"{context}: {refused.str()}", code=refused.name(), retriable=False
            )
        if code is None and self.unacknowledged:
            code = "_TIMED_OUT"
        return KafkaOperationError(f"{context}: {self.detail()}", code=code, retriable=True)


class AcknowledgedProducer:
    """Produce now, learn at :meth:`flush` (or :meth:`wait`) what was not acknowledged.

    Wraps a producer the caller owns (and closes). Delivery reports arrive on the
    thread that polls or flushes, so a single-threaded caller needs no lock.
    """

    def __init__(self, producer: ProducerLike) -> None:
        self.producer = producer
        self._failures: list[DeliveryFailure] = []

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        tag: Any = None,
        **kwargs: Any,
    ) -> None:
        """Produce one record (waiting while the queue is full); ``tag`` names it in failures."""
        produce_retrying(
            self.producer, topic, value, key, on_delivery=partial(self._delivered, tag), **kwargs
        )

    def _delivered(self, tag: Any, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self._failures.append(DeliveryFailure(tag, err))

    def wait(self, timeout: float) -> Acknowledgements:
        """Flush; what was refused or left unanswered since the previous wait."""
        try:
            remaining = self.producer.flush(timeout)
        except (SystemError, KafkaException) as exc:
            # a fatal error (an idempotent producer refused its topic, say) is raised
            # from inside flush, through a delivery callback as a SystemError
            err = kafka_error(kafka_cause(exc) or exc)
            if err is None:
                raise
            self._failures.append(DeliveryFailure(None, err))
            remaining = 0
        failures, self._failures = tuple(self._failures), []
        return Acknowledgements(failures, remaining)

    def flush(self, timeout: float, context: str, *, code: str | None = None) -> None:
        """Flush; raises KafkaOperationError (see :meth:`Acknowledgements.error`) unless
        every record produced since the previous wait was acknowledged."""
        error = self.wait(timeout).error(context, code=code)
        if error is not None:
            raise error
