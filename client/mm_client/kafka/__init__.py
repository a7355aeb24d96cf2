"""The toolkit's Kafka layer: building clients, error unwrapping, producing, admin
helpers, a client pool.

Small on purpose: each helper replaces code the jobs had repeated. Clients are
constructed only by :mod:`mm_client.kafka.clients` (``new_consumer``,
``new_producer``, ``new_admin``), which also defines the one assign-only reader
configuration (``reader_conf``); the other helpers take the clients (or, the
pool, the factories) their callers own.
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
from mm_client.kafka.clients import (
    closing_consumer,
    latest_wins_producer_conf,
    new_admin,
    new_consumer,
    new_producer,
    reader_conf,
    throwaway_group,
)
from mm_client.kafka.errors import (
    REFUSAL_CODES,
    cause_code,
    describe_exception,
    error_code,
    is_refusal,
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
    "REFUSAL_CODES",
    "AcknowledgedProducer",
    "Acknowledgements",
    "ClientPool",
    "DeliveryFailure",
    "GroupState",
    "Lease",
    "cause_code",
    "closing_consumer",
    "describe_exception",
    "describe_groups",
    "ensure_topic",
    "error_code",
    "group_offsets",
    "group_offsets_or_errors",
    "is_refusal",
    "kafka_cause",
    "kafka_error",
    "latest_wins_producer_conf",
    "new_admin",
    "new_consumer",
    "new_producer",
    "produce_retrying",
    "reader_conf",
    "throwaway_group",
    "topic_created",
    "wrap",
    "wrap_error",
]
