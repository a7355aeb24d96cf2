"""`mm checkpoint --once` end to end: exact, never ahead, restartable, group offset sync.

One module fixture runs four Spark jobs in sequence (each costs 10 s or more):

1. source topic with transactional gaps; groups committed at 0, at the log end,
   inside a gap, far behind, at random offsets; ``mm mirror --once``;
2. more data produced but *not* mirrored; a group committed past the mirrored
   part; one corrupt record in the offset-syncs topic; ``mm checkpoint --once``;
3. ``mm mirror --once`` again; a new group far behind; target-side groups set up
   for the group offset sync (idle, ahead on the target, active member);
   ``mm checkpoint --once`` again with ``sync.group.offsets.enabled = true``,
   starting from its snapshot.

"Exact" is checked the way a consumer sees it: reading the target from the
checkpointed offset yields exactly the source records from the group's
committed offset on (key, value, headers, timestamp).
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from mm_client.errors import RecordDecodeError
from mm_client.records import Checkpoint
from support.clusters import KafkaCluster
from support.groups import run_mm
from support.mirror import (
    MirrorRun,
    Rec,
    create_topic,
    kill_group,
    mirror_properties,
    mm_env,
    produce_mixed,
    read_partition,
    read_topic,
    run_mirror_once,
)

from mm.kafka.profile import EMBEDDED
from mm.kafka.watermarks import watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 3
SYNCS_TOPIC = "mm2-offset-syncs.B.internal"  # on A (offset-syncs.topic.location=source)
CHECKPOINTS_TOPIC = "A.checkpoints.internal"  # on B
FAR_AHEAD_ON_TARGET = 1_000_000


# --- helpers ------------------------------------------------------------------------------


def produce_gappy(bootstrap: str, topic: str, rounds: int, tag: str, seed: int) -> None:
    """Many committed transactions (a marker offset after each) between plain records."""
    rng = random.Random(seed)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    txn = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"ck-test-{topic}-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
        }
    )
    txn.init_transactions(30)
    for r in range(rounds):
        txn.begin_transaction()
        for p in range(PARTITIONS):
            for i in range(rng.randrange(1, 12)):
                txn.produce(topic, f"{tag}t{r}-{p}-{i}".encode(), f"k{i % 3}".encode(), p)
        txn.commit_transaction(30)
        for p in range(PARTITIONS):
            for i in range(rng.randrange(0, 6)):
                plain.produce(topic, f"{tag}p{r}-{p}-{i}".encode(), None, p)
        plain.flush(30)


def log_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """End offsets as a fetch reports them (right on every broker: the embedded
    profile's read)."""
    keys = [(topic, p) for p in range(PARTITIONS)]
    marks = watermarks({"bootstrap.servers": bootstrap}, keys, profile=EMBEDDED)
    return {p: hi for (_, p), (_, hi) in marks.items()}


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets for ``group`` without joining it (AdminClient)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p, o, metadata=f"m{o}") for p, o in sorted(offsets.items())]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(30)


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or []}


def read_checkpoint_log(bootstrap: str) -> list[Checkpoint]:
    """Every decodable checkpoint record in the checkpoints topic, in order.

    The topic is shared by every test of the session, and some (the client's)
    write garbage on purpose: skip what does not decode, as readers do.
    """
    out = []
    for r in read_partition(bootstrap, CHECKPOINTS_TOPIC, 0):
        try:
            out.append(Checkpoint.from_bytes(r.key, r.value))
        except RecordDecodeError:
            continue
    return out


def newest(log: list[Checkpoint]) -> dict[tuple[str, str, int], Checkpoint]:
    return {(c.consumer_group, c.topic, c.partition): c for c in log}


def gap_offset(records: list[Rec]) -> int:
    """An offset inside a transactional gap (a commit marker), from the middle of the log."""
    offsets = [r.offset for r in records]
    gaps = [o + 1 for o, n in pairwise(offsets) if n - o > 1]
    assert gaps, "no gap in the source partition"
    return gaps[len(gaps) // 2]


def stat(run: MirrorRun, name: str) -> int:
    m = re.search(rf"\b{name}=(\d+)", run.stdout)
    assert m, f"no {name}= in the output\n{run.describe()}"
    return int(m.group(1))


@dataclass
class State:
    a: str
    b: str
    topic: str
    groups: dict[str, str]  # role -> group id
    committed: dict[str, dict[int, int]]  # role -> partition -> source offset
    end1: dict[int, int]
    end2: dict[int, int]
    source: dict[int, list[Rec]]  # after phase 2 (all data)
    target: dict[int, list[Rec]]  # after phase 3 (all data mirrored)
    corrupt_offset: int
    ck1: MirrorRun
    ck2: MirrorRun
    log1: list[Checkpoint]
    log2: list[Checkpoint]
    syncs_total: int  # records in the offset-syncs topic after phase 3
    syncs_end: int  # its end offset
    target_groups_after: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    props: Path = Path()
    state_dir: Path = Path()


@pytest.fixture(scope="module")
def st(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> State:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    tmp = tmp_path_factory.mktemp("checkpoint")
    tag = uuid.uuid4().hex[:8]
    topic = f"ckt-{tag}"
    roles = ["zero", "end", "gap", "far", "rand", "ahead", "partial", "lag"]
    groups = {r: f"ckg-{tag}-{r}" for r in roles}
    state_dir = tmp / "state"
    props = mirror_properties(
        tmp / "mm2.properties",
        a,
        b,
        [topic],
        state_dir=state_dir,
        extra={"A->B.groups": f"ckg-{tag}-.*"},
    )

    # --- phase 1: data with gaps, groups everywhere, mirror ---------------------------------
    create_topic(a, topic, PARTITIONS)
    produce_mixed(a, topic, PARTITIONS, tag="p1-")
    produce_gappy(a, topic, 30, "p1-", seed=1)
    end1 = log_ends(a, topic)
    src1 = read_topic(a, topic, PARTITIONS)
    rng = random.Random(7)
    committed: dict[str, dict[int, int]] = {
        "zero": dict.fromkeys(range(PARTITIONS), 0),
        "end": dict(end1),
        "gap": {p: gap_offset(src1[p]) for p in range(PARTITIONS)},
        "far": {p: 1 + p for p in range(PARTITIONS)},
        "rand": {p: rng.randrange(0, end1[p] + 1) for p in range(PARTITIONS)},
    }
    for role, offsets in committed.items():
        commit(a, groups[role], topic, offsets)
    m1 = run_mirror_once(props)
    assert m1.returncode == 0, m1.describe()

    # --- phase 2: more data not mirrored, a group past the mirror, a corrupt sync -----------
    produce_gappy(a, topic, 10, "p2-", seed=2)
    end2 = log_ends(a, topic)
    assert all(end2[p] > end1[p] for p in range(PARTITIONS))
    committed["ahead"] = dict(end2)
    # p0 inside the unmirrored data, the other partitions inside the mirrored part
    committed["partial"] = {0: end1[0] + 2, **{p: end1[p] // 2 for p in range(1, PARTITIONS)}}
    for role in ("ahead", "partial"):
        commit(a, groups[role], topic, committed[role])
    delivered: list[int] = []
    prod = Producer({"bootstrap.servers": a})
    prod.produce(
        SYNCS_TOPIC,
        b"\x00\x03not a sync",
        b"\x00\x01",
        partition=0,
        on_delivery=lambda err, msg: delivered.append(-1 if err else (msg.offset() or 0)),
    )
    prod.flush(30)
    assert delivered and delivered[0] >= 0
    ck1 = run_mm(props, "checkpoint", "--once")
    assert ck1.returncode == 0, ck1.describe()
    log1 = read_checkpoint_log(b)

    # --- phase 3: mirror the rest, a new lagging group, target groups, checkpoint again ------
    m2 = run_mirror_once(props)
    assert m2.returncode == 0, m2.describe()
    committed["lag"] = {p: 3 + p for p in range(PARTITIONS)}
    commit(a, groups["lag"], topic, committed["lag"])
    target_topic = f"A.{topic}"
    # "far" is ahead on the target for p0 (must stay), has nothing for the others
    commit(b, groups["far"], target_topic, {0: FAR_AHEAD_ON_TARGET})
    # "end" has an active member on the target: never touched
    member = Consumer(
        {
            "bootstrap.servers": b,
            "group.id": groups["end"],
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    try:
        member.subscribe([target_topic])
        deadline = time.monotonic() + 60
        while not member.assignment():
            assert time.monotonic() < deadline, "the target group member got no assignment"
            member.poll(0.2)
        with props.open("a") as f:
            f.write("A->B.sync.group.offsets.enabled = true\n")
        ck2 = run_mm(props, "checkpoint", "--once")
        assert ck2.returncode == 0, ck2.describe()
        after = {role: group_offsets(b, groups[role]) for role in ("rand", "far", "end", "zero")}
    finally:
        member.close()
    log2 = read_checkpoint_log(b)
    raw_syncs = read_partition(a, SYNCS_TOPIC, 0)
    return State(
        a=a,
        b=b,
        topic=topic,
        groups=groups,
        committed=committed,
        end1=end1,
        end2=end2,
        source=read_topic(a, topic, PARTITIONS),
        target=read_topic(b, f"A.{topic}", PARTITIONS),
        corrupt_offset=delivered[0],
        ck1=ck1,
        ck2=ck2,
        log1=log1,
        log2=log2,
        syncs_total=len(raw_syncs),
        syncs_end=raw_syncs[-1].offset + 1,
        target_groups_after=after,
        props=props,
        state_dir=state_dir,
    )


def assert_exact(
    st: State,
    role: str,
    checkpoints: dict[tuple[str, str, int], Checkpoint],
    upto: dict[int, int],
) -> None:
    """A consumer starting on the target at the checkpoint reads exactly what the group
    has not read on the source (up to ``upto``, the mirrored end)."""
    group, target_topic = st.groups[role], f"A.{st.topic}"
    for p, u in st.committed[role].items():
        cp = checkpoints.get((group, target_topic, p))
        assert cp is not None, f"{role}[{p}] (offset {u}): no checkpoint"
        assert cp.upstream_offset == u, (role, p, cp)
        want = [r.content for r in st.source[p] if u <= r.offset < upto[p]]
        # what a read_committed consumer assigned at the checkpoint reads (the target is
        # read once per module; test_never_ahead_of_the_mirror consumes from the offsets)
        got = [r.content for r in st.target[p] if r.offset >= cp.downstream_offset]
        assert got == want, (
            f"{role}[{p}]: source offset {u} -> target {cp.downstream_offset}: target yields "
            f"{len(got)} records, source {len(want)}; first target {got[:1]}, source {want[:1]}"
        )


# --- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["zero", "end", "gap", "far", "rand"])
def test_exact_while_mirror_is_behind(st: State, role: str) -> None:
    # emitted when the target held phase 1 only; a consumer starting there now reads
    # everything the group had not read, phase 2 included (mirrored since)
    assert_exact(st, role, newest(st.log1), st.end2)


def test_never_ahead_of_the_mirror(st: State) -> None:
    cps = newest(st.log1)
    target_topic = f"A.{st.topic}"
    # committed at the source's end, past what was mirrored: no checkpoint at all
    ahead = [c for k, c in cps.items() if k[0] == st.groups["ahead"]]
    assert ahead == []
    # partly past the mirror: only the mirrored partitions have a checkpoint
    partial = {k[2]: c for k, c in cps.items() if k[0] == st.groups["partial"]}
    assert sorted(partial) == list(range(1, PARTITIONS))
    assert all(c.topic == target_topic for c in partial.values())
    for p in range(1, PARTITIONS):
        c = partial[p]
        want = [r.content for r in st.source[p] if c.upstream_offset <= r.offset]
        got = [r.content for r in read_partition(st.b, target_topic, p, start=c.downstream_offset)]
        assert got == want
    assert stat(st.ck1, "untranslated") == PARTITIONS + 1  # ahead x3 + partial p0


def test_corrupt_offset_sync_skipped_and_counted(st: State) -> None:
    assert stat(st.ck1, "corrupt") == 1
    events = [json.loads(line) for line in st.ck1.stderr.splitlines() if line.startswith("{")]
    corrupt = [e for e in events if e.get("event") == "corrupt offset sync skipped"]
    assert [e["offset"] for e in corrupt] == [st.corrupt_offset]
    assert corrupt[0]["topic"] == SYNCS_TOPIC and corrupt[0]["error"].startswith("OffsetSync")
    # it may have been any partition's sync: the stretch of every partition across it
    # (from its last sync before to its first after) is a hole, kept in the snapshot
    assert stat(st.ck2, "holes") == PARTITIONS


def test_restart_resumes_from_the_snapshot(st: State) -> None:
    snap = json.loads((st.state_dir / "checkpoint" / "A-B" / "store.json").read_text())
    assert snap["flow"] == "A->B"
    assert snap["syncs_next"][f"{SYNCS_TOPIC}:0"] == st.syncs_end
    # the second run read only the syncs written since the first (not the corrupt one again)
    assert stat(st.ck2, "corrupt") == 0
    assert stat(st.ck2, "syncs") > 0
    assert stat(st.ck2, "syncs") == st.syncs_total - stat(st.ck1, "syncs") - 1
    # a new group far behind: its syncs were read by the first run only, kept in the snapshot
    assert_exact(st, "lag", newest(st.log2), st.end2)


@pytest.mark.parametrize("role", ["zero", "end", "gap", "far", "rand", "ahead", "partial", "lag"])
def test_exact_after_the_mirror_caught_up(st: State, role: str) -> None:
    assert_exact(st, role, newest(st.log2), st.end2)


def test_unchanged_checkpoints_not_written_again(st: State) -> None:
    zero = [c for c in st.log2 if c.consumer_group == st.groups["zero"]]
    assert sorted(c.partition for c in zero) == list(range(PARTITIONS))
    # never backwards: per key, the downstream offsets of successive records only grow
    # (no group moved backwards on the source in this test)
    seen: dict[tuple[str, str, int], int] = {}
    for c in st.log2:
        key = (c.consumer_group, c.topic, c.partition)
        if c.consumer_group in st.groups.values():
            assert c.downstream_offset >= seen.get(key, -1), c
            seen[key] = c.downstream_offset


def test_group_offset_sync(st: State) -> None:
    cps = newest(st.log2)
    target_topic = f"A.{st.topic}"

    def want(role: str) -> dict[tuple[str, int], int]:
        return {
            (target_topic, p): cps[(st.groups[role], target_topic, p)].downstream_offset
            for p in range(PARTITIONS)
        }

    # idle on the target and no offsets there: takes the checkpoints
    assert st.target_groups_after["rand"] == want("rand")
    assert st.target_groups_after["zero"] == want("zero")
    # forward only: p0 was ahead on the target and stays; the others had none
    far = want("far")
    far[(target_topic, 0)] = FAR_AHEAD_ON_TARGET
    assert st.target_groups_after["far"] == far
    # an active member on the target: untouched
    assert st.target_groups_after["end"] == {}
    assert stat(st.ck2, "groups_skipped_active") == 1
    assert stat(st.ck2, "group_offsets_synced") >= 3 * PARTITIONS


def test_translate_command(st: State) -> None:
    res = run_mm(st.props, "translate", "--group", st.groups["gap"], "--json", timeout=60)
    assert res.returncode == 0, res.describe()
    out = json.loads(res.stdout)
    cps = newest(st.log2)
    target_topic = f"A.{st.topic}"
    assert [(o["topic"], o["partition"], o["offset"]) for o in out["offsets"]] == [
        (target_topic, p, cps[(st.groups["gap"], target_topic, p)].downstream_offset)
        for p in range(PARTITIONS)
    ]
    missing = run_mm(st.props, "translate", "--group", "no-such-group", timeout=60)
    assert missing.returncode == 1 and "no checkpoints" in missing.stderr


def test_unreadable_snapshot_moved_away_as_its_refusal_says(st: State) -> None:
    """An operator's way out followed: the snapshot corrupted, the job refuses naming it;
    the file moved away, the history is rebuilt from the offset-syncs topic (created with
    cleanup.policy=delete, so nothing of it is lost) and the checkpoints are those of
    before the corruption, still exact."""
    snap = st.state_dir / "checkpoint" / "A-B" / "store.json"
    good = snap.read_text()
    snap.write_text(good[: len(good) // 2])  # a torn write
    refused = run_mm(st.props, "checkpoint", "--once")
    assert refused.returncode == 1, refused.describe()
    m = re.search(
        r"checkpoint store snapshot (\S+) is unreadable \(.*\); move it away", refused.stderr
    )
    assert m and Path(m.group(1)) == snap, refused.describe()
    assert "Traceback" not in refused.stderr, refused.describe()
    assert read_checkpoint_log(st.b) == st.log2  # nothing emitted by the refused run

    snap.rename(st.props.parent / "store.json.unreadable")  # "move it away"
    again = run_mm(st.props, "checkpoint", "--once")
    assert again.returncode == 0, again.describe()
    assert stat(again, "corrupt") == 1  # the whole topic read again, its corrupt sync too
    ours = set(st.groups.values())
    before = {k: c for k, c in newest(st.log2).items() if k[0] in ours}
    after = {k: c for k, c in newest(read_checkpoint_log(st.b)).items() if k[0] in ours}
    assert after == before
    assert json.loads(snap.read_text())["syncs_next"] == json.loads(good)["syncs_next"]


def test_continuous_follows_groups_without_new_syncs(st: State) -> None:
    """Runs last: moves source groups. No new syncs arrive, so Spark runs no micro-batch;
    the driver's own rounds must still pick up the moves (every emit interval)."""
    with st.props.open("a") as f:
        f.write("A->B.emit.checkpoints.interval.seconds = 1\n")
        f.write("A->B.refresh.groups.interval.seconds = 1\n")
    target_topic = f"A.{st.topic}"
    out_path, err_path = st.props.parent / "continuous.out", st.props.parent / "continuous.err"
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mm", "checkpoint", "-c", str(st.props)],
            cwd=st.props.parent,
            env=mm_env(),
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            # wait until the job is up (its first round) before moving the groups
            deadline = time.monotonic() + 180
            while "checkpoint round" not in err_path.read_text():
                assert proc.poll() is None, err_path.read_text()[-4000:]
                assert time.monotonic() < deadline, "no checkpoint round within 180s"
                time.sleep(0.5)
            # "zero" moves forward into phase 2's data; "far" moves backwards to 0
            moved = {
                "zero": {p: st.end1[p] + 1 for p in range(PARTITIONS)},
                "far": dict.fromkeys(range(PARTITIONS), 0),
            }
            for role, offsets in moved.items():
                commit(st.a, st.groups[role], st.topic, offsets)
            deadline = time.monotonic() + 60
            while True:
                cps = newest(read_checkpoint_log(st.b))
                done = all(
                    cps[(st.groups[r], target_topic, p)].upstream_offset == o
                    for r, offsets in moved.items()
                    for p, o in offsets.items()
                )
                if done:
                    break
                assert proc.poll() is None, err_path.read_text()[-4000:]
                assert time.monotonic() < deadline, "moved groups got no new checkpoints in 60s"
                time.sleep(1.0)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                pass
            kill_group(proc)
    for role, offsets in moved.items():
        st.committed[role] = offsets
        assert_exact(st, role, cps, st.end2)
