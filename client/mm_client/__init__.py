"""Lightweight failover client for the mm toolkit (no Spark, no `mm` import).

Holds MirrorMaker 2's wire formats (offset syncs, checkpoints, heartbeats), the
replication policies that name remote topics, and the offset-translation API
consumer applications use when they fail over from one cluster to another.
"""

__version__ = "0.1.0"
