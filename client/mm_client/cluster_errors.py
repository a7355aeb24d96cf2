"""Errors of the failover client: a cluster that does not answer, checkpoints that cannot be read.

Both derive from :class:`~mm_client.errors.KafkaOperationError` (and so from
:class:`~mm_client.errors.MirrorError`) and keep the Kafka error code when
there is one. Their messages name the bootstrap servers (and the topic), since
"which cluster?" is the first question during a failover.
"""

from __future__ import annotations

from typing import Literal

from mm_client.errors import KafkaOperationError

__all__ = [
    "CheckpointsUnavailableError",
    "ClusterUnavailableError",
    "OffsetHistoryUnavailableError",
    "TopicUnreadableError",
]

CheckpointsProblem = Literal["unreachable", "missing", "incomplete", "error"]


class ClusterUnavailableError(KafkaOperationError):
    """A cluster did not answer within the timeout (no metadata, no response).

    ``bootstrap_servers`` names the cluster as the caller configured it.
    """

    def __init__(
        self,
        message: str,
        *,
        bootstrap_servers: str,
        code: str | None = None,
        retriable: bool = True,
    ) -> None:
        super().__init__(message, code=code, retriable=retriable)
        self.bootstrap_servers = bootstrap_servers


class TopicUnreadableError(KafkaOperationError):
    """An internal topic of the target could not be read to its end; ``reason`` says
    why (see :class:`CheckpointsUnavailableError`) and ``topic`` names it."""

    def __init__(
        self,
        message: str,
        *,
        bootstrap_servers: str,
        topic: str,
        reason: CheckpointsProblem,
        code: str | None = None,
        retriable: bool = False,
    ) -> None:
        super().__init__(message, code=code, retriable=retriable)
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.reason: CheckpointsProblem = reason


class CheckpointsUnavailableError(TopicUnreadableError):
    """The checkpoints topic could not be read to its end.

    ``reason`` says why:

    * ``"unreachable"``: the cluster did not answer within the timeout;
    * ``"missing"``: the topic does not exist on that cluster (wrong cluster,
      wrong source alias, or checkpoints never emitted);
    * ``"incomplete"``: reading started but did not reach the end in time; a
      partial read could return stale offsets, so nothing is returned;
    * ``"error"``: the broker refused the read (e.g. authorization).
    """


class OffsetHistoryUnavailableError(TopicUnreadableError):
    """The offset history the checkpoint job publishes on the target could not be
    read (``reason`` as for :class:`CheckpointsUnavailableError`; ``"missing"`` also
    when the topic holds no history yet)."""
