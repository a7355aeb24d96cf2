"""A kafka-python service that assigns its partitions, and its failover from A to B.

Run it on A as usual; during an outage, start it once against B with
``--failover-from A``: it assigns the mirrored topic's partitions (``A.orders``)
at the group's translated offsets, then consumes and commits as before. Records
it processed on A after its last commit are processed again; none are skipped.

    python kafka_python_assign_service.py --bootstrap b:9092 --topic orders \\
        --group orders-service --failover-from A

``--stop-after`` ends the process abruptly after that many records (a crash),
``--idle`` ends it after that many seconds without a record.
"""

from __future__ import annotations

import sys

import mm_client
from harness import arguments, consume_kafka_python
from kafka import KafkaConsumer, TopicPartition


def main() -> int:
    args = arguments(__doc__)
    settings = {"bootstrap_servers": args.bootstrap}  # plus security_protocol, ssl_cafile...
    consumer = KafkaConsumer(
        **settings,
        group_id=args.group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        allow_auto_create_topics=False,
    )
    if args.failover_from:
        offsets = mm_client.translate_offsets(settings, args.failover_from, args.group)
        (topic,) = mm_client.target_topics(settings, args.failover_from, [args.topic])
        partitions = [(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        # every partition of A.orders: those with a checkpoint at their translated
        # offset, any other one at its committed offset or reset policy (named in a warning)
        mm_client.assign_translated(consumer, offsets, partitions)
    else:
        partitions = sorted(consumer.partitions_for_topic(args.topic) or ())
        consumer.assign([TopicPartition(args.topic, p) for p in partitions])
    return consume_kafka_python(consumer, args)


if __name__ == "__main__":
    sys.exit(main())
