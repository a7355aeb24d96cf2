"""The checkpoint job's translation history: :mod:`mm_client.sync_store`, where it
lives so that the failover client translates from the same code (a list of source
offsets with the source down, :func:`mm_client.translate_source_offsets`)."""

from mm_client.sync_store import (
    OffsetSyncStore,
    PartitionHistory,
    Translation,
    prune_bound,
)

__all__ = ["OffsetSyncStore", "PartitionHistory", "Translation", "prune_bound"]
