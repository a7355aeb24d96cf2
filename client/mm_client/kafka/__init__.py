"""The toolkit's Kafka layer: error unwrapping, producing, admin helpers.

Small on purpose: each helper replaces code the jobs had repeated. Nothing here
builds clients from configuration; callers pass the clients they own.
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
from mm_client.kafka.errors import describe_exception, error_code, kafka_error, wrap, wrap_error
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
    "DeliveryFailure",
    "GroupState",
    "describe_exception",
    "describe_groups",
    "ensure_topic",
    "error_code",
    "group_offsets",
    "group_offsets_or_errors",
    "kafka_error",
    "produce_retrying",
    "topic_created",
    "wrap",
    "wrap_error",
]
