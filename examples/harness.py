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

JOIN_TIMEOUT = 90.0  # seconds a consumer may take to get its partitions
# kafka-python 3.0.12 can leave a subscribed consumer without its partitions for good
# when a poll's timeout ends while its group join is in flight (seen on a loaded
# machine): until it has partitions, it waits in long polls, not many short ones
JOIN_POLL_MS = 30_000
POLL_MS = 200


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
        self.started = self.last_record = time.monotonic()

    def idle(self, assigned: bool) -> bool:
        """No record for ``--idle`` seconds since the consumer had partitions (joining
        its group, which takes seconds on a busy broker, is not idleness)."""
        now = time.monotonic()
        if not assigned:
            if now - self.started > JOIN_TIMEOUT:
                raise SystemExit(f"no partitions assigned within {JOIN_TIMEOUT:g}s")
            self.last_record = now
            return False
        return now - self.last_record >= self.args.idle

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
    while not progress.idle(assigned := bool(consumer.assignment())):
        for tp, records in consumer.poll(timeout_ms=POLL_MS if assigned else JOIN_POLL_MS).items():
            for record in records:
                process(record.topic, record.partition, record.offset, record.value)
                done[tp] = record.offset + 1
                if progress.record_done():
                    consumer.commit({t: OffsetAndMetadata(o, "", -1) for t, o in done.items()})
    if done:
        consumer.commit({t: OffsetAndMetadata(o, "", -1) for t, o in done.items()})
    consumer.close(autocommit=False)
    return 0
