"""`mm backup`'s storage side: segment files, their layout, the catalog, restore maps.

Pure of Kafka and Spark: the backup and restore jobs call these modules with
records they read and a ``pyarrow.fs`` filesystem (local or S3). The format is
described in docs/backup-format.md.
"""
