"""What the driver hands to each Spark task: the flow's runtime settings and one range.

Both are plain dataclasses that pickle small and carry no client objects; tasks
build their Kafka clients from them inside the Python worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import InputPartition

from mm.kafka.profile import KAFKA, BrokerProfile

#: the mirror's transactional producers' ``transaction.timeout.ms`` unless the target
#: producer's settings say otherwise (librdkafka's own default is 60 s)
DEFAULT_TXN_TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class FlowRuntime:
    """Everything a mirror task needs to know about its flow (source -> target)."""

    source: str
    target: str
    source_consumer: dict[str, Any]
    source_producer: dict[str, Any]
    target_producer: dict[str, Any]
    target_consumer: dict[str, Any]
    offset_syncs_topic: str
    offset_syncs_on_target: bool
    # consumer group on the target whose committed offsets record, per target
    # partition, the next source offset to mirror (committed in the same
    # transaction as the records: the exactly-once state)
    state_group: str
    transactional_id_prefix: str
    max_records_per_txn: int = 200_000
    # a transaction also closes after this many offset-sync points, so the
    # batch's syncs always fit in the committed offset's metadata
    max_sync_points_per_txn: int = 96
    # ... after this many record bytes (what its commit may still have to deliver),
    # and this long after it began (records trickling in from a slow source must not
    # keep it open until the coordinator aborts it at transaction.timeout.ms)
    max_bytes_per_txn: int = 64 << 20
    max_seconds_per_txn: float = 10.0
    errors_tolerance: str = "none"
    dead_letter_topic: str | None = None
    fetch_timeout_s: float = 60.0
    # clients a Python worker keeps between tasks (mm_client.kafka.pool): a
    # transactional producer and a consumer per shard it mirrors, and a few more; a
    # process holds at most ~1,000 librdkafka clients, and every idle client keeps
    # its threads, so the bound stays well below that. 0 = no pooling
    pool_max_clients: int = 300
    # one run of the mirror job (every flow of one `mm mirror`, or one start of the job
    # under `mm run`): a Python worker's kept state (pooled clients, committed floors,
    # syncs written) belongs to the run that built it (mm.source.task.enter_run)
    run_id: str = ""
    # a continuous mirror's task keeps mirroring new records until this long after
    # it started (mm.source.sweep); 0 = it stops at its planned ends (--once)
    task_continue_seconds: float = 0.0
    # the source's admin settings (the continuation sweeps list end offsets)
    source_admin: dict[str, Any] = field(default_factory=dict)
    # what the source's broker does where brokers differ (how its ends are read)
    source_profile: BrokerProfile = KAFKA
    target_profile: BrokerProfile = KAFKA


@dataclass(frozen=True)
class RangeSpec(InputPartition):
    """Mirror source ``topic[partition]`` offsets ``[start, end)`` to ``target_topic``."""

    topic: str
    partition: int
    target_topic: str
    start: int
    end: int
    # largest record (key + value + headers) the target topic accepts; 0 = unknown
    max_record_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # InputPartition keeps a `value`; ours is the spec itself
        object.__setattr__(self, "value", None)


MIRROR_RESULT_SCHEMA = (
    "topic string, partition int, target_topic string, planned_start long, planned_end long, "
    "resumed_from long, position long, records long, bytes long, transactions int, "
    "syncs int, lost long, lost_from long, lost_to long, dead_lettered long, error string, "
    "refused boolean"
)
