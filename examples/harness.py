"""What the example services share and is not part of any recipe: their command line,
"processing" a record (printing it as one JSON line), kafka-python's consume loop
with explicit commits, and a crash on demand (``--stop-after``) for the tests.

A real service would process instead of printing; the failover recipes are in the
services' ``main()``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any


def arguments(doc: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--failover-from", metavar="ALIAS", help="fail over from this cluster")
    parser.add_argument("--commit-every", type=int, default=100, help="records per commit")
    parser.add_argument("--stop-after", type=int, default=0, help="crash after N records")
    parser.add_argument("--idle", type=float, default=5.0, help="end after N s without records")
    return parser.parse_args()


def process(topic: str, partition: int, offset: int, value: bytes | None) -> None:
    row = {"topic": topic, "partition": partition, "offset": offset}
    print(json.dumps({**row, "value": (value or b"").decode()}), flush=True)


class Progress:
    """Counts records; says when to commit and crashes when told to."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.processed = 0
        self.last_record = time.monotonic()

    def idle(self) -> bool:
        return time.monotonic() - self.last_record >= self.args.idle

    def record_done(self) -> bool:
        """True when a commit is due."""
        self.processed += 1
        self.last_record = time.monotonic()
        if self.processed == self.args.stop_after:
            os._exit(0)  # a crash: records since the last commit stay uncommitted
        return self.processed % self.args.commit_every == 0


def consume_kafka_python(consumer: Any, args: argparse.Namespace) -> int:
    """Poll, process, commit each partition's next offset every ``--commit-every``."""
    from kafka.structs import OffsetAndMetadata

    progress, done = Progress(args), {}
    while not progress.idle():
        for tp, records in consumer.poll(timeout_ms=200).items():
            for record in records:
                process(record.topic, record.partition, record.offset, record.value)
                done[tp] = record.offset + 1
                if progress.record_done():
                    consumer.commit({t: OffsetAndMetadata(o, "", -1) for t, o in done.items()})
    if done:
        consumer.commit({t: OffsetAndMetadata(o, "", -1) for t, o in done.items()})
    consumer.close(autocommit=False)
    return 0
