"""The one place a KafkaException is unwrapped.

confluent-kafka raises ``KafkaException`` with the ``KafkaError`` in ``args[0]``
(and sometimes without one); everything here reads it the same way, so a
wrapped error always keeps the librdkafka code name and whether it is retriable.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from mm_client.errors import KafkaOperationError

__all__ = [
    "REFUSAL_CODES",
    "cause_code",
    "describe_exception",
    "error_code",
    "is_refusal",
    "kafka_cause",
    "kafka_error",
    "wrap",
    "wrap_error",
]


# The cluster refused the principal (an ACL missing) or could not authenticate it:
# retrying cannot help until an operator grants or fixes something
REFUSAL_CODES = frozenset(
    {
        "TOPIC_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
        "SASL_AUTHENTICATION_FAILED",
        "_AUTHENTICATION",
    }
)


def is_refusal(code: str | None) -> bool:
    """True for an authorization or authentication failure's code name."""
    return code in REFUSAL_CODES


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError a KafkaException carries, if any."""
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def error_code(exc: BaseException) -> str | None:
    """The librdkafka error code name (``"GROUP_ID_NOT_FOUND"``) of a KafkaException."""
    err = kafka_error(exc)
    return err.name() if err is not None else None


def kafka_cause(exc: BaseException | None) -> BaseException | None:
    """The Kafka error behind ``exc``: itself, or an exception that caused it.

    librdkafka raises a fatal error met while serving a delivery callback through
    the callback, so Python sees a SystemError caused by the KafkaException.
    """
    for _ in range(4):
        if exc is None:
            return None
        if isinstance(exc, KafkaOperationError) or kafka_error(exc) is not None:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def cause_code(exc: BaseException | None) -> str | None:
    """The Kafka error code of ``exc`` or of the exception that caused it."""
    cause = kafka_cause(exc)
    if isinstance(cause, KafkaOperationError):
        return cause.code
    return error_code(cause) if cause is not None else None


def describe_exception(exc: BaseException) -> str:
    """The librdkafka error text of a KafkaException (``str(exc)`` otherwise)."""
    err = kafka_error(exc)
    return err.str() if err is not None else str(exc)


def wrap_error(err: KafkaError, context: str) -> KafkaOperationError:
    """A KafkaError (a delivery report's, say) as KafkaOperationError, code kept."""
    code = err.name()
    return KafkaOperationError(
        f"{context}: {err.str()}",
        code=code,
        retriable=err.retriable() and not is_refusal(code),
    )


def wrap(exc: BaseException, context: str) -> KafkaOperationError:
    """A KafkaException as KafkaOperationError: ``"<context>: <librdkafka text>"``, code kept."""
    err = kafka_error(exc)
    if err is not None:
        return wrap_error(err, context)
    return KafkaOperationError(f"{context}: {exc}")
