"""Lightweight failover client for the mm toolkit (no Spark, no `mm` import).

Holds MirrorMaker 2's wire formats (offset syncs, checkpoints, heartbeats), the
replication policies that name remote topics, and the offset-translation API
consumer applications use when they fail over from one cluster to another.
"""

__version__ = "0.1.0"

from mm_client.checkpoints_reader import CheckpointSnapshot, read_checkpoints
from mm_client.cluster_errors import (
    CheckpointsUnavailableError,
    ClusterUnavailableError,
    OffsetHistoryUnavailableError,
)
from mm_client.consumers import (
    Applied,
    assign_translated,
    commit_group_offsets,
    commit_translated,
    seek_to_translated,
)
from mm_client.errors import (
    FailoverRefusedError,
    KafkaOperationError,
    MirrorError,
    NoCheckpointsError,
    RecordDecodeError,
    RewindRefusedError,
    TopicNotOnTargetError,
)
from mm_client.failover import FailoverPlan, plan_failover, translate_all, translate_offsets
from mm_client.fallback import ApproximateOffset, TimestampTranslation, translate_by_timestamp
from mm_client.offset_history import OffsetHistory, read_offset_history, translate_source_offsets
from mm_client.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    policy_from_class_name,
    would_cycle,
)
from mm_client.records import Checkpoint, Heartbeat, OffsetSync
from mm_client.remote import (
    checkpoint_topics,
    heartbeat_topics,
    remote_topics,
    replication_hops,
    target_topics,
    upstream_clusters,
)
from mm_client.source_offsets import SourceOffsetTranslation
from mm_client.topic_partition import TopicPartition
from mm_client.translated import TranslatedOffsets

__all__ = [
    "Applied",
    "ApproximateOffset",
    "Checkpoint",
    "CheckpointSnapshot",
    "CheckpointsUnavailableError",
    "ClusterUnavailableError",
    "DefaultReplicationPolicy",
    "FailoverPlan",
    "FailoverRefusedError",
    "Heartbeat",
    "IdentityReplicationPolicy",
    "KafkaOperationError",
    "MirrorError",
    "NoCheckpointsError",
    "OffsetHistory",
    "OffsetHistoryUnavailableError",
    "OffsetSync",
    "RecordDecodeError",
    "ReplicationPolicy",
    "RewindRefusedError",
    "SourceOffsetTranslation",
    "TimestampTranslation",
    "TopicNotOnTargetError",
    "TopicPartition",
    "TranslatedOffsets",
    "__version__",
    "assign_translated",
    "checkpoint_topics",
    "commit_group_offsets",
    "commit_translated",
    "heartbeat_topics",
    "plan_failover",
    "policy_from_class_name",
    "read_checkpoints",
    "read_offset_history",
    "remote_topics",
    "replication_hops",
    "seek_to_translated",
    "target_topics",
    "translate_all",
    "translate_by_timestamp",
    "translate_offsets",
    "translate_source_offsets",
    "upstream_clusters",
    "would_cycle",
]
