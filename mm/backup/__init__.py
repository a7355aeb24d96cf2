"""`mm backup`: Kafka topics to Parquet segments with a per-partition catalog.

The storage side (``layout``, ``segment``, ``catalog``, ``catalog_store``,
``rebuild``, ``groups``, ``ranges``) is pure of Kafka and Spark: it takes
records and a ``pyarrow.fs`` filesystem (local or S3); the format is described
in docs/backup-format.md. The backup pass (``settings``, ``plan`` and
``segmenter``, pure; ``task`` and ``job``, the Kafka, Spark and storage I/O) and
`mm backup compact` (``compaction_plan``, pure; ``compaction`` and
``compact_job``, the Spark and storage I/O) are described in docs/backup.md.
"""
