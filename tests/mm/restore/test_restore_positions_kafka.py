"""The restore plan's position read on Apache Kafka 4.3.1, with a killed restore's
transaction still open: it answers the last committed position at once (a stable read
waited for the transaction's timeout, then failed the restore: seen on the kill test)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.apache_kafka import KRaftBroker
from support.mirror import create_topic

from mm.backup.catalog import PartitionCatalog
from mm.restore.job import _positions
from mm.restore.plan import state_group

pytestmark = pytest.mark.integration


def test_positions_are_read_past_an_open_transaction(
    own_kafka: Callable[..., KRaftBroker], unique_topic: Callable[..., str]
) -> None:
    broker = own_kafka()
    conf = {"bootstrap.servers": broker.bootstrap}
    source, target = unique_topic("orders"), unique_topic("r.orders")
    create_topic(broker.bootstrap, target, 1)
    group = state_group("east")
    state = Consumer({**conf, "group.id": group})
    producer = Producer({**conf, "transactional.id": unique_topic("restore-txn")})
    producer.init_transactions(30)
    for position, commit in ((500, True), (900, False)):  # the second: killed before commit
        producer.begin_transaction()
        producer.produce(target, b"v", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(target, 0, position)], state.consumer_group_metadata(), 30
        )
        if commit:
            producer.commit_transaction(30)
    producer.flush(30)
    started = time.monotonic()
    got = _positions(
        conf, "east", {source: target}, {(source, 0): PartitionCatalog("east", source, 0)}, 20.0
    )
    assert got == {(target, 0): 500}
    assert time.monotonic() - started < 10, "the read waited for the open transaction"
    state.close()
