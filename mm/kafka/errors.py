"""Turns confluent-kafka errors into the toolkit's error type, code kept."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from mm.errors import KafkaOperationError


def wrap(exc: KafkaException, context: str) -> KafkaOperationError:
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return KafkaOperationError(
            f"{context}: {err.str()}", code=err.name(), retriable=err.retriable()
        )
    return KafkaOperationError(f"{context}: {exc}")


def check(err: KafkaError | None, context: str) -> None:
    if err is not None:
        raise KafkaOperationError(
            f"{context}: {err.str()}", code=err.name(), retriable=err.retriable()
        )
