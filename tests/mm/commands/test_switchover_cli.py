"""`mm switchover`: a planned move of consumer groups A -> B, proven exact.

The module fixture mirrors a 3-partition topic with transactional gaps once and
runs the checkpoint job once (Spark), with groups on A at the start, inside a gap,
mid-partition and at the end. The switchover is then run as a user would; a
consumer of each group on B, started from the committed offsets the switchover
left, must read exactly what the group had not read on A. Stopping cases use
topics the mirror never ran on (no Spark): they must stop before committing.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from support.clusters import KafkaCluster
from support.groups import (
    KV,
    commit_admin,
    group_offsets,
    read_group,
    run_mm,
    topic_for_groups,
    unread,
)
from support.mirror import (
    Rec,
    assert_same_records,
    create_topic,
    mirror_properties,
    read_topic,
    read_topic_committed,
    run_mirror_once,
)

from mm.dr.switchover import (
    GroupPartition,
    GroupRow,
    PartitionRow,
    Stillness,
    SwitchoverReport,
    grown,
    translation_verdict,
    uncovered,
    unmirrored,
)
from mm.kafka.rawlog import LogRecord

PARTITIONS = 3


# --- pure decisions ---------------------------------------------------------------------------


def rec(offset: int, value: bytes, ts: int = 1) -> LogRecord:
    return LogRecord(offset, b"k", value, (("h", b"1"),), ts)


@pytest.mark.unit
def test_grown_and_unmirrored() -> None:
    assert grown({("t", 0): 5, ("t", 1): 7}, {("t", 0): 5, ("t", 1): 9}) == {("t", 1): (7, 9)}
    assert grown({}, {("t", 0): 3}) == {("t", 0): (0, 3)}
    assert grown({("t", 0): 3}, {("t", 0): 3}) == {}
    # a position equal to the end is complete (markers included); no position counts from 0
    ends = {("t", 0): 10, ("t", 1): 4, ("t", 2): 6}
    assert unmirrored(ends, {("t", 0): 10, ("t", 1): 1}) == {("t", 1): 3, ("t", 2): 6}


@pytest.mark.unit
def test_stillness_counts_from_the_last_change() -> None:
    still = Stillness(100.0)
    assert still.still_for(101.0, ({"p": 1}, {"e": 5})) == 0.0  # first sight
    assert still.still_for(110.0, ({"p": 1}, {"e": 5})) == 9.0
    assert still.still_for(111.0, ({"p": 1}, {"e": 6})) == 0.0  # the copies moved
    assert still.still_for(130.0, ({"p": 1}, {"e": 6})) == 19.0
    assert still.still_for(131.0, ({"p": 2}, {"e": 6})) == 0.0  # the position moved


@pytest.mark.unit
def test_uncovered_needs_a_checkpoint_for_the_current_offset() -> None:
    rows = [
        GroupPartition("g", "t", 0, 5, 5, 17),
        GroupPartition("g", "t", 1, 5, 4, 16),  # checkpoint of an older offset
        GroupPartition("g", "t", 2, 5),  # none
    ]
    assert [r.partition for r in uncovered(rows)] == [1, 2]


@pytest.mark.unit
def test_translation_verdicts() -> None:
    same, other = rec(7, b"v7"), rec(21, b"v7")
    assert translation_verdict(21, 30, same, other) is None
    # the target's next record is not the copy: inexact
    why = translation_verdict(20, 30, same, rec(20, b"v6"))
    assert why is not None and "not its copy" in why
    # headers and timestamps are part of a copy
    assert translation_verdict(21, 30, same, rec(21, b"v7", ts=2)) is not None
    assert translation_verdict(21, 30, same, LogRecord(21, b"k", b"v7", (), 1)) is not None
    # the group read everything: the target must have nothing after the translation
    assert translation_verdict(30, 30, None, None) is None
    why = translation_verdict(29, 30, None, rec(29, b"x"))
    assert why is not None and "read again" in why
    why = translation_verdict(31, 30, None, None)
    assert why is not None and "past the target's end" in why
    # a record left on the source with nothing after the translation: skipped
    why = translation_verdict(30, 30, same, None)
    assert why is not None and "skipped" in why


@pytest.mark.unit
def test_report_ok_only_with_the_whole_proof() -> None:
    def report(**kw: object) -> SwitchoverReport:
        r = SwitchoverReport("A->B", "A", "B", False, False, 5.0)
        r.partitions = [PartitionRow("t", 0, "A.t", 10, 10)]
        r.groups = [GroupRow("g", "A.t", 0, 4, None, 14, True)]
        r.group_status = {"g": "moved"}
        for k, v in kw.items():
            setattr(r, k, v)
        return r

    assert report().ok
    assert report().to_json()["proof"] == {
        "records_unmirrored": 0,
        "translations_exact": 1,
        "translations_inexact": 0,
        "translations_unchecked": 0,
    }
    assert not report(partitions=[PartitionRow("t", 0, "A.t", 10, 9)]).ok
    assert not report(groups=[GroupRow("g", "A.t", 0, 4, None, 14, False, "x")]).ok
    assert not report(groups=[GroupRow("g", "A.t", 0, 4, None, None, None)]).ok
    assert not report(group_status={"g": "refused"}).ok
    assert not report(stopped_at="producers").ok
    assert report(group_status={"g": "dry-run"}).ok


# --- end to end --------------------------------------------------------------------------------


@dataclass
class Setup:
    a: str
    b: str
    tag: str
    topic: str
    props: Path
    committed: dict[str, dict[int, int]]  # group -> source partition -> offset on A
    source: dict[int, list[Rec]]

    def expected(self, group: str) -> dict[int, list[KV]]:
        return unread(self.source, self.committed[group])


@pytest.fixture(scope="module")
def setup(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Setup:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    tmp = tmp_path_factory.mktemp("switchover")
    tag = uuid.uuid4().hex[:8]
    topic = f"swt-{tag}"
    made = topic_for_groups(a, b, tmp, topic, f"swg-{tag}-.*", PARTITIONS, tag)
    props, source, end, gap = made.props, made.source, made.end, made.gap
    committed = {
        f"swg-{tag}-ok-1": {0: 0, 1: gap[1], 2: source[2][len(source[2]) // 2].offset},
        f"swg-{tag}-ok-2": {0: gap[0], 1: end[1], 2: end[2]},
    }
    for g, offsets in committed.items():
        commit_admin(a, g, topic, offsets)
    mirror = run_mirror_once(props)
    assert mirror.returncode == 0, mirror.describe()
    checkpoint = run_mm(props, "checkpoint", "--once")
    assert checkpoint.returncode == 0, checkpoint.describe()
    return Setup(a, b, tag, topic, props, committed, source)


@pytest.mark.integration
def test_switchover_proves_and_moves_every_group(setup: Setup) -> None:
    ok = f"swg-{setup.tag}-ok-.*"
    dry = run_mm(setup.props, "switchover", "--groups", ok, "--settle", "1", "--dry-run", "--json")
    assert dry.returncode == 0, dry.describe()
    report = json.loads(dry.stdout)
    assert report["ok"] and report["dry_run"] and report["stopped_at"] is None
    assert report["proof"]["records_unmirrored"] == 0
    assert report["proof"]["translations_inexact"] == 0
    assert report["proof"]["translations_exact"] == 2 * PARTITIONS
    assert [p["unmirrored"] for p in report["partitions"]] == [0] * PARTITIONS
    for g in setup.committed:
        assert group_offsets(setup.b, g) == {}, "a dry run committed"

    report_path = setup.props.parent / "switchover-report.json"
    args = ("--groups", ok, "--settle", "1", "--report", str(report_path))
    real = run_mm(setup.props, "switchover", *args)
    assert real.returncode == 0, real.describe()
    assert "proof: 0 records unmirrored, 0 translations inexact, 6 exact" in real.stdout
    assert f"report: {report_path}" in real.stdout
    written = json.loads(report_path.read_text())
    assert written["ok"] and {g["status"] for g in written["groups"]} == {"moved"}
    for g in setup.committed:
        # from what the switchover committed on B, each group reads exactly what it had
        # not read on A: nothing lost, nothing twice
        assert read_group(setup.b, g, f"A.{setup.topic}", PARTITIONS) == setup.expected(g), g

    # a second run: already there, still proven
    again = run_mm(setup.props, "switchover", "--groups", ok, "--settle", "1", "--json")
    assert again.returncode == 0, again.describe()
    assert {g["status"] for g in json.loads(again.stdout)["groups"]} == {"unchanged"}


@pytest.mark.integration
def test_a_group_that_moved_since_its_checkpoint_stops_it(setup: Setup) -> None:
    moved = f"swg-{setup.tag}-late"
    commit_admin(setup.a, moved, setup.topic, {0: 1})  # no checkpoint job runs after this
    args = ("--groups", moved, "--settle", "0", "--timeout", "3", "--json")
    res = run_mm(setup.props, "switchover", *args)
    assert res.returncode == 1, res.describe()
    report = json.loads(res.stdout)
    assert report["stopped_at"] == "checkpoints"
    assert "no checkpoint for the group's current offset" in report["problems"][0]
    assert f"{moved} {setup.topic}[0]@1" in report["problems"][0]
    assert "Is `mm checkpoint` running" in report["problems"][0]
    assert group_offsets(setup.b, moved) == {}
    # the way out, as printed: the checkpoint job runs, then the switchover again
    checkpoint = run_mm(setup.props, "checkpoint", "--once")
    assert checkpoint.returncode == 0, checkpoint.describe()
    again = run_mm(setup.props, "switchover", "--groups", moved, "--settle", "0", "--json")
    assert again.returncode == 0, again.describe()
    report = json.loads(again.stdout)
    assert report["ok"] and [g["status"] for g in report["groups"]] == ["moved"], report
    # on B the group reads exactly what it had not read on A (it committed partition 0)
    assert read_group(setup.b, moved, f"A.{setup.topic}", 1) == unread(setup.source, {0: 1})


def _unmirrored_topic(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp: Path
) -> tuple[str, Path]:
    """A topic with 20 records that no mirror has run on, and a flow config for it."""
    topic = f"swn-{uuid.uuid4().hex[:8]}"
    create_topic(cluster_a.bootstrap_servers, topic, 2)
    p = Producer({"bootstrap.servers": cluster_a.bootstrap_servers})
    for i in range(20):
        p.produce(topic, f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    props = mirror_properties(
        tmp / "mm2.properties",
        cluster_a.bootstrap_servers,
        cluster_b.bootstrap_servers,
        [topic],
        state_dir=tmp / "state",
    )
    return topic, props


@pytest.mark.integration
def test_producers_still_writing_stop_it(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    topic, props = _unmirrored_topic(cluster_a, cluster_b, tmp_path)
    stop = threading.Event()

    def keep_writing() -> None:
        p = Producer({"bootstrap.servers": cluster_a.bootstrap_servers, "linger.ms": 0})
        while not stop.is_set():
            p.produce(topic, b"more", partition=1)
            p.flush(5)
            time.sleep(0.1)

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        res = run_mm(props, "switchover", "--settle", "2", "--json")
    finally:
        stop.set()
        writer.join(10)
    assert res.returncode == 1, res.describe()
    report = json.loads(res.stdout)
    assert report["stopped_at"] == "producers"
    assert [(g["topic"], g["partition"]) for g in report["grown_while_settling"]] == [(topic, 1)]
    assert "have not stopped" in report["problems"][0] and "--force" in report["problems"][0]

    # the way out, as printed: the producers stopped (above). The switchover now passes
    # the settle and waits for the mirror, which is not running: its own way out names it
    res = run_mm(props, "switchover", "--settle", "1", "--timeout", "2", "--json")
    assert res.returncode == 1, res.describe()
    report = json.loads(res.stdout)
    assert report["stopped_at"] == "mirror" and report["grown_while_settling"] == [], report
    assert "offsets unmirrored" in report["problems"][0]
    assert "Is `mm mirror` running for A->B?" in report["problems"][0]
    # the mirror runs (once, as an operator would start it), then the switchover again
    mirror = run_mirror_once(props)
    assert mirror.returncode == 0, mirror.describe()
    done = run_mm(props, "switchover", "--settle", "1", "--json")
    assert done.returncode == 0, done.describe()
    report = json.loads(done.stdout)
    assert report["ok"] and report["stopped_at"] is None, report
    assert report["proof"]["records_unmirrored"] == 0
    # nothing stays on A: B holds exactly what A holds, the late writes included
    source = read_topic(cluster_a.bootstrap_servers, topic, 2)
    assert len(source[1]) > 10, "the writer wrote nothing"
    assert_same_records(source, read_topic_committed(cluster_b.bootstrap_servers, f"A.{topic}", 2))


@pytest.mark.integration
def test_a_mirror_not_running_is_named_within_seconds_not_at_the_timeout(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    """No mirror runs for the flow: the switchover, waiting up to its default 300 s for
    the mirror, says so once nothing has moved for 30 s (before: it waited the 300 s
    out, silent). Its way out, followed: the mirror runs, the switchover passes."""
    topic, props = _unmirrored_topic(cluster_a, cluster_b, tmp_path)
    res = run_mm(props, "switchover", "--settle", "1", "--json", timeout=400)
    assert res.returncode == 1, res.describe()
    report = json.loads(res.stdout)
    assert report["stopped_at"] == "mirror", report
    assert 30 <= report["waited_seconds"] < 90, report
    (problem,) = report["problems"]
    assert problem.startswith("the mirror of A->B is not advancing: neither its positions nor "
                              "B's copies moved for 3"), problem  # fmt: skip
    assert "20 offsets unmirrored on 2 partition(s)" in problem, problem
    assert "Is `mm mirror` (or `mm run`) running for A->B? Start it" in problem, problem
    mirror = run_mirror_once(props)
    assert mirror.returncode == 0, mirror.describe()
    done = run_mm(props, "switchover", "--settle", "1", "--json")
    assert done.returncode == 0, done.describe()
    assert json.loads(done.stdout)["proof"]["records_unmirrored"] == 0
    assert_same_records(
        read_topic(cluster_a.bootstrap_servers, topic, 2),
        read_topic_committed(cluster_b.bootstrap_servers, f"A.{topic}", 2),
    )


@pytest.mark.integration
def test_a_mirror_behind_stops_it_even_when_forced(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    _, props = _unmirrored_topic(cluster_a, cluster_b, tmp_path)
    res = run_mm(props, "switchover", "--force", "--timeout", "2")
    assert res.returncode == 1, res.describe()
    assert "NOT DONE (stopped at: mirror)" in res.stdout
    assert "20 offsets unmirrored on 2 partition(s)" in res.stdout
    assert "proof: 20 records unmirrored" in res.stdout
    reports = list((tmp_path / "state" / "reports").glob("switchover-A-B-*.json"))
    assert len(reports) == 1 and json.loads(reports[0].read_text())["ok"] is False


@pytest.mark.integration
def test_an_open_transaction_on_the_source_stops_it(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    """A producer inside a transaction on A holds the partition's read_committed end
    still: the settle and the mirror's catch-up both pass, and before, the switchover
    moved on while what that transaction commits later existed only on A. Now it stops
    naming the partition; its producer commits (the way out), and the switchover
    passes with B holding every record, the transaction's included."""
    topic, props = _unmirrored_topic(cluster_a, cluster_b, tmp_path)
    a = cluster_a.bootstrap_servers
    tid = f"swtxn-{uuid.uuid4().hex[:8]}"
    # open across two mirror runs and a switchover: the 60 s default timeout let the
    # broker abort it on a loaded machine (CI), before the switchover looked
    txn = Producer({"bootstrap.servers": a, "transactional.id": tid,
                    "transaction.timeout.ms": 600_000})  # fmt: skip
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic, f"t{i}".encode(), partition=0)
    assert txn.flush(30) == 0
    mirror = run_mirror_once(props)  # copies up to the transaction's first offset
    assert mirror.returncode == 0, mirror.describe()

    res = run_mm(props, "switchover", "--settle", "1", "--json")
    assert res.returncode == 1, res.describe()
    report = json.loads(res.stdout)
    assert report["stopped_at"] == "producers" and report["open_transactions_checked"], report
    assert [(x["topic"], x["partition"], x["read_committed_end"], x["log_end"])
            for x in report["open_transactions"]] == [(topic, 0, 10, 13)], report  # fmt: skip
    problem = report["problems"][0]
    assert f"a transaction is open on A in {topic}[0] (read_committed end 10, log end 13)" in (
        problem
    )
    assert f"abort --topic {topic} --partition 0 --start-offset 10" in problem, problem
    assert problem.endswith("or pass --force to switch over anyway"), problem
    # who holds it, and for how long (kafka-python's DescribeProducers/Transactions)
    assert re.search(
        rf"; {re.escape(topic)}\[0\]: producer \d+ \(epoch \d+, transactional\.id "
        rf"'{tid}'\), its transaction open since offset 10 for \d+ s \(kafka-python's "
        r"DescribeProducers and DescribeTransactions\)",
        problem,
    ), problem

    # the way out, as printed: its producer commits; the mirror copies it; again
    txn.commit_transaction(30)
    mirror = run_mirror_once(props)
    assert mirror.returncode == 0, mirror.describe()
    done = run_mm(props, "switchover", "--settle", "1", "--json")
    assert done.returncode == 0, done.describe()
    report = json.loads(done.stdout)
    assert report["ok"] and report["open_transactions"] == [], report
    source = read_topic_committed(a, topic, 2)
    assert [r.value for r in source[0][-3:]] == [b"t0", b"t1", b"t2"]
    assert_same_records(source, read_topic_committed(cluster_b.bootstrap_servers, f"A.{topic}", 2))
