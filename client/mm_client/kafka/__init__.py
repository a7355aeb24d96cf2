"""The toolkit's Kafka layer: error unwrapping, producing, admin helpers, a client pool.

Small on purpose: each helper replaces code the jobs had repeated. Nothing here
builds clients from configuration; callers pass the clients (or, to the pool,
the factories) they own.
"""

from mm_client.kafka.admin import (
    COMPACTED,
    GroupState,
    describe_groups,
    ensure_topic,
    group_offsets,
    group_offsets_or_errors,
    topic_created,
)
from mm_client.kafka.errors import (
    cause_code,
    describe_exception,
    error_code,
    kafka_cause,
    kafka_error,
    wrap,
    wrap_error,
)
from mm_client.kafka.pool import ClientPool, Lease
from mm_client.kafka.produce import (
    AcknowledgedProducer,
    Acknowledgements,
    DeliveryFailure,
    produce_retrying,
)

__all__ = [
    "COMPACTED",
    "AcknowledgedProducer",
    "Acknowledgements",
    "ClientPool",
    "DeliveryFailure",
    "GroupState",
    "Lease",
    "cause_code",
    "describe_exception",
    "describe_groups",
    "ensure_topic",
    "error_code",
    "group_offsets",
    "group_offsets_or_errors",
    "kafka_cause",
    "kafka_error",
    "produce_retrying",
    "topic_created",
    "wrap",
    "wrap_error",
]
