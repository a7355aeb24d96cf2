"""Lightweight failover client for the mm toolkit (no Spark, no `mm` import).

Holds MirrorMaker 2's wire formats (offset syncs, checkpoints, heartbeats), the
replication policies that name remote topics, and the offset-translation API
consumer applications use when they fail over from one cluster to another.
"""

__version__ = "0.1.0"

from mm_client.errors import KafkaOperationError, MirrorError, RecordDecodeError
from mm_client.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    policy_from_class_name,
    would_cycle,
)
from mm_client.records import Checkpoint, Heartbeat, OffsetSync

__all__ = [
    "Checkpoint",
    "DefaultReplicationPolicy",
    "Heartbeat",
    "IdentityReplicationPolicy",
    "KafkaOperationError",
    "MirrorError",
    "OffsetSync",
    "RecordDecodeError",
    "ReplicationPolicy",
    "__version__",
    "policy_from_class_name",
    "would_cycle",
]
