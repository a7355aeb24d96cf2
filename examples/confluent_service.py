"""A confluent-kafka service that subscribes, and its failover from cluster A to B.

Run it on A as usual; during an outage, start it once against B with
``--failover-from A``: before subscribing it commits the group's translated
offsets on B (the group must have no member there yet), then subscribes to the
mirrored topic (``A.orders``). Records it processed on A after its last commit
are processed again; none are skipped.

    python confluent_service.py --bootstrap b:9092 --topic orders \\
        --group orders-service --failover-from A

``--stop-after`` ends the process abruptly after that many records (a crash),
``--idle`` ends it after that many seconds without a record.
"""

from __future__ import annotations

import argparse
import sys

import mm_client
from confluent_kafka import Consumer, KafkaException, TopicPartition
from harness import Progress, arguments, process


def main() -> int:
    args = arguments(__doc__)
    settings = {"bootstrap.servers": args.bootstrap}  # plus security.protocol, sasl.*, ssl.*
    topics = [args.topic]
    consumer = Consumer(
        {
            **settings,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    if args.failover_from:
        topics = mm_client.target_topics(settings, args.failover_from, topics)
        offsets = mm_client.translate_offsets(settings, args.failover_from, args.group)
        mm_client.commit_translated(consumer, offsets)
    consumer.subscribe(topics)
    return _consume(consumer, args)


def _consume(consumer: Consumer, args: argparse.Namespace) -> int:
    progress, done = Progress(args), {}
    while not progress.idle(bool(consumer.assignment())):
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            raise KafkaException(message.error())
        process(message.topic(), message.partition(), message.offset(), message.value())
        done[(message.topic(), message.partition())] = message.offset() + 1
        if progress.record_done():
            _commit(consumer, done)
    if done:
        _commit(consumer, done)
    consumer.close()
    return 0


def _commit(consumer: Consumer, done: dict[tuple[str, int], int]) -> None:
    consumer.commit(
        offsets=[TopicPartition(t, p, o) for (t, p), o in done.items()], asynchronous=False
    )


if __name__ == "__main__":
    sys.exit(main())
