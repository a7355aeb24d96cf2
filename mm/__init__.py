"""mm: Kafka disaster-recovery mirroring on Apache Spark (MirrorMaker 2 compatible)."""

__version__ = "0.1.0"
