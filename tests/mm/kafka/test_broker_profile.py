"""The broker profile: one seam for where Kafka-protocol brokers differ.

A cluster is Apache Kafka unless its file says otherwise (``<alias>.mm.broker.profile``,
or ``mm.broker.profile`` for every cluster); the key never reaches a client. On
Apache Kafka the ends every job reads come from ListOffsets alone, read_committed:
a transaction still open on a partition is not in its end, on either path
(batched through an AdminClient, or one partition at a time through a consumer).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support.apache_kafka import KRaftBroker
from support.props import TWO_CLUSTERS

from mm.config import build_config
from mm.errors import ConfigError
from mm.kafka.profile import EMBEDDED, KAFKA, broker_profile
from mm.kafka.watermarks import watermarks


@pytest.mark.unit
def test_a_cluster_is_apache_kafka_unless_its_file_says_otherwise() -> None:
    cfg = build_config(TWO_CLUSTERS)
    assert cfg.cluster("A").profile == KAFKA and cfg.cluster("B").profile == KAFKA
    cfg = build_config({**TWO_CLUSTERS, "B.mm.broker.profile": "Embedded"})
    assert (cfg.cluster("A").profile, cfg.cluster("B").profile) == (KAFKA, EMBEDDED)
    # every cluster, one of them back to Apache Kafka
    cfg = build_config(
        {**TWO_CLUSTERS, "mm.broker.profile": "embedded", "A.mm.broker.profile": "kafka"}
    )
    assert (cfg.cluster("A").profile, cfg.cluster("B").profile) == (KAFKA, EMBEDDED)
    # a setting of mm's, not a client property
    for role in ("consumer", "producer", "admin"):
        assert not any("profile" in k for k in cfg.cluster("B").librdkafka(role))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("key", "expected"),
    [("A.mm.broker.profile", "one of kafka, embedded"), ("mm.broker.profile", "kafka or embedded")],
)
def test_an_unknown_profile_names_the_key_and_the_choices(key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config({**TWO_CLUSTERS, key: "tansu"})
    assert key in str(err.value) and "'tansu'" in str(err.value), err.value
    assert expected in str(err.value), err.value
    with pytest.raises(ValueError, match="kafka, embedded"):
        broker_profile("msk")


@pytest.mark.unit
def test_config_check_shows_each_clusters_profile(tmp_path: Path) -> None:
    path = tmp_path / "mm.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\nB.mm.broker.profile = embedded\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MM_")}
    out = subprocess.run(
        [sys.executable, "-m", "mm", "config", "check", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    clusters = out.stdout.split("\nclusters\n", 1)[1].split("\nflows\n", 1)[0]
    assert "  A\n" in clusters and "  B\n" in clusters, out.stdout
    a, b = clusters.split("  B\n")
    assert "mm.broker.profile  kafka" in a and "mm.broker.profile  embedded" in b, out.stdout
    assert "unknown" not in out.stderr and "ignored" not in out.stderr, out.stderr


def test_apache_kafka_ends_leave_out_an_open_transaction(
    own_kafka: Callable[..., KRaftBroker],
) -> None:
    """On Apache Kafka the profile's ListOffsets-only ends are the last stable offset:
    10 committed records and an open transaction of 5 read as 10 (and 0 on the
    partition with only open records), through an AdminClient or a consumer; once
    the transaction commits, 16 and 4 (its records and a marker each), as the
    fetch-checked read (the embedded profile's) then says too."""
    broker = own_kafka()
    conf = {"bootstrap.servers": broker.bootstrap}
    topic = f"ends-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    plain = Producer(conf)
    for i in range(10):
        plain.produce(topic, f"plain-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    txn = Producer({**conf, "transactional.id": f"ends-{uuid.uuid4().hex[:8]}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(topic, f"open-{i}".encode(), partition=0)
    for i in range(3):
        txn.produce(topic, f"open-{i}".encode(), partition=1)
    assert txn.flush(30) == 0
    keys = [(topic, 0), (topic, 1)]

    def ends(**kw: Any) -> dict[int, int]:
        return {p: hi for (_t, p), (_lo, hi) in watermarks(conf, keys, **kw).items()}

    expected = {0: 10, 1: 0}
    assert ends(profile=KAFKA, admin=admin) == expected
    assert ends(profile=KAFKA) == expected
    # the fetch-checked read gives the high watermark instead: past the open
    # transaction, where no read_committed reader can go until it ends
    assert ends(profile=EMBEDDED, admin=admin)[0] == 15
    txn.commit_transaction(30)
    # Kafka writes the markers after the commit returns
    deadline = time.monotonic() + 30
    expected = {0: 16, 1: 4}
    while ends(profile=EMBEDDED) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ends(profile=EMBEDDED) == expected
    assert ends(profile=KAFKA, admin=admin) == expected
    assert ends(profile=KAFKA) == expected
