"""`mm failover`: move idle consumer groups to their translated offsets on the target.

One module fixture runs one ``mm mirror --once`` and one ``mm checkpoint --once``
(Spark, ~10 s or more each) over a 3-partition topic with transactional gaps and
four source groups committed at various positions (inside gaps, at the end, at 0).
The tests then run ``mm failover`` as a user would (``python -m mm`` in a
subprocess) and check the result the way a consumer on the target sees it: from
the group's committed offsets on B it reads exactly the source records from the
group's committed offset on A (keys and values).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from mm_client import assign_translated, translate_all, translate_offsets
from support.clusters import KafkaCluster
from support.groups import (
    KV,
    commit_admin,
    commit_assigned,
    group_offsets,
    read_group,
    run_mm,
    topic_for_groups,
    unread,
)
from support.mirror import (
    Rec,
    read_topic,
    run_mirror_once,
)

from mm.commands.failover import format_table
from mm.dr.groups import Row, judge_group, note_for, plan_rows

PARTITIONS = 3
AHEAD_ON_TARGET = 10_000  # G1's p1 on B before the failover: the translation is behind it

# --- helpers ------------------------------------------------------------------------------


@dataclass
class Setup:
    a: str
    b: str
    tag: str
    topic: str
    target_topic: str
    props: Path
    groups: dict[str, str]  # role -> group id
    committed: dict[str, dict[int, int]]  # role -> source partition -> offset on A
    source: dict[int, list[Rec]]
    translations: dict[str, dict[tuple[str, int], int]]  # role -> target tp -> offset on B
    before_on_b: dict[str, dict[tuple[str, int], int]]  # role -> committed on B at setup

    def expected(self, role: str) -> dict[int, list[KV]]:
        """Per partition, what the group has not read on the source (keys, values)."""
        return unread(self.source, self.committed[role])


@pytest.fixture(scope="module")
def setup(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Setup:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    tmp = tmp_path_factory.mktemp("failover")
    tag = uuid.uuid4().hex[:8]
    topic = f"fot-{tag}"
    target_topic = f"A.{topic}"
    groups = {r: f"fog-{tag}-{r}" for r in ("g1", "g2", "g3", "g4")}
    made = topic_for_groups(a, b, tmp, topic, f"fog-{tag}-.*", PARTITIONS, tag)
    props, source, end, gap = made.props, made.source, made.end, made.gap
    committed = {
        "g1": {0: 0, 1: gap[1], 2: source[2][len(source[2]) // 2].offset},
        "g2": {0: gap[0], 1: end[1], 2: 1},
        "g3": {0: 2, 1: 5, 2: gap[2]},
        "g4": {0: end[0], 1: 0, 2: gap[2]},
    }
    for role in ("g1", "g3", "g4"):
        commit_admin(a, groups[role], topic, committed[role])
    commit_assigned(a, groups["g2"], topic, committed["g2"])

    mirror = run_mirror_once(props)
    assert mirror.returncode == 0, mirror.describe()
    checkpoint = run_mm(props, "checkpoint", "--once")
    assert checkpoint.returncode == 0, checkpoint.describe()

    # every group's translations from one read of A.checkpoints.internal on B
    translations = translate_all({"bootstrap.servers": b}, "A", f"fog-{tag}-.*")
    assert sorted(translations) == sorted(groups.values()), translations
    by_role = {
        role: {(tp.topic, tp.partition): o for tp, o in translations[g].items()}
        for role, g in groups.items()
    }
    for role, offsets in by_role.items():
        assert sorted(offsets) == [(target_topic, p) for p in range(PARTITIONS)], (role, offsets)

    # already on B before the failover: G1 at 0 on p0 and ahead on p1; G3 at 1 everywhere
    commit_admin(b, groups["g1"], target_topic, {0: 0, 1: AHEAD_ON_TARGET})
    commit_admin(b, groups["g3"], target_topic, dict.fromkeys(range(PARTITIONS), 1))
    return Setup(
        a=a,
        b=b,
        tag=tag,
        topic=topic,
        target_topic=target_topic,
        props=props,
        groups=groups,
        committed=committed,
        source=source,
        translations=by_role,
        before_on_b={role: group_offsets(b, g) for role, g in groups.items()},
    )


def table_rows(stdout: str) -> list[list[str]]:
    """The data rows of the failover table (header and summary line left out)."""
    lines = stdout.splitlines()
    assert lines and lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "BEFORE", "AFTER", "NOTE"]
    rows = []
    for line in lines[1:]:
        if line.startswith("failover "):
            break  # the summary, then the failover point
        rows.append(line.split(None, 5))
    return rows


def read_with_kafka_python(bootstrap: str, group: str, want: dict[int, list[KV]]) -> Any:
    """kafka-python KafkaConsumer at ``group``'s translated offsets, read to ``want``'s length.

    Reads until every partition has at least as many records as ``want``, then polls
    a while longer so extra records would show up.
    """
    from kafka import KafkaConsumer

    offsets = translate_offsets({"bootstrap.servers": bootstrap}, "A", group)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="none",
    )
    got: dict[int, list[KV]] = {p: [] for p in range(PARTITIONS)}
    try:
        assigned = assign_translated(consumer, offsets)
        assert sorted(assigned) == sorted(offsets)
        deadline = time.monotonic() + 60
        settle: float | None = None
        while settle is None or time.monotonic() < settle:
            assert time.monotonic() < deadline, f"kafka-python read {got} within 60s"
            for tp, msgs in consumer.poll(timeout_ms=200).items():
                got[tp.partition].extend((m.key, m.value) for m in msgs)
            if settle is None and all(len(got[p]) >= len(want[p]) for p in want):
                settle = time.monotonic() + 1.5
    finally:
        consumer.close(autocommit=False)
    return offsets, got


# --- pure logic (no broker) --------------------------------------------------------------------


@pytest.mark.unit
def test_notes() -> None:
    assert note_for(None, 5, dry_run=False) == "moved"
    assert note_for(3, 5, dry_run=False) == "moved"
    assert note_for(9, 5, dry_run=False) == "moved, backwards"
    assert note_for(5, 5, dry_run=False) == "unchanged"
    assert note_for(None, 5, dry_run=True) == "dry-run"
    assert note_for(9, 5, dry_run=True) == "dry-run, backwards"
    assert note_for(5, 5, dry_run=True) == "unchanged"
    assert note_for(1, 5, dry_run=False, refused=True) == "refused"
    # a refused group's table says so on every row, also where nothing would change
    assert note_for(5, 5, dry_run=True, refused=True) == "refused"


@pytest.mark.unit
@pytest.mark.parametrize("dry_run", [False, True])
def test_only_a_group_shown_idle_is_moved(dry_run: bool) -> None:
    """EMPTY or DEAD moves; UNKNOWN (Tansu while a consumer joins), STABLE with no member
    listed, a rebalance or an unreadable state is refused, every row saying so."""
    translated = {("A.t", 0): 5, ("A.t", 1): 7}
    before = {("A.t", 0): 5}
    upstream = {("A.t", 0): 6, ("A.t", 1): 8}

    def judge(described: Any, committed: Any = before) -> Any:
        return judge_group("g", "B", described, committed, translated, upstream, dry_run=dry_run)

    for state in ("EMPTY", "DEAD"):
        ok = judge((state, 0))
        assert ok.status == ("dry-run" if dry_run else "moved") and ok.message is None
        assert [r.note for r in ok.rows] == ["unchanged", "dry-run" if dry_run else "moved"]
    for state in ("UNKNOWN", "STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"):
        refused = judge((state, 0))
        assert refused.status == "refused" and refused.failed
        assert [r.note for r in refused.rows] == ["refused", "refused"]
        assert refused.message is not None
        assert f"is not idle on B (state {state}, 0 member(s) listed" in refused.message
        assert ("a consumer may be joining it" in refused.message) is (state == "UNKNOWN")
        assert "Its offsets were not changed" in refused.message
    unreadable = judge(RuntimeError("COORDINATOR_NOT_AVAILABLE"))
    assert unreadable.status == "refused" and unreadable.failed
    assert [r.note for r in unreadable.rows] == ["refused", "refused"]
    assert unreadable.message is not None
    assert "could not be read" in unreadable.message
    assert "COORDINATOR_NOT_AVAILABLE" in unreadable.message
    failed = judge(("EMPTY", 0), RuntimeError("GROUP_AUTHORIZATION_FAILED"))
    assert failed.status == "failed" and "GROUP_AUTHORIZATION_FAILED" in str(failed.message)


@pytest.mark.unit
def test_plan_rows_and_table() -> None:
    rows = plan_rows(
        "g",
        {("A.t", 1): 7, ("A.t", 0): 4, ("A.u", 0): 0},
        {("A.t", 0): 4, ("A.u", 0): 12, ("A.other", 0): 99},
        dry_run=False,
        upstream={("A.t", 0): 5, ("A.t", 1): 8, ("A.u", 0): 0},
    )
    assert rows == [
        Row("g", "A.t", 0, 4, 4, 5, "unchanged"),
        Row("g", "A.t", 1, None, 7, 8, "moved"),
        Row("g", "A.u", 0, 12, 0, 0, "moved, backwards"),
    ]
    assert format_table(rows).splitlines() == [
        "GROUP  TOPIC  PARTITION  BEFORE  AFTER  NOTE",
        "g      A.t            0       4      4  unchanged",
        "g      A.t            1       -      7  moved",
        "g      A.u            0      12      0  moved, backwards",
    ]


@pytest.mark.unit
def test_usage_errors(tmp_path: Path) -> None:
    props = tmp_path / "mm2.properties"
    props.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
        "A->B.enabled = true\n"
    )

    def mm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mm", "failover", "-c", str(props), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    both = mm("--group", "g", "--groups", "g.*")
    assert both.returncode == 2 and "not allowed with" in both.stderr
    neither = mm()
    assert neither.returncode == 2 and "one of the arguments" in neither.stderr
    bad = mm("--groups", "(")
    assert bad.returncode == 2 and "not a valid regex" in bad.stderr
    flow = mm("--group", "g", "--flow", "B->A")
    assert flow.returncode == 2 and "--flow" in flow.stderr


# --- against the clusters ----------------------------------------------------------------------


@pytest.mark.integration
def test_translations_are_exact(setup: Setup) -> None:
    """The premise: reading B from a translation yields what the group had left on A."""
    target = read_topic(setup.b, setup.target_topic, PARTITIONS)
    for role in setup.groups:
        want = setup.expected(role)
        for p in range(PARTITIONS):
            start = setup.translations[role][(setup.target_topic, p)]
            got = [(r.key, r.value) for r in target[p] if r.offset >= start]
            assert got == want[p], (role, p, start)


@pytest.mark.integration
def test_dry_run_prints_the_plan_and_commits_nothing(setup: Setup) -> None:
    g1 = setup.groups["g1"]
    before = group_offsets(setup.b, g1)
    res = run_mm(setup.props, "failover", "--group", g1, "--dry-run", timeout=60)
    assert res.returncode == 0, res.describe()
    assert group_offsets(setup.b, g1) == before  # nothing committed
    rows = table_rows(res.stdout)
    want = setup.translations["g1"]
    assert [(r[0], r[1], int(r[2])) for r in rows] == [
        (g1, setup.target_topic, p) for p in range(PARTITIONS)
    ]
    for r in rows:
        tp = (r[1], int(r[2]))
        had = before.get(tp)
        assert r[3] == ("-" if had is None else str(had))
        assert int(r[4]) == want[tp]
        assert r[5] == note_for(had, want[tp], dry_run=True)
    assert "dry run: nothing committed" in res.stdout
    if before == setup.before_on_b["g1"]:  # the failover test has not run yet
        t = setup.target_topic
        assert want[(t, 0)] == 0  # committed at 0 on A
        assert [r[5] for r in rows] == ["unchanged", "dry-run, backwards", "dry-run"]
        assert [r[3] for r in rows] == ["0", str(AHEAD_ON_TARGET), "-"]


@pytest.mark.integration
def test_failover_moves_an_idle_group(setup: Setup) -> None:
    g1 = setup.groups["g1"]
    before = group_offsets(setup.b, g1)
    res = run_mm(setup.props, "failover", "--group", g1, "--json", timeout=60)
    assert res.returncode == 0, res.describe()
    out = json.loads(res.stdout)
    assert out["ok"] is True and out["dry_run"] is False and out["cluster"] == "B"
    assert out["checkpoints_topic"] == "A.checkpoints.internal"
    [group] = out["groups"]
    assert group["group"] == g1 and group["state"] in ("EMPTY", "DEAD")
    assert group["status"] == ("unchanged" if before == setup.translations["g1"] else "moved")
    assert [
        (p["topic"], p["partition"], p["before"], p["after"], p["upstream_offset"])
        for p in group["partitions"]
    ] == [
        (
            setup.target_topic,
            p,
            before.get((setup.target_topic, p)),
            setup.translations["g1"][(setup.target_topic, p)],
            setup.committed["g1"][p],
        )
        for p in range(PARTITIONS)
    ]
    # A answers: each translation proven by content before it was committed
    proof = out["proof"]
    assert proof["source_answered"] is True and proof["message"] is None, proof
    assert (proof["proven"], proof["conservative"], proof["unprovable"]) == (PARTITIONS, 0, 0)
    assert [(p["group"], p["topic"], p["partition"], p["status"]) for p in proof["partitions"]] == [
        (g1, setup.target_topic, p, "proven") for p in range(PARTITIONS)
    ]
    # committed on B = the translations, and a consumer of the group resumes exactly
    assert group_offsets(setup.b, g1) == setup.translations["g1"]
    got = read_group(setup.b, g1, setup.target_topic, PARTITIONS)
    assert got == setup.expected("g1")
    assert sum(len(v) for v in got.values()) > 0


@pytest.mark.integration
def test_the_proof_says_conservative_and_that_the_source_is_down(
    setup: Setup, tmp_path: Path
) -> None:
    """g4 committed further on A after its checkpoint: proven, but conservative (it
    reads those records again). With A's address dead, the failover still plans every
    group and says it proved nothing, and why, within seconds."""
    g4 = setup.groups["g4"]
    later = {1: setup.committed["g4"][1] + 3}
    commit_admin(setup.a, g4, setup.topic, {**setup.committed["g4"], **later})
    try:
        res = run_mm(setup.props, "failover", "--group", g4, "--dry-run", "--json", timeout=60)
    finally:
        commit_admin(setup.a, g4, setup.topic, setup.committed["g4"])
    assert res.returncode == 0, res.describe()
    proof = json.loads(res.stdout)["proof"]
    rows = {p["partition"]: p for p in proof["partitions"]}
    assert {p: r["status"] for p, r in rows.items()} == {
        0: "proven",
        1: "conservative",
        2: "proven",
    }, proof
    assert rows[1]["reason"] == (
        f"the group committed {later[1]} on the source after its checkpoint at "
        f"{setup.committed['g4'][1]}: it reads up to 3 offsets again"
    )
    text = run_mm(setup.props, "failover", "--group", g4, "--dry-run", timeout=60)
    assert "translations proven on A by content: 3 proven, 0 conservative, 0 unprovable" in (
        text.stdout
    ), text.describe()

    dead = tmp_path / "a-down.properties"
    lines = setup.props.read_text().splitlines()
    dead.write_text(
        "\n".join(
            "A.bootstrap.servers = 127.0.0.1:1" if ln.startswith("A.bootstrap.servers") else ln
            for ln in lines
        )
        + "\n"
    )
    down = run_mm(dead, "failover", "--group", g4, "--dry-run", "--json", timeout=60)
    assert down.returncode == 0, down.describe()
    doc = json.loads(down.stdout)
    assert doc["groups"][0]["status"] == "dry-run", doc
    assert doc["proof"]["source_answered"] is False and doc["proof"]["partitions"] == []
    assert doc["proof"]["message"].startswith(
        "not proven: cluster A (127.0.0.1:1) did not answer within 5s"
    ), doc["proof"]
    assert down.seconds < 30, down.describe()


@pytest.mark.integration
# kafka-python loads its protocol schemas with importlib.resources' deprecated read_text
@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
def test_kafka_python_consumer_at_translated_offsets(setup: Setup) -> None:
    """No failover command: translate_offsets + assign_translated in a kafka-python consumer."""
    want = setup.expected("g2")
    offsets, got = read_with_kafka_python(setup.b, setup.groups["g2"], want)
    assert offsets == setup.translations["g2"]
    assert got == want
    assert group_offsets(setup.b, setup.groups["g2"]) == {}  # nothing committed on B


@pytest.mark.integration
def test_group_with_active_member_is_refused(setup: Setup) -> None:
    g3, g4 = setup.groups["g3"], setup.groups["g4"]
    assert setup.before_on_b["g3"]  # committed on B before: must stay as it is
    member = Consumer(
        {
            "bootstrap.servers": setup.b,
            "group.id": g3,
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    try:
        member.subscribe([setup.target_topic])
        deadline = time.monotonic() + 60
        while not member.assignment():
            assert time.monotonic() < deadline, "the member got no assignment within 60s"
            member.poll(0.2)

        def keep_polling() -> None:
            member.poll(0.1)

        res = run_mm(setup.props, "failover", "--group", g3, timeout=60, while_waiting=keep_polling)
        assert res.returncode == 1, res.describe()
        assert f"group {g3!r} is not idle on B" in res.stderr, res.describe()
        assert "not changed" in res.stderr
        assert group_offsets(setup.b, g3) == setup.before_on_b["g3"]
        rows = table_rows(res.stdout)
        assert [r[5] for r in rows] == ["refused"] * PARTITIONS
        assert "1 refused" in res.stdout

        # several groups: the active one refused, the other still moved; exit 1
        both = run_mm(
            setup.props,
            "failover",
            "--groups",
            f"fog-{setup.tag}-g[34]",
            "--json",
            timeout=60,
            while_waiting=keep_polling,
        )
        assert both.returncode == 1, both.describe()
        out = json.loads(both.stdout)
        assert out["ok"] is False
        assert [(g["group"], g["status"]) for g in out["groups"]] == [
            (g3, "refused"),
            (g4, "moved"),
        ]
        assert out["groups"][0]["state"] not in ("EMPTY", "DEAD")
        assert group_offsets(setup.b, g3) == setup.before_on_b["g3"]
        assert group_offsets(setup.b, g4) == setup.translations["g4"]
    finally:
        member.close()


@pytest.mark.integration
def test_group_with_a_consumer_joining_is_refused(setup: Setup) -> None:
    """Found by a new user: a consumer still joining the group on B (Tansu describes it
    UNKNOWN with no members) must be refused up front, in --dry-run too, not hit
    UNKNOWN_MEMBER_ID errors at the commit."""
    g3 = setup.groups["g3"]
    joining = Consumer(
        {
            "bootstrap.servers": setup.b,
            "group.id": g3,
            # the default 45 s: Tansu's first assignment comes after about half of it
            "session.timeout.ms": 45_000,
            "enable.auto.commit": False,
        }
    )
    admin = AdminClient({"bootstrap.servers": setup.b})
    try:
        joining.subscribe([setup.target_topic])
        deadline = time.monotonic() + 20
        while True:
            joining.poll(0.1)
            state = admin.describe_consumer_groups([g3])[g3].result(10).state.name
            if state not in ("EMPTY", "DEAD"):
                break
            assert time.monotonic() < deadline, "the consumer never started joining"

        def keep_polling() -> None:
            joining.poll(0.1)

        for extra in (("--dry-run",), ()):
            args = ("--group", g3, *extra)
            res = run_mm(setup.props, "failover", *args, timeout=60, while_waiting=keep_polling)
            assert res.returncode == 1, res.describe()
            assert f"group {g3!r} is not idle on B" in res.stderr, res.describe()
            assert "UNKNOWN_MEMBER_ID" not in res.output, res.describe()
            assert [r[5] for r in table_rows(res.stdout)] == ["refused"] * PARTITIONS
            assert "1 refused" in res.stdout
        assert group_offsets(setup.b, g3) == setup.before_on_b["g3"]
    finally:
        joining.close()
    # the way out, as printed: "stop its consumers there and retry"
    res = run_mm(setup.props, "failover", "--group", g3, timeout=60)
    assert res.returncode == 0, res.describe()
    assert [r[5] for r in table_rows(res.stdout)] == ["moved"] * PARTITIONS, res.describe()
    assert group_offsets(setup.b, g3) == setup.translations["g3"]


@pytest.mark.integration
def test_groups_without_checkpoints(setup: Setup) -> None:
    g1, nosuch = setup.groups["g1"], f"fog-{uuid.uuid4().hex[:8]}-none"
    one = run_mm(setup.props, "failover", "--group", nosuch, timeout=60)
    assert one.returncode == 1, one.describe()
    assert f"no checkpoints for group {nosuch!r} in A.checkpoints.internal on B" in one.stderr
    regex = run_mm(setup.props, "failover", "--groups", "nomatch-.*", "--json", timeout=60)
    assert regex.returncode == 1, regex.describe()
    assert json.loads(regex.stdout)["groups"] == []
    assert "no group matching 'nomatch-.*' has checkpoints" in regex.stderr
    # one of two has checkpoints: that one is processed, the other reported, exit 0
    mixed = run_mm(
        setup.props, "failover", "--group", g1, "--group", nosuch, "--dry-run", "--json", timeout=60
    )
    assert mixed.returncode == 0, mixed.describe()
    out = json.loads(mixed.stdout)
    assert [g["group"] for g in out["groups"]] == [g1, nosuch]
    assert out["groups"][1]["status"] == "no-checkpoints"
    assert out["groups"][0]["status"] in ("dry-run", "unchanged")
    assert f"no checkpoints for group {nosuch!r}" in mixed.stderr
