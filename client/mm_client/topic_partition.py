"""The (topic, partition) pair the failover API keys its results by.

A plain NamedTuple, so ``TopicPartition("A.orders", 0) == ("A.orders", 0)`` and a
result can be indexed with an ordinary tuple. It is deliberately not
confluent-kafka's ``TopicPartition`` (mutable, carries an offset) nor
kafka-python's: results are plain data and work with either client.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """One partition of one topic (no offset: offsets are the mapping's values)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"
