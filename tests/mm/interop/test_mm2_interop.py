"""Interop with the real MirrorMaker 2 (Apache Kafka 4.3.1 jars, see mm/embedded/kafka-pom.xml).

Two one-node KRaft brokers A and B for the module. One module fixture plays the
takeover story once:

1. topic T1 on A, written by a transactional producer (80 transactions of 10
   records: a commit marker after each, so source offsets have gaps); group
   ``billing`` committed in the middle of the data, group ``audit`` first near
   the start, then (once MM2 mirrored everything) inside the longest stretch
   between two of MM2's offset syncs;
2. the real MirrorMaker 2 (dedicated mode, exactly-once off) mirrors T1 to
   ``A.T1`` on B and emits checkpoints; it is stopped;
3. ``mm mirror --once`` with the same connect-mirror-maker.properties (topic T2,
   mirrored by mm only, added): mm takes over T1 at MM2's newest offset sync;
   200 more records on T1; ``mm mirror --once`` again; ``mm checkpoint --once``.

"Exact" is computed from the data: records carry a unique value, source and
target are read ``read_committed`` and matched by value; the exact translation
of a committed offset U is the smallest target offset of a mirrored record at or
after U (one past the last mirrored record before U when there is none).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from mm_client import Checkpoint, read_checkpoints, translate_offsets
from mm_client.errors import RecordDecodeError
from support.apache_kafka import (
    ConnectStandaloneCheckpoint,
    KRaftBroker,
    MirrorMaker2,
    kafka_jars,
    remote_cluster_utils_translate,
    remote_cluster_utils_translate_groups,
    wait_until,
    write_properties,
)
from support.cli import run_command
from support.groups import run_mm
from support.mirror import (
    ReadSync,
    Rec,
    create_topic,
    listed_end,
    partition_count,
    read_offset_syncs,
    read_partition,
    read_topic,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_TXN = 10  # records per transaction, spread over the partitions (5 each)
SYNCS_TOPIC = "mm2-offset-syncs.B.internal"  # on A (offset-syncs.topic.location=source)
CHECKPOINTS_TOPIC = "A.checkpoints.internal"  # on B
MM2_TIMEOUT = 120.0

R = TypeVar("R")


# --- data ---------------------------------------------------------------------------------


def produce_txns(bootstrap: str, topic: str, txns: int, tag: str, first_seq: int = 0) -> int:
    """``txns`` committed transactions of PER_TXN records; record ``seq`` goes to
    partition ``seq % PARTITIONS`` with value ``<tag>-<seq>``. Returns the next seq."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"mm2-interop-{topic}-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    seq = first_seq
    for _ in range(txns):
        producer.begin_transaction()
        for _ in range(PER_TXN):
            producer.produce(
                topic,
                f"{tag}-{seq:06d}".encode(),
                f"k{seq % 7}".encode(),
                partition=seq % PARTITIONS,
                headers=[("seq", str(seq).encode())],
            )
            seq += 1
        producer.commit_transaction(30)
    return seq


def commit_admin(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``group``'s offsets without joining it; every partition's answer checked
    (AdminClient reports e.g. COORDINATOR_LOAD_IN_PROGRESS per partition, no retry)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
    res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])
    answer = res[group].result(30)
    errors = [(tp.partition, tp.error) for tp in answer.topic_partitions or [] if tp.error]
    assert not errors, f"commit of {group} {offsets} on {topic} failed: {errors}"


def seq_of(record: Rec) -> int:
    """The sequence number :func:`produce_txns` put in the record's value."""
    assert record.value is not None
    return int(record.value.rsplit(b"-", 1)[1])


def exact_translation(source: list[Rec], target: list[Rec], upstream: int) -> int:
    """The exact target offset for a group committed at ``upstream`` on the source."""
    on_target: dict[bytes | None, int] = {}
    for r in target:
        on_target.setdefault(r.value, r.offset)  # the first copy if a record was duplicated
    mirrored = [(r.offset, on_target[r.value]) for r in source if r.value in on_target]
    assert mirrored, "no source record found on the target: cannot translate"
    at_or_after = [d for s, d in mirrored if s >= upstream]
    if at_or_after:
        return min(at_or_after)
    return max(d for s, d in mirrored if s < upstream) + 1


def data_offset_near(records: list[Rec], lo: int, hi: int) -> int:
    """The offset of a record strictly between ``lo`` and ``hi``, nearest their middle."""
    inside = [r.offset for r in records if lo < r.offset < hi]
    assert inside, f"no record between {lo} and {hi}"
    return min(inside, key=lambda o: abs(o - (lo + hi) / 2))


def gap_offsets(records: list[Rec], lo: int, hi: int) -> list[int]:
    """Offsets in [lo, hi) that hold no record (transaction markers)."""
    held = {r.offset for r in records}
    return [o for o in range(lo, hi) if o not in held]


def checkpoint_records(bootstrap: str, start: int = 0, end: int | None = None) -> list[Checkpoint]:
    """The decodable checkpoint records of the checkpoints topic in [start, end)."""
    out = []
    for r in read_partition(bootstrap, CHECKPOINTS_TOPIC, 0, start=start):
        if end is not None and r.offset >= end:
            break
        try:
            out.append(Checkpoint.from_bytes(r.key, r.value))
        except RecordDecodeError:
            continue
    return out


def syncs_by_partition(syncs: list[ReadSync], topic: str) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for s in syncs:
        if s.topic == topic:
            out.setdefault(s.partition, []).append((s.upstream_offset, s.downstream_offset))
    return out


def widest_stretch(pairs: list[tuple[int, int]], records: list[Rec]) -> tuple[int, int] | None:
    """The two consecutive syncs (by upstream offset) furthest apart with a data record
    strictly between them: their upstreams; None when no two syncs hold one (a sync on a
    transaction's last record and the next on the following one hold only its marker)."""
    ups = sorted({u for u, _ in pairs})
    data = [r.offset for r in records]
    holding = [(lo, hi) for lo, hi in pairwise(ups) if any(lo < o < hi for o in data)]
    return max(holding, key=lambda ab: ab[1] - ab[0]) if holding else None


Row = tuple[str, int, int, int, int]  # group, partition, upstream, checkpoint, exact


def judge(
    checkpoints: list[Checkpoint],
    source: dict[int, list[Rec]],
    target: dict[int, list[Rec]],
    committed: dict[str, dict[int, int]] | None = None,
) -> list[Row]:
    """(group, partition, upstream, checkpoint, exact) for every checkpoint; the
    exact translation of the checkpoint's upstream offset, or of the group's
    ``committed`` offset when given (what a failover should resume at)."""
    rows = []
    for c in checkpoints:
        u = c.upstream_offset if committed is None else committed[c.consumer_group][c.partition]
        exact = exact_translation(source[c.partition], target[c.partition], u)
        rows.append((c.consumer_group, c.partition, u, c.downstream_offset, exact))
    return rows


def describe_rows(rows: list[Row]) -> str:
    return "; ".join(
        f"{g}[{p}] U={u}: checkpoint {d}, exact {e} ({d - e:+d})" for g, p, u, d, e in rows
    )


# --- fixtures -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Brokers:
    a: KRaftBroker
    b: KRaftBroker


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    kafka_jars()  # without the jars: fail here, with the way to get them
    root = tmp_path_factory.mktemp("apache-kafka")
    a = KRaftBroker(root / "A", wait=False)
    try:
        b = KRaftBroker(root / "B", wait=False)
        try:
            a.wait_ready()
            b.wait_ready()
            yield Brokers(a, b)
        finally:
            b.stop()
    finally:
        a.stop()


@dataclass
class Takeover:
    a: str
    b: str
    dir: Path
    props: Path  # mm's connect-mirror-maker.properties (MM2's plus T2 and mm's keys)
    t1: str  # mirrored by MM2, then by mm
    t2: str  # mirrored by mm only
    t1_groups: dict[str, str]  # role -> group id
    t2_groups: dict[str, str]
    committed: dict[str, dict[int, int]]  # group -> partition -> offset on A (as checkpointed)
    mm2_syncs: dict[int, list[tuple[int, int]]]  # T1 partition -> MM2's (upstream, downstream)
    mm_checkpoints: tuple[int, int]  # [start, end) of mm's checkpoint run in the topic
    first_new_seq: int  # T1 records from this seq on were mirrored by mm
    notes: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def takeover(brokers: Brokers, tmp_path_factory: pytest.TempPathFactory) -> Takeover:
    a, b = brokers.a.bootstrap, brokers.b.bootstrap
    tmp = tmp_path_factory.mktemp("mm2-takeover")
    tag = uuid.uuid4().hex[:8]
    t1, t2 = f"orders-{tag}", f"ledger-{tag}"
    t1_groups = {"billing": f"billing-{tag}", "audit": f"audit-{tag}"}
    t2_groups = {"ledger": f"ledger-app-{tag}", "reports": f"reports-{tag}"}
    notes: list[str] = []
    clock = time.monotonic()

    def mark(what: str) -> None:
        notes.append(f"{time.monotonic() - clock:6.1f}s {what}")
        print(notes[-1])  # shown with -s, and with a failure of the fixture

    create_topic(a, t1, PARTITIONS)
    create_topic(a, t2, PARTITIONS)
    next_seq = produce_txns(a, t1, 80, tag)  # per partition: 400 records, offsets 0..479
    produce_txns(a, t2, 40, f"{tag}-t2")  # per partition: 200 records, offsets 0..239
    billing = {0: 159, 1: 243}
    commit_admin(a, t1_groups["billing"], t1, billing)
    commit_admin(a, t1_groups["audit"], t1, {0: 7, 1: 8})

    mark("data written")

    # 1. the real MirrorMaker 2 mirrors T1 and emits checkpoints
    mm2 = MirrorMaker2(
        tmp / "mm2",
        a,
        b,
        topics=t1,
        groups=f"{t1_groups['billing']}, {t1_groups['audit']}",
        # MM2 sends a partition's delayed syncs at its offset commits: every 5 s, not 60
        # (at 60 s, two of four runs here had fewer than two syncs per partition after
        # the 120 s wait below)
        extra={"B.offset.flush.interval.ms": 5000},  # the worker of target B
    )
    try:
        source1 = read_topic(a, t1, PARTITIONS)
        target_topic = f"A.{t1}"

        def mirrored() -> bool:
            assert mm2.alive(), mm2.describe()
            if partition_count(b, target_topic) != PARTITIONS:
                return False
            got = read_topic(b, target_topic, PARTITIONS)
            return all(len(got[p]) >= len(source1[p]) for p in range(PARTITIONS))

        wait_or_describe(f"MM2 mirrored {t1}", mirrored, mm2)
        mark("MM2 mirrored everything")

        # MM2 sends a partition's newest sync only with the next record or its next offset
        # commit (offset.flush.interval.ms, 5 s above): do not wait for it. Syncs it sent:
        def some_syncs() -> dict[int, list[tuple[int, int]]] | None:
            by_p = syncs_by_partition(read_offset_syncs(a, SYNCS_TOPIC), t1)
            stretches = {p: widest_stretch(by_p.get(p, []), source1[p]) for p in range(PARTITIONS)}
            return by_p if all(s is not None for s in stretches.values()) else None

        # Under load MM2 can end the burst with one sync per partition: the first is
        # still unsent when the burst's last (delayed) one replaces it at the commit, and a
        # partition without new records never gets another. One more transaction makes
        # MM2 send the next (at its next commit); the data stays produce_txns' sequence.
        # That one may sit right after the burst's last record's (only a marker between:
        # no stretch to audit in yet), so up to three.
        syncs = None
        for _ in range(3):
            try:
                syncs = wait_until("MM2 wrote offset syncs", some_syncs, 30, interval=1.0)
                break
            except AssertionError:
                next_seq = produce_txns(a, t1, 1, tag, first_seq=next_seq)
                mark("one more transaction on T1 (no two syncs with a record between)")
                source1 = read_topic(a, t1, PARTITIONS)
                wait_or_describe(f"MM2 mirrored {t1}", mirrored, mm2)
        if syncs is None:
            syncs = wait_or_describe("MM2 wrote offset syncs", some_syncs, mm2)
        # audit: inside the longest stretch between two of MM2's syncs
        audit = {}
        for p in [0, 1]:
            stretch = widest_stretch(syncs[p], source1[p])
            assert stretch is not None, f"partition {p}: no stretch between syncs {syncs[p]}"
            audit[p] = data_offset_near(source1[p], *stretch)
        commit_admin(a, t1_groups["audit"], t1, audit)
        committed = {t1_groups["billing"]: billing, t1_groups["audit"]: audit}
        # MM2 cannot translate an offset below its oldest sync of the partition (it may
        # have dropped the first ones): it emits no checkpoint for those
        translatable = sorted(
            (g, p)
            for g, offsets in committed.items()
            for p, u in offsets.items()
            if u >= min(s for s, _ in syncs[p])
        )

        def mm2_checkpointed() -> bool:
            snap = read_checkpoints({"bootstrap.servers": b}, "A", f".*-{tag}", 10)
            got = {(g, tp.partition) for g in committed for tp in snap.checkpoints(g)}
            return set(translatable) <= got

        # MM2 emits a checkpoint only when the translated offset advances (or the group
        # rewinds): audit's move may emit nothing. Some intervals after the move, then.
        wait_or_describe(f"MM2 checkpointed {translatable}", mm2_checkpointed, mm2)
        time.sleep(3)
        mark("MM2 checkpointed")
    finally:
        mm2.stop()
    mm2_syncs = syncs_by_partition(read_offset_syncs(a, SYNCS_TOPIC), t1)
    mark(f"MM2 stopped; its offset syncs of {t1}: {mm2_syncs}")

    # 2. mm takes over with the same properties (T2 added, mm's own keys)
    t2_committed = {
        t2_groups["ledger"]: {0: 101, 1: 150},
        t2_groups["reports"]: {0: 40, 1: 200},
    }
    for g, offsets in t2_committed.items():
        commit_admin(a, g, t2, offsets)
    committed.update(t2_committed)
    props = dict(mm2.properties)
    props["A->B.topics"] = f"{t1}, {t2}"
    props["A->B.groups"] = f".*-{tag}"
    props["mm.state.dir"] = tmp / "mm-state"
    props["spark.master"] = "local[2]"
    config = write_properties(tmp / "connect-mirror-maker.properties", props)

    # its own process: the event asserted below is a Spark Python worker's line, which
    # the in-process runner's shared JVM once did not pass on (a fresh-clone run)
    first = run_command(
        ["mirror", "-c", str(config), "--once"],
        cwd=config.parent,
        keep=config.parent / "mirror-0",
        process=True,
    )
    assert first.returncode == 0, first.describe()
    recovered = first.events("mirror position recovered from the offset syncs and the target log")
    assert sorted(str(e.get("target_topic")) for e in recovered) == [target_topic] * PARTITIONS, (
        f"mm did not take over {t1} from MM2's offset syncs: {recovered}\n{first.describe()}"
    )
    mark(f"mm mirror --once (takeover) {first.seconds:.1f}s: {recovered}")
    first_new_seq = next_seq
    produce_txns(a, t1, 20, tag, first_seq=next_seq)  # 200 more, mirrored by mm
    second = run_mm(config, "mirror", "--once")
    assert second.returncode == 0, second.describe()
    mark(f"mm mirror --once {second.seconds:.1f}s")

    before = listed_end(b, CHECKPOINTS_TOPIC, 0)
    checkpoint = run_mm(config, "checkpoint", "--once")
    assert checkpoint.returncode == 0, checkpoint.describe()
    after = listed_end(b, CHECKPOINTS_TOPIC, 0)
    mark(f"mm checkpoint --once {checkpoint.seconds:.1f}s")
    return Takeover(
        a=a,
        b=b,
        dir=tmp,
        props=config,
        t1=t1,
        t2=t2,
        t1_groups=t1_groups,
        t2_groups=t2_groups,
        committed=committed,
        mm2_syncs=mm2_syncs,
        mm_checkpoints=(before, after),
        first_new_seq=first_new_seq,
        notes=notes,
    )


def wait_or_describe(
    what: str, check: Callable[[], R | None], process: MirrorMaker2 | ConnectStandaloneCheckpoint
) -> R:
    try:
        return wait_until(what, check, MM2_TIMEOUT, interval=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{process.describe()}") from None


# --- tests --------------------------------------------------------------------------------


def test_takeover_from_mm2_checkpoints_never_ahead(takeover: Takeover) -> None:
    """mm's checkpoints after taking over from MM2 are never ahead of the exact
    translation (ahead = a consumer failing over would skip records)."""
    t = takeover
    source = read_topic(t.a, t.t1, PARTITIONS)
    target = read_topic(t.b, f"A.{t.t1}", PARTITIONS)
    for p in range(PARTITIONS):
        assert [r.value for r in target[p]] == [r.value for r in source[p]], (
            f"A.{t.t1}[{p}] is not an exact copy of {t.t1}[{p}] after the takeover: source "
            f"{len(source[p])} records, target {len(target[p])}"
        )
    start, end = t.mm_checkpoints
    groups = set(t.t1_groups.values())
    records = [c for c in checkpoint_records(t.b, 0, end) if c.consumer_group in groups]
    by_mm = records[
        len([c for c in checkpoint_records(t.b, 0, start) if c.consumer_group in groups]) :
    ]
    # what a failover reads after mm's checkpoint run: the newest per partition (mm
    # does not repeat a checkpoint MM2 already wrote with the same translated offset)
    newest = {(c.consumer_group, c.partition): c for c in records}
    # MM2 drops syncs under load (at most 10 in flight), the first ones of a partition
    # too; an offset below a partition's oldest sync has no proven translation, and mm's
    # own syncs start where it took over: no checkpoint there, from MM2 or from mm
    translatable = sorted(
        (g, p)
        for g in groups
        for p in range(PARTITIONS)
        if t.committed[g][p] >= min(u for u, _ in t.mm2_syncs[p])
    )
    assert translatable, f"no committed offset above MM2's oldest syncs {t.mm2_syncs}"
    assert sorted(newest) == translatable, (
        f"checkpoints for {sorted(newest)}, expected exactly {translatable} (the committed "
        f"offsets {t.committed} at or above MM2's oldest sync of the partition): {records}"
    )
    rows = judge(list(newest.values()), source, target, t.committed)
    rows_mm = judge(by_mm, source, target)
    print(f"newest: {describe_rows(rows)}; mm's: {describe_rows(rows_mm)}")
    ahead = sorted({row for row in rows + rows_mm if row[3] > row[4]})
    assert not ahead, (
        f"checkpoints ahead of the exact translation after mm took over from MM2 (a consumer "
        f"failing over would skip records): {describe_rows(ahead)}. Newest per partition "
        f"(vs the group's committed offset): {describe_rows(rows)}; emitted by mm's run: "
        f"{describe_rows(rows_mm)}; MM2's syncs: {t.mm2_syncs}"
    )


def test_takeover_checkpoints_exact_in_range_mm_mirrored(takeover: Takeover) -> None:
    """Groups committed inside what mm itself mirrored get exact checkpoints."""
    t = takeover
    source = read_topic(t.a, t.t1, PARTITIONS)
    target = read_topic(t.b, f"A.{t.t1}", PARTITIONS)
    first_new = {
        p: min(r.offset for r in source[p] if seq_of(r) >= t.first_new_seq)
        for p in range(PARTITIONS)
    }
    end = {p: source[p][-1].offset + 1 for p in range(PARTITIONS)}
    billing, audit = t.t1_groups["billing"], t.t1_groups["audit"]
    new = {
        # a record in the middle; a transaction marker
        billing: {
            0: data_offset_near(source[0], first_new[0], end[0]),
            1: gap_offsets(source[1], first_new[1], end[1])[3],
        },
        # the first record mm mirrored; one past the last record
        audit: {0: first_new[0], 1: end[1]},
    }
    for g, offsets in new.items():
        commit_admin(t.a, g, t.t1, offsets)
    run = run_mm(t.props, "checkpoint", "--once")
    assert run.returncode == 0, run.describe()
    snap = read_checkpoints({"bootstrap.servers": t.b}, "A", "|".join(new))
    newest = [c for g in new for c in snap.checkpoints(g).values()]
    assert sorted((c.consumer_group, c.partition, c.upstream_offset) for c in newest) == sorted(
        (g, p, o) for g, offsets in new.items() for p, o in offsets.items()
    ), f"no checkpoint for every new offset: {newest}"
    rows = judge(newest, source, target)
    wrong = [row for row in rows if row[3] != row[4]]
    assert not wrong, f"checkpoints not exact: {describe_rows(rows)}"


def test_remote_cluster_utils_reads_mm_checkpoints(takeover: Takeover) -> None:
    """MM2's own client library reads mm's checkpoints as mm_client does."""
    t = takeover
    snap = read_checkpoints({"bootstrap.servers": t.b}, "A", ".*")
    groups = snap.groups
    ours = set(t.t1_groups.values()) | set(t.t2_groups.values())
    assert ours <= set(groups), f"groups without checkpoints: {sorted(ours - set(groups))}"
    theirs = remote_cluster_utils_translate_groups(t.b, "A", groups)
    for group in groups:
        mine = translate_offsets({"bootstrap.servers": t.b}, "A", group)
        assert mine, f"mm_client found no checkpoint for {group}"
        assert theirs[group] == dict(mine), (
            f"{group}: RemoteClusterUtils.translateOffsets {theirs[group]} != "
            f"mm_client.translate_offsets {dict(mine)}"
        )
    # the single-group helper answers the same
    one = sorted(ours)[0]
    assert remote_cluster_utils_translate(t.b, "A", one) == theirs[one]


def test_mm2_checkpoint_connector_continues_after_mm(takeover: Takeover) -> None:
    """MM2's MirrorCheckpointConnector, started on what mm mirrored and
    checkpointed, emits checkpoints for new group offsets, never ahead."""
    t = takeover
    source = read_topic(t.a, t.t2, PARTITIONS)
    target = read_topic(t.b, f"A.{t.t2}", PARTITIONS)
    for p in range(PARTITIONS):
        assert [r.value for r in target[p]] == [r.value for r in source[p]], f"A.{t.t2}[{p}]"
    ledger, reports = t.t2_groups["ledger"], t.t2_groups["reports"]
    last = {p: source[p][-1].offset for p in range(PARTITIONS)}
    new = {
        # back to earlier offsets (MM2 emits an upstream rewind)
        ledger: {0: data_offset_near(source[0], 10, 60), 1: gap_offsets(source[1], 30, 80)[1]},
        # forward, near the end (the translated offset advances)
        reports: {0: last[0] - 2, 1: last[1] + 1},
    }
    start = listed_end(t.b, CHECKPOINTS_TOPIC, 0)
    connect = ConnectStandaloneCheckpoint(
        t.dir / f"connect-{uuid.uuid4().hex[:6]}",
        t.a,
        t.b,
        topics=t.t2,
        groups=f"{ledger}, {reports}",
    )
    with connect:
        for g, offsets in new.items():
            commit_admin(t.a, g, t.t2, offsets)
        connect.wait_task_started()
        wanted = {(g, p, o) for g, offsets in new.items() for p, o in offsets.items()}

        def emitted() -> list[Checkpoint] | None:
            assert connect.alive(), connect.describe()
            got = [
                c
                for c in checkpoint_records(t.b, start)
                if (c.consumer_group, c.partition, c.upstream_offset) in wanted
            ]
            seen = {(c.consumer_group, c.partition, c.upstream_offset) for c in got}
            return got if seen == wanted else None

        try:
            got = wait_until("MM2's checkpoint connector", emitted, 60.0, interval=1.0)
        except AssertionError:
            seen = checkpoint_records(t.b, start)
            raise AssertionError(
                f"MM2's MirrorCheckpointConnector emitted no checkpoint within 60s for some of "
                f"the new offsets {sorted(wanted)} (it emitted {seen})\n{connect.describe()}"
            ) from None
    rows = judge(got, source, target)
    print(f"MM2's checkpoint connector after mm: {describe_rows(rows)}")
    ahead = [row for row in rows if row[3] > row[4]]
    assert not ahead, f"MM2's checkpoints ahead of the exact translation: {describe_rows(rows)}"
