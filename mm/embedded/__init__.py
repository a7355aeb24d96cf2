"""Embedded Kafka-compatible clusters (Tansu brokers) for `mm embedded`, tests and demos."""

from mm.embedded.tansu import ClusterInfo, EmbeddedCluster, EmbeddedClusters

__all__ = ["ClusterInfo", "EmbeddedCluster", "EmbeddedClusters"]
