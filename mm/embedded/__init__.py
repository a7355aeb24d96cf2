"""Embedded clusters for `mm embedded`, demos, the drill and tests: Apache Kafka where
its jars are present (mm.embedded.kraft), else the embedded broker (mm.embedded.tansu)."""

from mm.embedded.cluster_info import ClusterInfo
from mm.embedded.clusters import EmbeddedClusters
from mm.embedded.kraft import KRaftCluster
from mm.embedded.tansu import EmbeddedCluster

__all__ = ["ClusterInfo", "EmbeddedCluster", "EmbeddedClusters", "KRaftCluster"]
