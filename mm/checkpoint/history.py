"""Publishing the checkpoint job's translation history on the target (I/O).

After every round the job writes its store, as :mod:`mm_client.offset_history`
encodes it, to ``mm-offset-history.<source>.internal`` on the target, when it
changed since the last publication. That is what `mm translate --offsets` and
``mm_client.translate_source_offsets`` read when the source (which holds the
offset syncs by default) is down. A failed publication is logged and retried at
the next round; the history then read is older, so its answers are behind the
exact ones (its mirror positions are older), never ahead.
"""

from __future__ import annotations

import time
from typing import Any

from mm_client.kafka import AcknowledgedProducer, ensure_topic
from mm_client.offset_history import MAX_BYTES, TOPIC_CONFIG, encode_history, offset_history_topic
from mm_client.sync_store import OffsetSyncStore

#: producer request size that carries the largest history (plus the request's own bytes)
PRODUCER_MAX_BYTES = MAX_BYTES + 1024 * 1024
REQUEST_TIMEOUT = 30.0


class HistoryPublisher:
    """One flow's publications: the topic, and the last value acknowledged."""

    def __init__(self, flow: str, source: str, log: Any) -> None:
        self.flow, self.topic, self.log = flow, offset_history_topic(source), log
        self._last: list[dict[str, Any]] | None = None
        self._too_large_warned = 0
        self.published = 0

    def ensure_topic(self, admin: Any, where: str, replication_factor: int) -> None:
        ensure_topic(admin, self.topic, where, replication_factor, config=TOPIC_CONFIG)

    def publish(self, producer: Any, store: OffsetSyncStore) -> bool:
        """Write ``store`` unless it is what was last published; True when written.
        Raises KafkaOperationError when the target did not acknowledge it."""
        data = store.to_json(pending=True)
        if data == self._last:
            return False
        key, value = encode_history(self.flow, time.time_ns() // 1_000_000, store, data=data)
        if len(value) > MAX_BYTES - 4096:
            if len(value) > self._too_large_warned:
                self._too_large_warned = len(value) * 2  # again only when it doubles
                self.log.warning(
                    "offset history not published: larger than the topic allows; "
                    "`mm translate --offsets` answers from the last one published",
                    topic=self.topic,
                    bytes=len(value),
                    limit=MAX_BYTES,
                    syncs=store.size(),
                )
            return False
        acked = AcknowledgedProducer(producer)
        acked.produce(self.topic, value, key, partition=0)
        acked.flush(REQUEST_TIMEOUT, f"publishing the offset history to {self.topic} failed")
        self._last = data
        self.published += 1
        return True
