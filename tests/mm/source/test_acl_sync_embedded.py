"""Topic ACL sync inside a real mirror run, on the test brokers.

The embedded broker (Tansu 0.6) answers DescribeAcls with an empty list and cannot
create ACLs, so there the sync can only show that it runs its rounds next to the
mirror without disturbing it or raising alarms. Apache Kafka without an authorizer
(the test brokers) answers SECURITY_DISABLED, which librdkafka turns into an empty
list: nothing to copy, no warning either. Apache Kafka's other answers (bindings,
not authorized) are covered with fake admins in test_acl_sync.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from support.clusters import KafkaCluster
from support.mirror import (
    assert_same_records,
    create_topic,
    mirror_properties,
    produce_batch,
    read_topic,
    run_mirror_once,
)

pytestmark = pytest.mark.integration


def test_mirror_runs_with_acl_sync_enabled_and_logs_no_alarm(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = f"macl-{tag}"
    create_topic(a, topic, 2)
    for p in range(2):
        produce_batch(a, topic, p, 50, f"{topic}-{p}")
    props = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        # MM2's default is enabled; a short interval gives the --once run several rounds
        extra={"sync.topic.acls.enabled": "true", "sync.topic.acls.interval.seconds": "1"},
    )
    monkeypatch.setenv("MM_LOG_LEVEL", "DEBUG")  # the rounds are debug events
    run = run_mirror_once(props)
    assert run.returncode == 0, run.describe()
    assert_same_records(read_topic(a, topic, 2), read_topic(b, f"A.{topic}", 2))

    rounds = run.events("topic ACLs checked")
    assert rounds, f"the ACL sync never ran a round\n{run.describe()}"
    print(f"ACL sync rounds during a {run.seconds:.1f}s --once run: {len(rounds)}")
    if cluster_a.kind == "embedded":
        # what the embedded broker answers: nothing to copy, so no CreateAcls sent
        assert all(r["source_acls"] == 0 and r["missing"] == 0 for r in rounds), rounds
    alarms = [
        line
        for line in run.stderr.splitlines()
        if "topic ACL sync" in line and ('"warning"' in line or '"error"' in line)
    ]
    assert len(alarms) <= 1, alarms
    assert not run.events("topic ACLs created on the target")
    if cluster_a.kind == "kafka":
        # Apache Kafka without an authorizer answers DescribeAcls with SECURITY_DISABLED,
        # which librdkafka (2.16) drops: an empty list, no error. Nothing to copy, and
        # no warning: the mirror is neither refused nor warned (the warning that names
        # sync.topic.acls.enabled = false is reached only by CreateAcls' answers)
        assert alarms == [], alarms
        assert all(r["source_acls"] == 0 and r["missing"] == 0 for r in rounds), rounds
