"""A kafka-python service that subscribes, and its failover from cluster A to B.

Run it on A as usual; during an outage, start it once against B with
``--failover-from A``: before joining its group on B it commits the group's
translated offsets there (the group must have no member on B yet), then
subscribes to the mirrored topic (``A.orders``) and carries on. Records it
processed on A after its last commit are processed again; none are skipped.

    python kafka_python_subscribe_service.py --bootstrap a:9092 --topic orders \\
        --group orders-service
    python kafka_python_subscribe_service.py --bootstrap b:9092 --topic orders \\
        --group orders-service --failover-from A

Processing here prints one JSON line per record; ``--stop-after`` ends the
process abruptly after that many records (a crash), ``--idle`` ends it after that
many seconds without a record.
"""

from __future__ import annotations

import sys

import mm_client
from harness import arguments, consume_kafka_python
from kafka import KafkaConsumer


def main() -> int:
    args = arguments(__doc__)
    settings = {"bootstrap_servers": args.bootstrap}  # plus security_protocol, ssl_cafile...
    topics = [args.topic]
    consumer = KafkaConsumer(
        **settings,
        group_id=args.group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        # never create an empty topic under the source's name on B
        allow_auto_create_topics=False,
    )
    if args.failover_from:
        # the mirrored copies on B ("orders" -> "A.orders"); refuses a name that is not there
        topics = mm_client.target_topics(settings, args.failover_from, topics)
        offsets = mm_client.translate_offsets(settings, args.failover_from, args.group)
        # refuses an unknown group, a topic not on B, and moving the group backwards
        mm_client.commit_translated(consumer, offsets)
    consumer.subscribe(topics)
    return consume_kafka_python(consumer, args)


if __name__ == "__main__":
    sys.exit(main())
