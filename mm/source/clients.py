"""The Kafka clients a mirror task builds, behind one seam.

:class:`mm.source.shard_run.ShardRun` asks a :class:`MirrorClients` for every
client it uses, so tests can hand it fakes that model Apache Kafka paths the
embedded test broker never takes (commit metadata, compaction holes, aborted
batches) and drive the copy loop through generated logs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mm_client.kafka.clients import new_consumer, new_producer


@dataclass(frozen=True)
class MirrorClients:
    """Factories from a librdkafka configuration dict to a client."""

    producer: Callable[[dict[str, Any]], Any] = new_producer
    consumer: Callable[[dict[str, Any]], Any] = new_consumer
    # the producer of offset syncs on the source cluster: None = the worker's
    # cached one (see mm.source.task._sync_producer)
    sync_producer: Callable[[dict[str, Any]], Any] | None = None


DEFAULT_CLIENTS = MirrorClients()
