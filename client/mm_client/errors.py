"""Exception hierarchy shared by the client and the mirroring application.

Everything the toolkit raises on purpose derives from :class:`MirrorError`, so
callers can catch one type. Kafka errors are wrapped with their code kept.
"""

from __future__ import annotations


class MirrorError(Exception):
    """Root of every error the toolkit raises deliberately."""


class RecordDecodeError(MirrorError):
    """A record in an internal topic (offset syncs, checkpoints, heartbeats) is malformed.

    Readers count and skip these; ``topic``/``partition``/``offset`` say where the
    record was, when the caller knows.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = ""
        if topic is not None:
            where = f" at {topic}[{partition}]@{offset}"
        super().__init__(f"{message}{where}")
        self.topic = topic
        self.partition = partition
        self.offset = offset


class KafkaOperationError(MirrorError):
    """A Kafka call failed; ``code`` keeps the broker/librdkafka error code name."""

    def __init__(self, message: str, *, code: str | None = None, retriable: bool = False) -> None:
        super().__init__(f"{message} (code={code})" if code else message)
        self.code = code
        self.retriable = retriable
