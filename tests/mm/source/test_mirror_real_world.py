"""The mirror on logs shaped like users' data, on real brokers with real Spark.

* a source written by an exactly-once application (a commit marker after every
  one or two records), where the mirror once kept 106 of 440 records;
* a backlog far above the per-transaction record limit;
* a source with holes of many widths between runs of every length, as a
  compacted topic has (made here with concurrent transactions, since the test
  broker never compacts);
* lost mirror state (a fresh state directory and a state group without
  offsets): the position is recovered exactly from the offset syncs and the
  target's log, or, when they cannot prove it, the partition is refused and the
  target left untouched, never mirrored twice;
* a source topic deleted and recreated under a running mirror's position;
* idle partitions, whose positions are committed again before the broker
  would expire them.

The first three shapes and the idle one share one mirror run and one `mm verify`
run (Spark start-ups are what these tests cost).

The target is judged as Apache Kafka's read_committed consumers would see it
(raw log and transaction markers, tests/support/eos.py).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.support.eos import committed_view, read_log
from tests.support.mirror import (
    MirrorRun,
    assert_same_records,
    assert_translation_exact,
    create_topic,
    delete_topic,
    mirror_properties,
    read_offset_syncs,
    read_topic,
    run_mirror_once,
)
from tests.support.verify import VerifyRun, run_verify

pytestmark = pytest.mark.integration

STATE_GROUP = "__mm.mirror.A.B"
SYNCS_TOPIC = "mm2-offset-syncs.B.internal"


def produce_exactly_once_app(bootstrap: str, topic: str, partitions: int, txns: int) -> int:
    """What a Kafka Streams / Flink exactly-once app with frequent commits leaves: one
    transaction per one or two records. Returns the number of records."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"eos-app-{uuid.uuid4().hex[:8]}",
            "linger.ms": 0,
        }
    )
    p.init_transactions(30)
    n = 0
    for i in range(txns):
        part = i % partitions
        p.begin_transaction()
        for j in range(2 if i % 10 == 0 else 1):
            p.produce(topic, f"v{i}.{j}".encode(), f"k{i % 7}".encode(), part)
            n += 1
        p.commit_transaction(30)
    return n


def produce_plain(bootstrap: str, topic: str, partitions: int, count: int, tag: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, f"{tag}-{i}".encode() * 3, f"{tag}{i}".encode(), i % partitions)
    assert p.flush(30) == 0


def committed_records(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Any]]:
    """Per partition (key, value) of the committed records, as Apache Kafka serves them."""
    out = {}
    for p in range(partitions):
        view = committed_view(read_log(bootstrap, topic, p))
        out[p] = [(r[1], r[2]) for r in view.records]
    return out


def config(tmp_path: Path, a: Any, b: Any, topic: str, **extra: str) -> Path:
    return mirror_properties(
        tmp_path / "mm.properties",
        a.bootstrap_servers,
        b.bootstrap_servers,
        [topic],
        state_dir=tmp_path / "state",
        extra=extra,
    )


def assert_exact_copy(a: Any, b: Any, topic: str, partitions: int, verify: VerifyRun) -> None:
    """Judged three ways: a consumer on both sides, the raw target log under Kafka's
    read_committed rule, and `mm verify` as a user runs it (its report for ``topic``)."""
    source = read_topic(a.bootstrap_servers, topic, partitions)
    target = read_topic(b.bootstrap_servers, f"A.{topic}", partitions)
    assert_same_records(source, target)
    # the consumer's view and Kafka's read_committed rule agree on the target
    raw = committed_records(b.bootstrap_servers, f"A.{topic}", partitions)
    assert raw == {p: [(r.key, r.value) for r in recs] for p, recs in source.items()}
    syncs = read_offset_syncs(a.bootstrap_servers, SYNCS_TOPIC)
    assert assert_translation_exact(syncs, topic, source, target) > 0
    assert verify.returncode == 0, verify.describe()
    (flow,) = verify.json()["flows"]
    parts = {p["partition"]: p for p in flow["partitions"] if p["topic"] == topic}
    assert sorted(parts) == list(range(partitions))
    for p, rep in parts.items():
        assert rep["ok"] and rep["first_difference"] is None, rep
        assert rep["records_matched"] == rep["source_records"] == len(source[p]), rep
        assert rep["translations"]["wrong"] == 0 and rep["syncs"]["false"] == 0, rep


def verified_copy(cfg: Path, a: Any, b: Any, topic: str, partitions: int) -> None:
    assert_exact_copy(a, b, topic, partitions, run_verify(cfg, "--topics", topic, "--json"))


def produce_with_holes(bootstrap: str, topic: str, rounds: int, seed: int) -> int:
    """A source whose offsets have holes of many widths, as a compacted topic's do.

    Several transactional producers write to one partition at once and commit
    together: their markers land side by side, so holes are 1 to 4 offsets wide
    between runs of records of every length. Returns the number of records.
    """
    rng = random.Random(seed)
    producers = []
    for i in range(4):
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"holes-{seed}-{i}-{uuid.uuid4().hex[:6]}",
                "linger.ms": 0,
            }
        )
        p.init_transactions(30)
        producers.append(p)
    n = 0
    for r in range(rounds):
        active = rng.sample(producers, rng.randint(1, len(producers)))
        for p in active:
            p.begin_transaction()
        for i, p in enumerate(active):
            for j in range(rng.choice([1, 1, 2, 5])):
                key = None if (r + j) % 5 == 0 else f"k{(r * 7 + j) % 11}".encode()
                value = None if (r + i + j) % 9 == 0 else f"r{r}.{i}.{j}".encode()
                p.produce(topic, value, key, 0)
                n += 1
            p.flush(30)  # the records reach the log before the markers
        for p in active:
            p.commit_transaction(30)
    return n


# --- one mirror run, one verify run for the shapes that need no second run -------------------


@dataclass
class Shaped:
    eos: str
    backlog: str
    holes: str
    eos_records: int
    mirror: MirrorRun
    verify: VerifyRun
    idle: MirrorRun


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory, cluster_a: Any, cluster_b: Any) -> Shaped:
    tag = uuid.uuid4().hex[:8]
    eos, backlog, holes = (f"{name}-{tag}" for name in ("eosapp", "backlog", "holes"))
    bs = cluster_a.bootstrap_servers
    create_topic(bs, eos, 2)
    eos_records = produce_exactly_once_app(bs, eos, 2, 400)
    create_topic(bs, backlog, 2)
    produce_plain(bs, backlog, 2, 3000, "b")
    produce_exactly_once_app(bs, backlog, 2, 120)  # and tiny transactions after it
    create_topic(bs, holes, 1)
    produce_with_holes(bs, holes, 60, seed=7)
    tmp = tmp_path_factory.mktemp("shaped")
    cfg = mirror_properties(
        tmp / "mm.properties",
        bs,
        cluster_b.bootstrap_servers,
        [f".*-{tag}"],
        state_dir=tmp / "state",
        extra={
            # far below every backlog here: transactions fill up mid-batch all the time
            "mm.mirror.max.records.per.transaction": "7",
            "mm.mirror.position.refresh.interval.seconds": "2",
        },
    )
    mirror = run_mirror_once(cfg)
    verify = run_verify(cfg, "--topics", f".*-{tag}", "--json")
    time.sleep(2.5)
    # nothing new to mirror: only the refresh clock can plan tasks now
    idle = run_mirror_once(cfg)
    return Shaped(eos, backlog, holes, eos_records, mirror, verify, idle)


def test_source_written_by_an_exactly_once_app(
    shaped: Shaped, cluster_a: Any, cluster_b: Any
) -> None:
    assert shaped.eos_records == 440
    assert shaped.mirror.returncode == 0, shaped.mirror.describe()
    target = committed_records(cluster_b.bootstrap_servers, f"A.{shaped.eos}", 2)
    assert sum(len(v) for v in target.values()) == 440, shaped.mirror.describe()
    assert_exact_copy(cluster_a, cluster_b, shaped.eos, 2, shaped.verify)


def test_backlog_larger_than_the_transaction_limit(
    shaped: Shaped, cluster_a: Any, cluster_b: Any
) -> None:
    assert shaped.mirror.returncode == 0, shaped.mirror.describe()
    assert_exact_copy(cluster_a, cluster_b, shaped.backlog, 2, shaped.verify)


def test_source_with_holes_of_many_widths(shaped: Shaped, cluster_a: Any, cluster_b: Any) -> None:
    source = read_topic(cluster_a.bootstrap_servers, shaped.holes, 1)
    widths = {b.offset - a.offset - 1 for a, b in itertools.pairwise(source[0])}
    assert {0, 1, 2, 3} <= widths, f"the source should have holes of many widths: {widths}"
    assert shaped.mirror.returncode == 0, shaped.mirror.describe()
    assert_exact_copy(cluster_a, cluster_b, shaped.holes, 1, shaped.verify)


def test_idle_partitions_positions_are_committed_again(shaped: Shaped) -> None:
    """Apache Kafka expires a member-less group's offsets; an idle partition's position
    is committed again every mm.mirror.position.refresh.interval.seconds, across
    --once runs, by a task that fences the partition like any other (again and
    again when a batch outlasts this tiny interval: that is the rule)."""
    assert shaped.idle.returncode == 0, shaped.idle.describe()
    refreshed = {
        (e["topic"], e["partition"]) for e in shaped.idle.events("mirror position refreshed")
    }
    expected = {
        (t, p)
        for t, n in ((shaped.eos, 2), (shaped.backlog, 2), (shaped.holes, 1))
        for p in range(n)
    }
    assert refreshed == expected, shaped.idle.describe()
    assert not [e for e in shaped.idle.events("micro-batch mirrored") if e["records"]]


# --- shapes that need a second run -----------------------------------------------------------


def _lose_state(tmp_path: Path, b: Any) -> None:
    """A new container without its volume, and the state group's offsets expired."""
    import shutil

    shutil.rmtree(tmp_path / "state")
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.delete_consumer_groups([STATE_GROUP], request_timeout=30)[STATE_GROUP].result(30)


def test_lost_state_is_recovered_exactly(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any
) -> None:
    topic = unique_topic("lost")
    create_topic(cluster_a.bootstrap_servers, topic, 2)
    produce_plain(cluster_a.bootstrap_servers, topic, 2, 3000, "first")
    cfg = config(tmp_path, cluster_a, cluster_b, topic)
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    _lose_state(tmp_path, cluster_b)
    produce_plain(cluster_a.bootstrap_servers, topic, 2, 400, "second")
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    recovered = run.events("mirror position recovered from the offset syncs and the target log")
    assert len(recovered) == 2, run.describe()
    target = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 2)
    assert sum(len(v) for v in target.values()) == 3400, "duplicates or loss after lost state"
    verified_copy(cfg, cluster_a, cluster_b, topic, 2)


def test_lost_state_without_a_recovery_record_is_refused(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any
) -> None:
    """The offset syncs name nothing of this partition (here: they were written to a
    topic that is gone with its cluster's data): refused, target untouched."""
    topic = unique_topic("refused")
    create_topic(cluster_a.bootstrap_servers, topic, 1)
    produce_plain(cluster_a.bootstrap_servers, topic, 1, 500, "first")
    syncs_here = {"A->B.offset-syncs.topic.location": "target"}
    cfg = config(tmp_path, cluster_a, cluster_b, topic, **syncs_here)
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    _lose_state(tmp_path, cluster_b)
    # the flow now keeps its offset syncs on the source, where none names this partition
    cfg = config(tmp_path, cluster_a, cluster_b, topic)
    produce_plain(cluster_a.bootstrap_servers, topic, 1, 50, "second")
    before = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 1)
    run = run_mirror_once(cfg)
    assert run.returncode == 1, run.describe()
    assert f"stopped: {topic}[0]: the mirror's position for A.{topic}[0] is gone" in run.stdout
    assert "Nothing was written" in run.stdout
    assert f"mm position -c <config> --flow A->B --topic {topic} --set 0=N" in run.stdout
    after = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 1)
    assert after == before and len(after[0]) == 500
    # the way out, as printed: the next source offset set with mm position
    printed = re.search(r"`mm position -c <config> (--flow \S+ --topic \S+ --set 0)=N`", run.stdout)
    assert printed is not None, run.stdout
    flow_topic = printed.group(1).split()
    from tests.support.groups import run_mm

    moved = run_mm(cfg, "position", *flow_topic[:-1], f"{flow_topic[-1]}=500")
    assert moved.returncode == 0, moved.describe()
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    source = committed_records(cluster_a.bootstrap_servers, topic, 1)
    after = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 1)
    assert after[0] == before[0] + source[0][500:], run.describe()


@pytest.mark.parametrize("new_records", [5, 100])
def test_source_topic_recreated_under_the_mirror(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any, new_records: int
) -> None:
    """A source topic deleted and recreated between two runs is refused by its topic ID,
    whether the new topic is shorter than the mirror's position (5 records) or already
    past it (100: offsets alone could not tell, and records 0-59 of the new topic would
    never be mirrored). Without the recorded IDs, the shorter case is still caught by
    the position past the log end."""
    topic = unique_topic("recreated")
    create_topic(cluster_a.bootstrap_servers, topic, 1)
    produce_plain(cluster_a.bootstrap_servers, topic, 1, 60, "old")
    cfg = config(tmp_path, cluster_a, cluster_b, topic)
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    ids_file = tmp_path / "state" / "mirror" / "A-B.topic-ids.json"
    recorded = json.loads(ids_file.read_text())
    assert set(recorded) >= {topic}, recorded
    admin = AdminClient({"bootstrap.servers": cluster_a.bootstrap_servers})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    create_topic(cluster_a.bootstrap_servers, topic, 1)
    produce_plain(cluster_a.bootstrap_servers, topic, 1, new_records, "new")
    run = run_mirror_once(cfg)
    assert run.returncode == 1, run.describe()
    assert f"not mirrored: {topic}: source topic {topic} on A was deleted and recreated" in (
        run.stdout
    ), run.describe()
    assert f"topic ID {recorded[topic]}, now " in run.stdout and str(ids_file) in run.stdout
    target = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 1)
    assert len(target[0]) == 60 and all(v.startswith(b"old") for _, v in target[0])
    assert json.loads(ids_file.read_text())[topic] == recorded[topic]  # still refused
    if new_records < 60:
        ids_file.unlink()  # state from before topic IDs were kept
        run = run_mirror_once(cfg)
        assert run.returncode == 1, run.describe()
        assert "past the source log end 5" in run.stdout, run.describe()
        assert "deleted and recreated" in run.stdout
        target = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 1)
        assert len(target[0]) == 60
    # the way out, as printed: the positions (Kafka's own tool), then the target topic
    _follow_the_way_out(run.stdout, cluster_b.bootstrap_servers, f"A.{topic}")
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    target = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 1)
    assert [v for _k, v in target[0]] == [v for _k, v in committed_records(
        cluster_a.bootstrap_servers, topic, 1
    )[0]], run.describe()  # fmt: skip
    assert len(target[0]) == new_records and all(v.startswith(b"new") for _, v in target[0])
    assert json.loads(ids_file.read_text())[topic] != recorded[topic]


def _follow_the_way_out(printed: str, target_bootstrap: str, target_topic: str) -> None:
    """Run the kafka-consumer-groups.sh command a refusal printed (its target cluster's
    address in for the placeholder), then delete the target topic, as it says next."""
    from tests.support.apache_kafka import consumer_groups_cli

    found = re.search(r"\(kafka-consumer-groups\.sh ([^)]*)\), then topic (\S+) on B", printed)
    assert found is not None, f"no way out with kafka-consumer-groups.sh in: {printed}"
    assert found.group(2) == target_topic, printed
    args = found.group(1).replace("--bootstrap-server <B>", "").split()
    consumer_groups_cli(target_bootstrap, *args)
    delete_topic(target_bootstrap, target_topic)


def test_target_topic_deleted_is_mirrored_again_from_the_start(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any
) -> None:
    """The way out the mirror's refusals print ("delete topic A.<t> on B to mirror <t>
    again from its start"), followed as written: the next run re-creates the topic
    and copies the source from its start, exactly once, with no new record needed
    (before: exit 0 and nothing mirrored, Spark's checkpoint being past it all)."""
    topic = unique_topic("remirror")
    create_topic(cluster_a.bootstrap_servers, topic, 2)
    produce_plain(cluster_a.bootstrap_servers, topic, 2, 600, "first")
    cfg = config(tmp_path, cluster_a, cluster_b, topic)
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    delete_topic(cluster_b.bootstrap_servers, f"A.{topic}")
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    target = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 2)
    assert [len(target[p]) for p in (0, 1)] == [300, 300], run.describe()
    verified_copy(cfg, cluster_a, cluster_b, topic, 2)


def test_position_reset_backwards_and_forwards_is_mirrored_from(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any
) -> None:
    """The mirror's positions set with `mm position --set`: partition 0 backwards, to
    offset 100 of what was mirrored; partition 1 forwards, past 50 of 100 records not
    mirrored yet. The next run copies each from its new position, what the operator
    asked for: partition 0 again from 100 with no new record needed, partition 1
    without the skipped 50. (Kafka's kafka-consumer-groups.sh --reset-offsets cannot
    do the second: it keeps an offset inside the target topic's range, here 301, and
    the mirror then copied from source offset 301.)"""
    from tests.support.groups import run_mm

    topic = unique_topic("reset")
    create_topic(cluster_a.bootstrap_servers, topic, 2)
    produce_plain(cluster_a.bootstrap_servers, topic, 2, 600, "first")
    cfg = config(tmp_path, cluster_a, cluster_b, topic)
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    before = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 2)
    produce_plain(cluster_a.bootstrap_servers, topic, 2, 200, "second")
    source = committed_records(cluster_a.bootstrap_servers, topic, 2)
    assert [len(source[p]) for p in (0, 1)] == [400, 400]
    refused = run_mm(cfg, "position", "--topic", topic, "--set", "1=401")
    assert refused.returncode == 1, refused.describe()
    assert f"position 401 for {topic}[1] is outside the source log [0, 400]" in (
        refused.stdout + refused.stderr
    ), refused.describe()
    moved = run_mm(cfg, "position", "--topic", topic, "--set", "0=100", "--set", "1=350")
    assert moved.returncode == 0, moved.describe()
    assert "0\t300 -> 100\t0\t400" in moved.stdout and "1\t300 -> 350\t0\t400" in moved.stdout
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    after = committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 2)
    assert after[0] == before[0] + source[0][100:], run.describe()
    assert after[1] == before[1] + source[1][350:], run.describe()


def test_state_directory_deleted_resumes_from_the_positions_on_the_target(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any
) -> None:
    """The mirror's state directory deleted (a container without its volume): the
    positions committed on B carry the mirror on, exactly, with no recovery needed."""
    import shutil

    topic = unique_topic("statedir")
    create_topic(cluster_a.bootstrap_servers, topic, 2)
    produce_plain(cluster_a.bootstrap_servers, topic, 2, 600, "first")
    cfg = config(tmp_path, cluster_a, cluster_b, topic)
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    shutil.rmtree(tmp_path / "state")
    produce_plain(cluster_a.bootstrap_servers, topic, 2, 200, "second")
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    assert not run.events("mirror position recovered from the offset syncs and the target log")
    source = committed_records(cluster_a.bootstrap_servers, topic, 2)
    assert committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 2) == source
    verified_copy(cfg, cluster_a, cluster_b, topic, 2)


def _live_mirror(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, topic: str, records: int, label: str
) -> Path:
    """``topic`` on A (2 partitions, ``records`` plain records each) and the config of a
    continuous mirror that refreshes its topics every 2 s, batches every 0.5 s."""
    create_topic(cluster_a.bootstrap_servers, topic, 2)
    produce_plain(cluster_a.bootstrap_servers, topic, 2, records, label)
    return config(
        tmp_path,
        cluster_a,
        cluster_b,
        topic,
        **{"A->B.refresh.topics.interval.seconds": "2", "mm.mirror.trigger.seconds": "0.5"},
    )


@pytest.mark.parametrize(
    "command", [("mirror",), ("run", "--jobs", "mirror,checkpoint")], ids=["mirror", "run"]
)
def test_operator_actions_while_the_mirror_runs_are_followed(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any, command: tuple[str, ...]
) -> None:
    """While `mm mirror` or `mm run` keeps its Spark workers (and their pooled
    clients): a position set backwards with `mm position`, then the target topic
    deleted (the refusals' way to mirror a topic again). Each is followed by the
    running job: partition 0 copied again from offset 100, then the whole source
    copied into the re-created topic, then later records, each exactly once."""
    from tests.support.groups import run_mm
    from tests.support.mirror import running_job, wait_for_records

    topic = unique_topic("live")
    cfg = _live_mirror(tmp_path, cluster_a, cluster_b, topic, 400, "first")
    with running_job(cfg, tmp_path, command) as job:
        source = read_topic(cluster_a.bootstrap_servers, topic, 2)
        wait_for_records(cluster_b.bootstrap_servers, f"A.{topic}", 2, source, 240)
        moved = run_mm(cfg, "position", "--topic", topic, "--set", "0=100")
        assert moved.returncode == 0, moved.describe()
        again = {0: source[0] + source[0][100:], 1: source[1]}
        wait_for_records(cluster_b.bootstrap_servers, f"A.{topic}", 2, again, 120)
        delete_topic(cluster_b.bootstrap_servers, f"A.{topic}")
        wait_for_records(cluster_b.bootstrap_servers, f"A.{topic}", 2, source, 120)
        produce_plain(cluster_a.bootstrap_servers, topic, 2, 100, "second")
        source = read_topic(cluster_a.bootstrap_servers, topic, 2)
        wait_for_records(cluster_b.bootstrap_servers, f"A.{topic}", 2, source, 120)
        assert job.proc.poll() is None, job.output()[-6000:]
    # the offset syncs topic holds the syncs of each copy (the reset's, the deleted
    # topic's): judged by the product's own audit, which reads them as the
    # checkpoint job does, newest last
    verify = run_verify(cfg, "--topics", topic, "--json")
    assert verify.returncode == 0, verify.describe()
    (flow,) = verify.json()["flows"]
    for rep in (p for p in flow["partitions"] if p["topic"] == topic):
        assert rep["ok"] and rep["first_difference"] is None, rep
        assert rep["records_matched"] == rep["source_records"] == len(source[rep["partition"]])
        assert rep["translations"]["wrong"] == 0 and rep["syncs"]["false"] == 0, rep


@pytest.mark.parametrize(
    "command", [("mirror",), ("run", "--jobs", "mirror,checkpoint")], ids=["mirror", "run"]
)
def test_source_topic_recreated_while_the_mirror_runs_is_refused_and_the_way_out_followed(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any, command: tuple[str, ...]
) -> None:
    """The source topic deleted and recreated under a running `mm mirror` or `mm run`:
    the job refuses it by topic ID (its other work goes on), and the way out it
    logs, followed while it runs (the positions deleted with Kafka's own tool, then the
    target topic), has the running job mirror the new topic from its start, exactly."""
    from tests.support.mirror import running_job, wait_for_records

    topic = unique_topic("live-recreated")
    cfg = _live_mirror(tmp_path, cluster_a, cluster_b, topic, 200, "old")
    with running_job(cfg, tmp_path, command) as job:
        old = read_topic(cluster_a.bootstrap_servers, topic, 2)
        wait_for_records(cluster_b.bootstrap_servers, f"A.{topic}", 2, old, 240)
        delete_topic(cluster_a.bootstrap_servers, topic)
        create_topic(cluster_a.bootstrap_servers, topic, 2)
        produce_plain(cluster_a.bootstrap_servers, topic, 2, 30, "new")
        refusal = f"source topic {topic} on A was deleted and recreated"
        deadline = time.monotonic() + 120
        while refusal not in job.output() and time.monotonic() < deadline:
            assert job.proc.poll() is None, job.output()[-6000:]
            time.sleep(1)
        out = job.output()
        assert refusal in out, out[-6000:]
        # refused, not guessed: B still holds the old topic's records only
        assert committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 2) == {
            p: [(r.key, r.value) for r in old[p]] for p in old
        }
        line = next(x for x in out.splitlines() if refusal in x and x.startswith("{"))
        _follow_the_way_out(json.loads(line)["reason"], cluster_b.bootstrap_servers, f"A.{topic}")
        new = read_topic(cluster_a.bootstrap_servers, topic, 2)
        wait_for_records(cluster_b.bootstrap_servers, f"A.{topic}", 2, new, 180)
        assert job.proc.poll() is None, job.output()[-6000:]


def test_a_foreign_topic_id_file_is_refused_and_deleting_it_is_the_way_out(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any
) -> None:
    """The topic-ID file overwritten by something else: the mirror refuses to guess
    and names the file; deleted as the message says, the next run records the IDs
    the source has now and mirrors on from the positions on B, exactly."""
    topic = unique_topic("idsfile")
    create_topic(cluster_a.bootstrap_servers, topic, 1)
    produce_plain(cluster_a.bootstrap_servers, topic, 1, 50, "first")
    cfg = config(tmp_path, cluster_a, cluster_b, topic)
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    ids_file = tmp_path / "state" / "mirror" / "A-B.topic-ids.json"
    ids_file.write_text("{not ours")
    produce_plain(cluster_a.bootstrap_servers, topic, 1, 50, "second")
    run = run_mirror_once(cfg)
    assert run.returncode != 0, run.describe()
    assert f"{ids_file} is not a topic-ID file" in run.output, run.describe()
    assert "delete it to record the IDs the source has now" in run.output
    assert "Traceback" not in run.output, run.describe()
    ids_file.unlink()
    run = run_mirror_once(cfg)
    assert run.returncode == 0, run.describe()
    assert committed_records(cluster_b.bootstrap_servers, f"A.{topic}", 1) == committed_records(
        cluster_a.bootstrap_servers, topic, 1
    )
    assert topic in json.loads(ids_file.read_text())
