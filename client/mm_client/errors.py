"""Exception hierarchy shared by the client and the mirroring application.

Everything the toolkit raises on purpose derives from :class:`MirrorError`, so
callers can catch one type. Kafka errors are wrapped with their code kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mm_client.topic_partition import TopicPartition


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


class FailoverRefusedError(MirrorError):
    """Applying translated offsets would skip or re-read records without the caller
    asking for it; nothing was assigned, sought or committed.

    The subclasses say which: :class:`NoCheckpointsError`, :class:`RewindRefusedError`,
    :class:`TopicNotOnTargetError`.
    """


class NoCheckpointsError(FailoverRefusedError):
    """The group has no checkpoint: its consumer would start at its reset policy
    (kafka-python's and librdkafka's default ``latest`` skips the whole backlog).

    ``other_groups`` are the groups the checkpoints topic does hold.
    """

    def __init__(self, message: str, *, group: str | None, other_groups: tuple[str, ...]) -> None:
        super().__init__(message)
        self.group = group
        self.other_groups = other_groups


class RewindRefusedError(FailoverRefusedError):
    """The group already committed past the translated offsets on the target (it has
    run there since the failover): moving it back would process records again.

    ``rewinds``: partition -> (committed now, translated offset).
    """

    def __init__(
        self, message: str, *, group: str, rewinds: dict[TopicPartition, tuple[int, int]]
    ) -> None:
        super().__init__(message)
        self.group = group
        self.rewinds = rewinds


class TopicNotOnTargetError(FailoverRefusedError):
    """An offset names a topic the target cluster does not have (often the source
    name, ``orders``, where the mirror's copy is ``A.orders``).

    ``suggestions``: topic -> the remote topic(s) on the target mirrored from it.
    """

    def __init__(self, message: str, *, suggestions: dict[str, list[str]]) -> None:
        super().__init__(message)
        self.suggestions = suggestions
