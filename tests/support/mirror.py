"""Helpers for end-to-end mirror tests: config files, `mm mirror` runs, exact reads.

Reads are ``read_committed`` with ``assign()`` (Tansu's group join is slow) and
``enable.partition.eof``, so "the whole partition" means up to the high
watermark a Fetch reported, not ListOffsets(latest), which Tansu under-reports.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from mm_client.errors import RecordDecodeError
from mm_client.records import OffsetSync, sync_flags
from mm_client.translation import translate_offset

from mm.config import build_config
from mm.kafka.rawlog import committed_view, read_log
from mm.logs import get_logger
from mm.source.topics import TopicMirrorPlanner
from support.cli import CommandRun, mm_env, run_command

MIRROR_TIMEOUT = 300.0
_NAME = re.compile(r"[A-Za-z0-9-]+")

Headers = list[tuple[str, bytes | None]] | None


# --- mirror configuration and runs ----------------------------------------------------


def mirror_properties(
    path: Path,
    source_bootstrap: str,
    target_bootstrap: str,
    topics: Sequence[str],
    *,
    state_dir: Path,
    extra: Mapping[str, str] | None = None,
    source_alias: str = "A",
) -> Path:
    """Write an MM2 properties file for flow A->B mirroring only ``topics`` (regexes).

    Keep the regexes to ``[A-Za-z0-9-]`` plus ``.*``: a backslash is an escape
    character in a properties file. ``source_alias``: another name for A, to keep
    what the shared target holds per source (the failover points) to the test.
    """
    a = source_alias
    lines = [
        f"clusters = {a}, B",
        f"{a}.bootstrap.servers = {source_bootstrap}",
        f"B.bootstrap.servers = {target_bootstrap}",
        f"{a}->B.enabled = true",
        f"{a}->B.topics = {', '.join(topics)}",
        f"mm.state.dir = {state_dir}",
        "spark.master = local[2]",
    ]
    lines += [f"{k} = {v}" for k, v in (extra or {}).items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def mirror_cmd(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "mm", "mirror", "-c", str(config), *args]


MirrorRun = CommandRun  # what a finished `mm` command gives (tests.support.cli)


def run_mirror_once(config: Path, *, timeout: float = MIRROR_TIMEOUT) -> MirrorRun:
    """`mm mirror -c config --once`, to its end (see tests.support.cli.run_command)."""
    return run_command(["mirror", "-c", str(config), "--once"], cwd=config.parent, timeout=timeout)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL every process left in ``proc``'s session (started with start_new_session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ContinuousMirror:
    """`mm mirror -c config` (no --once) in its own session, output to files; with
    ``command`` another long-running job (e.g. ``("run",)``)."""

    def __init__(self, config: Path, log_dir: Path, command: Sequence[str] = ("mirror",)) -> None:
        self.stdout_path = log_dir / "mirror.stdout"
        self.stderr_path = log_dir / "mirror.stderr"
        self._out = open(self.stdout_path, "w")  # files: a full pipe would block the child
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mm", command[0], "-c", str(config), *command[1:]],
            cwd=config.parent,
            env=mm_env(),
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,
        )

    final_output = ""  # the whole output once stopped (see running_job)

    def output(self) -> str:
        self._out.flush()
        self._err.flush()
        return self.stdout_path.read_text() + self.stderr_path.read_text()

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM the CLI; returns its exit code, or None if it had to be killed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        kill_group(self.proc)
        if self.proc.poll() is None:
            self.proc.wait(30)
        self._out.close()
        self._err.close()


@contextmanager
def running_job(
    config: Path, log_dir: Path, command: Sequence[str] = ("mirror",)
) -> Iterator[ContinuousMirror]:
    """A :class:`ContinuousMirror` for the ``with`` body; then SIGTERM, and (the body
    having passed) exit 0 and no traceback in its output, kept as ``final_output``."""
    job = ContinuousMirror(config, log_dir, command)
    try:
        yield job
    finally:
        rc = job.terminate()
        job.final_output = job.output()
        job.close()
    assert rc == 0, job.final_output[-6000:]
    assert "Traceback" not in job.final_output, job.final_output[-6000:]


# --- admin ---------------------------------------------------------------------------


def create_topic(
    bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None
) -> None:
    if not _NAME.fullmatch(topic.replace(".", "-")):
        raise ValueError(f"keep test topic names simple: {topic!r}")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, -1, config=dict(config or {}))])[topic]
    fut.result(30)
    deadline = time.monotonic() + 30
    while partition_count(bootstrap, topic) != partitions:
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic} not visible with {partitions} partitions")
        time.sleep(0.1)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until the cluster no longer lists it, or lists a new
    topic of that name (a running mirror may create the target topic again within
    milliseconds: that is the deletion seen, not a failure to delete)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    before = _topic_id(admin, topic)
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 30
    while partition_count(bootstrap, topic) is not None:
        now = _topic_id(admin, topic)
        if before is not None and now is not None and now != before:
            return
        assert time.monotonic() < deadline, f"{topic} still listed 30 s after its deletion"
        time.sleep(0.2)


def _topic_id(admin: AdminClient, topic: str) -> str | None:
    """``topic``'s ID, or None when it is not listed or the broker gives none."""
    try:
        described = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    except KafkaException:
        return None
    found = str(described.topic_id) if described.topic_id is not None else None
    return None if found in (None, "AAAAAAAAAAAAAAAAAAAAAA") else found


def partition_count(bootstrap: str, topic: str) -> int | None:
    """Partitions of ``topic``, or None when it does not exist."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return len(t.partitions)


def topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str | None, int]]:
    """{name: (value, ConfigSource value)} as the broker describes ``topic``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(30)
    return {name: (e.value, e.source) for name, e in entries.items()}


# --- reading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    """A record as a consumer sees it; ``content`` is what a mirror must preserve."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None
    timestamp_type: int
    timestamp: int

    @property
    def content(self) -> tuple[Any, ...]:
        return (self.key, self.value, self.headers, self.timestamp_type, self.timestamp)


def read_partition(
    bootstrap: str,
    topic: str,
    partition: int,
    *,
    start: int = 0,
    isolation: str = "read_committed",
    timeout: float = 60.0,
) -> list[Rec]:
    """Every record of ``topic[partition]`` from ``start`` to the end readable now."""
    read = read_partitions(
        bootstrap, topic, [partition], start=start, isolation=isolation, timeout=timeout
    )
    return read[partition]


def read_topic(bootstrap: str, topic: str, partitions: int | None = None) -> dict[int, list[Rec]]:
    n = partitions if partitions is not None else partition_count(bootstrap, topic)
    if n is None:
        raise AssertionError(f"topic {topic} does not exist on {bootstrap}")
    return read_partitions(bootstrap, topic, range(n))


def read_partitions(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    *,
    start: int = 0,
    isolation: str = "read_committed",
    timeout: float = 120.0,
) -> dict[int, list[Rec]]:
    """Each of ``partitions``' records from ``start`` to the end readable when the
    reader reached it, through one consumer (a consumer per partition cost about 2 s
    each: minutes at 200 partitions)."""
    wanted = sorted(set(partitions))
    out: dict[int, list[Rec]] = {p: [] for p in wanted}
    if not wanted:
        return out
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"mm-test-reader-{uuid.uuid4().hex[:8]}",  # assign() only: never joins
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    open_ = set(wanted)
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(topic, p, start) for p in wanted])
        while open_:
            if time.monotonic() > deadline:
                read = {p: len(out[p]) for p in sorted(open_)[:10]}
                raise AssertionError(
                    f"no end of {topic} partitions {sorted(open_)[:10]} within {timeout:.0f}s "
                    f"(records read: {read})"
                )
            for m in consumer.consume(10_000, 1.0):
                err = m.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(err)
                p = m.partition()
                if p not in open_:
                    continue  # read to its end already: what came after is not "now"
                if err is not None:  # its end
                    open_.discard(p)
                    consumer.pause([TopicPartition(topic, p)])
                    continue
                headers: Any = m.headers()  # a list of pairs from a consumer
                ts_type, ts = m.timestamp()
                out[p].append(
                    Rec(
                        m.offset() or 0,
                        m.key(),
                        m.value(),
                        tuple(headers) if headers is not None else None,
                        ts_type,
                        ts,
                    )
                )
    finally:
        consumer.close()
    return out


def read_topic_committed(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Rec]]:
    """:func:`read_topic` as Apache Kafka would serve it: the stored log, markers
    included, under the read_committed rule. Tansu's last stable offset can stay
    below transactions that committed when transactions of several producers
    overlap on one partition (the target's offset-syncs topic), so a consumer there
    sees nothing past that point although every marker says COMMIT."""
    out: dict[int, list[Rec]] = {}
    for p in range(partitions):
        out[p] = [
            Rec(r.offset, r.key, r.value, r.headers or None, r.timestamp_type, r.timestamp)
            for r in committed_view(read_log(bootstrap, topic, p)).records
        ]
    return out


CREATE_TIME = 1  # confluent-kafka's TIMESTAMP_CREATE_TIME


def contents(records: Iterable[Rec]) -> list[tuple[Any, ...]]:
    return [r.content for r in records]


def expected_contents(source: Iterable[Rec], create_time: bool = False) -> list[tuple[Any, ...]]:
    """What the target must hold of ``source``; ``create_time``: stamped as CreateTime."""
    out = contents(source)
    return [(*c[:3], CREATE_TIME, c[4]) for c in out] if create_time else out


def assert_same_records(
    source: dict[int, list[Rec]], target: dict[int, list[Rec]], *, target_create_time: bool = False
) -> None:
    """Per partition, the target holds exactly the source's records, in order.

    ``target_create_time``: the source topic stamps its records at append
    (``message.timestamp.type = LogAppendTime``, which the mirror does not copy, as MM2):
    the target's records carry the same timestamps as CreateTime."""
    assert sorted(target) == sorted(source), "partition sets differ"
    for p in sorted(source):
        src, tgt = expected_contents(source[p], target_create_time), contents(target[p])
        if src == tgt:
            continue
        first = next(
            (i for i, (a, b) in enumerate(zip(src, tgt, strict=False)) if a != b),
            min(len(src), len(tgt)),
        )
        raise AssertionError(
            f"partition {p}: source has {len(src)} records, target {len(tgt)}; first "
            f"difference at index {first}: source "
            f"{src[first] if first < len(src) else '<end>'!r}, target "
            f"{tgt[first] if first < len(tgt) else '<end>'!r}"
        )


def describe_log(bootstrap: str, topic: str, partition: int, near: int | None = None) -> str:
    """What the stored log of ``topic[partition]`` holds, markers included: tells a
    partition a consumer sees empty because nothing was written from one whose
    records sit behind an open transaction or an abort marker. Lists 40 batches:
    the first ones, or those around offset ``near``."""
    log = read_log(bootstrap, topic, partition)
    view = committed_view(log)
    at = 0
    if near is not None:
        at = next((i for i, b in enumerate(log.batches) if b.last_offset >= near), 0)
        at = max(0, at - 20)
    kinds = []
    for b in log.batches[at : at + 40]:
        if b.control:
            kind = "ABORT" if b.abort else "COMMIT"
        else:
            kind = "txn" if b.transactional else "plain"
        kinds.append(
            f"{b.base_offset}-{b.last_offset}:{kind}:pid{b.producer_id}e{b.producer_epoch}"
        )
    return (
        f"{topic}[{partition}] stored: high watermark {log.high_watermark}, last stable offset "
        f"{log.last_stable_offset}, {len(log.batches)} batches; read_committed by the markers: "
        f"{len(view.records)} records, {view.committed_txns} committed and {view.aborted_txns} "
        f"aborted transactions, {view.open_records} records in open transactions; batches "
        f"{at}..{at + len(kinds) - 1}: {' '.join(kinds)}"
    )


def wait_for_records(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: dict[int, list[Rec]],
    timeout: float,
    *,
    target_create_time: bool = False,
) -> dict[int, list[Rec]]:
    """Poll ``topic`` until it holds ``expected``'s contents (or the deadline passes);
    ``target_create_time`` as in :func:`assert_same_records`."""
    deadline = time.monotonic() + timeout
    got: dict[int, list[Rec]] = {}
    while True:
        if partition_count(bootstrap, topic) == partitions:
            got = read_topic(bootstrap, topic, partitions)
            if all(
                contents(got[p]) == expected_contents(expected[p], target_create_time)
                for p in expected
            ):
                return got
        if time.monotonic() > deadline:
            counts = {p: len(v) for p, v in got.items()}
            want = {p: len(v) for p, v in expected.items()}
            raise AssertionError(
                f"{topic} not complete within {timeout:.0f}s: records {counts}, want {want}"
            )
        time.sleep(1.0)


# --- producing ----------------------------------------------------------------------------

OLD_TS = 946_684_800_000  # 2000-01-01
OLDER_TS = 631_152_000_000  # 1990-01-01


@dataclass
class MixedData:
    """What :func:`produce_mixed` wrote, besides what the source now holds."""

    aborted_values: set[bytes]


def _deliver_or_raise(err: KafkaError | None, _msg: Any) -> None:
    if err is not None:
        raise KafkaException(err)


def produce_mixed(bootstrap: str, topic: str, partitions: int, tag: str = "") -> MixedData:
    """Records that exercise everything a mirror must keep, on every partition.

    Headers (order, duplicate keys, null values), null and empty keys and values,
    tombstones, explicit old and new timestamps out of order, and transactional
    gaps: committed transactions interleaved with plain produces (a commit
    marker takes an offset) plus one aborted transaction (aborted while still
    buffered in the client). ``tag`` keeps values unique across calls.
    """
    now = int(time.time() * 1000)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    txn = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"mm-test-{topic}-{uuid.uuid4().hex[:8]}",
            # long linger: records of the aborted transaction are still buffered at abort
            "linger.ms": 10_000,
        }
    )
    txn.init_transactions(30)

    def send(p: int, i: int, phase: str, **kw: Any) -> None:
        value = kw.pop("value", f"{tag}{phase}-{p}-{i}".encode())
        plain.produce(topic, value, partition=p, on_delivery=_deliver_or_raise, **kw)

    aborted: set[bytes] = set()
    for p in range(partitions):
        send(p, 0, "plain", key=b"k-a", headers=[("a", b"1"), ("a", b"2"), ("b", None)])
        send(p, 1, "plain", key=None, timestamp=OLD_TS + p)
        send(p, 2, "plain", key=b"k-a", value=None)  # tombstone
        send(p, 3, "plain", key=b"", value=b"", headers=[("empty", b"")])
        send(p, 4, "plain", key=b"k-b", timestamp=now - 3_600_000)
        send(p, 5, "plain", key=b"k-b", timestamp=OLDER_TS)  # older than the one before
        send(p, 6, "plain", key=None, value=None, headers=[("only", b"header")])
    plain.flush(30)
    for round_ in range(3):
        txn.begin_transaction()
        for p in range(partitions):
            for i in range(4 + round_):
                txn.produce(
                    topic,
                    f"{tag}txn{round_}-{p}-{i}".encode(),
                    f"k-t{i % 2}".encode(),
                    partition=p,
                    timestamp=(OLD_TS if i % 2 else now) + i,
                    headers=[("txn", str(round_).encode()), ("txn", b"again")],
                )
        txn.commit_transaction(30)
        for p in range(partitions):
            send(p, 10 + round_, "plain", key=f"k-{round_}".encode(), timestamp=now - round_)
        plain.flush(30)
        if round_ == 1:
            txn.begin_transaction()
            for p in range(partitions):
                for i in range(3):
                    v = f"{tag}aborted-{p}-{i}".encode()
                    aborted.add(v)
                    txn.produce(topic, v, b"k-x", partition=p)
            txn.abort_transaction(30)
    # a last transaction on only some partitions, then plain records after it
    txn.begin_transaction()
    for p in range(0, partitions, 2):
        txn.produce(topic, f"{tag}txn-last-{p}".encode(), None, partition=p, timestamp=OLD_TS)
    txn.commit_transaction(30)
    for p in range(partitions):
        send(p, 20, "plain", key=b"k-end", headers=[("z", b"last")])
    plain.flush(30)
    return MixedData(aborted)


def produce_batch(bootstrap: str, topic: str, partition: int, count: int, tag: str) -> None:
    """``count`` records in as few batches as possible (one linger'd produce):
    on Tansu, ListOffsets(latest) then reports only the last batch's base offset + 1."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 2_000,
            "batch.num.messages": max(count, 10_000),
            "batch.size": 10_000_000,
            "message.max.bytes": 10_000_000,
        }
    )
    for i in range(count):
        p.produce(
            topic,
            f"{tag}-{i}".encode(),
            f"k{i % 7}".encode(),
            partition=partition,
            on_delivery=_deliver_or_raise,
        )
    remaining = p.flush(60)
    assert remaining == 0, f"{remaining} records not delivered to {topic}[{partition}]"


def listed_end(bootstrap: str, topic: str, partition: int) -> int:
    """ListOffsets(latest) as the broker answers it (no fetch)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm-test-offsets"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1])
    finally:
        c.close()


# --- offset syncs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadSync:
    """An offset sync as read, with the mirror's "first of a transaction" header."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    txn_first: bool
    # the mirror transaction that wrote it (mm.sync header); None for other writers
    writer: str | None = None


def read_offset_syncs(bootstrap: str, topic: str) -> list[ReadSync]:
    """Every committed offset sync in the (one-partition) offset-syncs ``topic``, decoded.

    Read from the stored log under Kafka's read_committed rule (see
    :func:`read_topic_committed`): with ``offset-syncs.topic.location = target``
    the mirror's transactions of several partitions overlap on this partition.
    """
    syncs: list[ReadSync] = []
    for r in committed_view(read_log(bootstrap, topic, 0)).records:
        try:
            s = OffsetSync.from_bytes(r.key, r.value)
        except RecordDecodeError:
            # the topic is shared by the session's tests; some write garbage
            # on purpose (readers skip it, as these do)
            continue
        first, writer = sync_flags(r.headers)
        syncs.append(
            ReadSync(s.topic, s.partition, s.upstream_offset, s.downstream_offset, first, writer)
        )
    return syncs


def sync_tables(
    syncs: Iterable[ReadSync], topic: str
) -> dict[int, tuple[list[int], list[int], list[bool], list[str | None]]]:
    """Per partition of source ``topic``: (upstreams, downstreams, first of a
    transaction, writer), upstream-sorted.

    Duplicate syncs (a sync re-written after a restart) collapse; two different
    downstream offsets for one upstream offset are an error.
    """
    pairs: dict[int, dict[int, int]] = {}
    firsts: dict[int, set[int]] = {}
    writers: dict[int, dict[int, str | None]] = {}
    for s in syncs:
        if s.topic != topic:
            continue
        seen = pairs.setdefault(s.partition, {})
        prev = seen.setdefault(s.upstream_offset, s.downstream_offset)
        assert prev == s.downstream_offset, (
            f"{topic}[{s.partition}]: upstream {s.upstream_offset} synced to both "
            f"{prev} and {s.downstream_offset}"
        )
        if s.txn_first:
            firsts.setdefault(s.partition, set()).add(s.upstream_offset)
        writers.setdefault(s.partition, {})[s.upstream_offset] = s.writer
    out = {}
    for p, m in pairs.items():
        ups = sorted(m)
        first = firsts.get(p, set())
        w = writers[p]
        out[p] = (ups, [m[u] for u in ups], [u in first for u in ups], [w[u] for u in ups])
    return out


def assert_translation_exact(
    syncs: Iterable[ReadSync],
    topic: str,
    source: dict[int, list[Rec]],
    target: dict[int, list[Rec]],
) -> int:
    """Every mirrored record's source offset translates to its target offset.

    Records are matched by partition and position (source and target must hold
    the same sequence). Also checks an offset in every source gap translates to
    the next mirrored record. Returns the number of offsets checked.
    """
    tables = sync_tables(syncs, topic)
    checked = 0
    for p, src in source.items():
        tgt = target[p]
        assert contents(src) == contents(tgt), f"{topic}[{p}] differs; cannot match offsets"
        if not src:
            continue
        assert p in tables, f"no offset syncs for {topic}[{p}]"
        ups, downs, first, by = tables[p]
        wrong = []
        for i, (s, t) in enumerate(zip(src, tgt, strict=True)):
            got = translate_offset(ups, downs, s.offset, first, by)
            if got != t.offset:
                wrong.append((s.offset, t.offset, got))
            checked += 1
            # an offset inside a source gap (marker, aborted record) before s
            if i > 0 and s.offset - src[i - 1].offset > 1:
                gap = s.offset - 1
                got = translate_offset(ups, downs, gap, first, by)
                if got != t.offset:
                    wrong.append((gap, t.offset, got))
                checked += 1
        # past the last mirrored record: one past its target offset
        after = src[-1].offset + 1
        got = translate_offset(ups, downs, after, first, by)
        if got != tgt[-1].offset + 1:
            wrong.append((after, tgt[-1].offset + 1, got))
        checked += 1
        assert not wrong, (
            f"{topic}[{p}]: (source offset, target offset, translated) wrong for "
            f"{len(wrong)} offsets: {wrong[:10]}; syncs {list(zip(ups, downs, strict=True))[:40]}"
        )
    return checked


def topic_planner(
    source: str, target: str, props: dict[str, str], *, sync_configs: bool = False
) -> TopicMirrorPlanner:
    """The topic planner of flow A->B from ``source`` to ``target`` (bootstrap servers),
    with the flow's ``props`` (MM2 keys)."""
    flow = build_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": source,
            "B.bootstrap.servers": target,
            "A->B.enabled": "true",
            **props,
        }
    ).flow("A", "B")
    return TopicMirrorPlanner(
        {"bootstrap.servers": source},
        {"bootstrap.servers": target},
        topic_filter=flow.topic_filter,
        config_filter=flow.config_property_filter,
        policy=flow.policy(),
        source_alias="A",
        target_alias="B",
        replication_factor=-1,
        sync_configs=sync_configs,
        sync_configs_interval=flow.sync_topic_configs_interval_seconds,
        use_defaults_from=flow.use_defaults_from,
        log=get_logger("test"),
    )
