"""What failed a transactional producer's open transaction (the mirror's and the
restore's: both write in transactions)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException
from mm_client.kafka import kafka_error


def transaction_error(producer: Any) -> KafkaError | None:
    """The error that failed the open transaction, if one did.

    librdkafka purges a failed transaction's records, so their delivery reports
    say only _PURGE_QUEUE; the cause (a topic the principal may not write, say) is
    kept in the producer's transaction state, which any transactional call outside
    its allowed states reports. Beginning a transaction inside one changes nothing.
    """
    try:
        producer.begin_transaction()
    except KafkaException as exc:
        err = kafka_error(exc)
        if err is not None and err.code() != KafkaError._STATE:
            return err
    return None
