"""A whole `mm restore`: from the backup store into a cluster (the I/O around the pure
parts in :mod:`mm.restore.plan`).

On the driver:

1. the backed-up topics and partitions of the region, from the catalogs (a
   partition with no visible segment has nothing to restore), kept by ``--topics``;
2. the target topics: created when missing, with the partitions and configs the
   last backup pass recorded (:mod:`mm.backup.topics`; at least as many
   partitions as were backed up); an existing topic with too few partitions fails
   those partitions, naming the topic; the offset-mapping topic is created too;
3. one Spark Python task per partition (:mod:`mm.restore.task`): records go from
   the segment files to the target inside the worker, exactly once;
4. the consumer groups: the saved offsets of the backup run :func:`pick_group_snapshot`
   chooses, translated through the offset mapping (read back from the target) and
   committed on the target for groups with no member there; a group with members
   is refused, named, and left as it is.

``--dry-run`` does steps 1 and 2 without creating anything, reads the restore
positions already committed, and reports what would be restored.
"""

from __future__ import annotations

import functools
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic
from mm_client import commit_group_offsets
from mm_client.kafka.admin import describe_groups
from mm_client.kafka.clients import new_admin, new_consumer
from mm_client.kafka.errors import wrap

from mm.backup.catalog import PartitionCatalog
from mm.backup.groups import GROUPS_DIR, decode_group_offsets
from mm.backup.job import catalog_refs
from mm.backup.settings import backup_settings
from mm.backup.storage import Storage, open_storage
from mm.backup.topics import read_topic_meta
from mm.checkpoint.rules import group_is_idle
from mm.config import MirrorConfig
from mm.errors import MirrorError, UsageError
from mm.kafka.committed import reader_of
from mm.kafka.profile import BrokerProfile
from mm.restore.mapping_read import read_mapping_runs
from mm.restore.plan import (
    GroupMove,
    group_moves,
    mapping_topic,
    pick_group_snapshot,
    start_position,
    state_group,
    target_topic_name,
)
from mm.restore.task import RestoreContext, RestoreSummary, RestoreTask, restore_partition
from mm.spark_tasks import run_python_tasks

Key = tuple[str, int]


@dataclass(frozen=True)
class RestoreOptions:
    to: str  # target cluster alias
    topics: str | None = None  # regex, full match on the backed-up topic name
    until_ms: int | None = None
    groups: str | None = None  # regex, full match; None = every saved group
    topic_prefix: str = ""
    dry_run: bool = False
    timeout: float = 60.0
    replication_factor: int = -1  # the target broker's default
    transaction_records: int = 50_000  # records per transaction at most


@dataclass
class PartitionRow:
    topic: str
    partition: int
    target_topic: str
    backed_up: int  # records in the visible segments
    start: int  # original offset the restore starts (started) at
    end: int  # past the backup's last offset
    summary: RestoreSummary | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and (self.summary is None or self.summary.error is None)


@dataclass
class GroupRow:
    group: str
    moves: list[GroupMove]
    status: str  # "moved", "would move", "refused: ...", "failed: ..."

    @property
    def ok(self) -> bool:
        return self.status in ("moved", "would move")


@dataclass
class RestoreReport:
    region: str
    path: str
    target: str
    options: RestoreOptions
    rows: list[PartitionRow] = field(default_factory=list)
    created_topics: list[str] = field(default_factory=list)
    groups: list[GroupRow] = field(default_factory=list)
    groups_snapshot_ms: int | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows) and all(g.ok for g in self.groups)


def backed_up_partitions(
    storage: Storage, region: str, selected: Callable[[str], bool]
) -> dict[Key, PartitionCatalog]:
    """Every partition of the region with visible segments, by (topic, partition)."""
    out: dict[Key, PartitionCatalog] = {}
    for ref in catalog_refs(storage, region):
        if selected(ref.topic):
            _version, catalog = storage.catalogs.load(ref)
            if catalog.visible():
                out[(ref.topic, ref.partition)] = catalog
    return out


def _full_match(option: str, pattern: str | None) -> Callable[[str], bool]:
    """``--topics`` / ``--groups``: a regex matching whole names; None keeps all."""
    if pattern is None:
        return lambda _name: True
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"{option} {pattern!r} is not a regular expression: {exc}") from None
    return lambda name: rx.fullmatch(name) is not None


def restore_context(cfg: MirrorConfig, options: RestoreOptions) -> RestoreContext:
    """What every Spark task of a restore gets: the target cluster's producer and
    consumer settings, its security settings included (tasks build their own
    clients on the workers)."""
    settings = backup_settings(cfg)
    target = cfg.cluster(options.to)
    return RestoreContext(
        settings.path,
        settings.region,
        target.librdkafka("producer"),
        target.librdkafka("consumer"),
        target.librdkafka("admin"),
        options.to,
        options.until_ms,
        options.timeout,
        txn_records=options.transaction_records,
        profile=target.profile.name,
    )


def run_restore(
    cfg: MirrorConfig,
    options: RestoreOptions,
    *,
    spark_factory: Callable[[], Any] | None = None,
) -> RestoreReport:
    started = time.monotonic()
    settings = backup_settings(cfg)
    if options.to not in cfg.clusters:
        raise UsageError(
            f"--to {options.to}: no such cluster; expected one of {', '.join(cfg.clusters)} "
            "(the clusters line of the properties file)"
        )
    groups_rx = _full_match("--groups", options.groups)
    target = cfg.cluster(options.to)
    # the offset mapping is read back raw where read_committed is not exact there
    reader_of(target).check("mm restore")
    admin_conf = target.librdkafka("admin")
    consumer_conf = target.librdkafka("consumer")
    storage = open_storage(settings.path)
    report = RestoreReport(settings.region, settings.path, options.to, options)
    catalogs = backed_up_partitions(
        storage, settings.region, _full_match("--topics", options.topics)
    )
    names = {t: target_topic_name(options.topic_prefix, t) for t, _p in catalogs}
    where = f"cluster {options.to}"
    admin = new_admin(admin_conf)
    existing = _partition_counts(admin, where, options.timeout)
    committed = _positions(consumer_conf, settings.region, names, catalogs, options.timeout)
    problems = _prepare_topics(
        admin, storage, settings.region, catalogs, names, existing, options, report
    )
    for (t, p), catalog in sorted(catalogs.items()):
        start = start_position(catalog, committed.get((names[t], p), -1))
        report.rows.append(
            PartitionRow(
                t,
                p,
                names[t],
                sum(e.record_count for e in catalog.visible()),
                start,
                catalog.next_offset or 0,
                error=problems.get((t, p)),
            )
        )
    tasks = [RestoreTask(r.topic, r.partition, r.target_topic) for r in report.rows if r.ok]
    if options.dry_run:
        report.groups, report.groups_snapshot_ms = _groups(
            storage, settings.region, options, names, groups_rx, admin_conf, consumer_conf, report,
            target.profile,
        )  # fmt: skip
        report.seconds = time.monotonic() - started
        return report
    if tasks:
        _ensure_mapping_topic(admin, settings.region, where, options)
        ctx = restore_context(cfg, options)
        by_key = {(s.topic, s.partition): s for s in _run_tasks(cfg, ctx, tasks, spark_factory)}
        for row in report.rows:
            row.summary = by_key.get((row.topic, row.partition))
    report.groups, report.groups_snapshot_ms = _groups(
        storage, settings.region, options, names, groups_rx, admin_conf, consumer_conf, report,
        target.profile,
    )  # fmt: skip
    report.seconds = time.monotonic() - started
    return report


def _partition_counts(admin: Any, where: str, timeout: float) -> dict[str, int]:
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise wrap(exc, f"list topics on {where}") from exc
    return {n: len(t.partitions) for n, t in md.topics.items() if t.error is None}


def _positions(
    consumer_conf: dict[str, str],
    region: str,
    names: dict[str, str],
    catalogs: dict[Key, PartitionCatalog],
    timeout: float,
) -> dict[Key, int]:
    """The restore positions already committed on the target, per (target topic, p):
    the plan's view (the report's "from").

    Read without waiting for stable offsets (read_uncommitted: no require_stable). A
    restore killed mid-transaction leaves that transaction open until the next
    ``init_transactions`` of its id or the broker's transaction timeout, and a stable
    read would wait for it (measured on Apache Kafka: the whole default timeout, then
    an error); the last committed position is what it answers meanwhile. Each task
    fences first and reads the stable position itself (:mod:`mm.restore.task`)."""
    if not catalogs:
        return {}
    consumer = new_consumer(
        {**consumer_conf, "group.id": state_group(region), "isolation.level": "read_uncommitted"}
    )
    try:
        tps = [TopicPartition(names[t], p) for t, p in sorted(catalogs)]
        got = consumer.committed(tps, timeout)
    except KafkaException as exc:
        raise wrap(exc, f"read restore positions in group {state_group(region)}") from exc
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in got if tp.offset >= 0}


def _prepare_topics(
    admin: Any,
    storage: Storage,
    region: str,
    catalogs: dict[Key, PartitionCatalog],
    names: dict[str, str],
    existing: dict[str, int],
    options: RestoreOptions,
    report: RestoreReport,
) -> dict[Key, str]:
    """Create the missing target topics (not in a dry run); the partitions that
    cannot be restored, with why."""
    wanted: dict[str, int] = defaultdict(int)
    for t, p in catalogs:
        wanted[t] = max(wanted[t], p + 1)
    problems: dict[Key, str] = {}
    to_create = []
    for t, n in sorted(wanted.items()):
        name = names[t]
        if name in existing:
            for p in sorted(p for tt, p in catalogs if tt == t and p >= existing[name]):
                problems[(t, p)] = (
                    f"target topic {name} on {options.to} has {existing[name]} partitions, "
                    f"the backup of {t} has partition {p}: partitions are never remapped; add "
                    f"partitions to {name} or restore under another --topic-prefix"
                )
            continue
        meta = read_topic_meta(storage.fs, storage.prefix, region, t)
        partitions = max(n, meta.partitions if meta else 0)
        configs = dict(meta.configs) if meta else {}
        to_create.append(NewTopic(name, partitions, options.replication_factor, config=configs))
        report.created_topics.append(name)
    if to_create and not options.dry_run:
        from mm_client.kafka.admin import topic_created

        futures = admin.create_topics(to_create, request_timeout=options.timeout)
        for name, future in futures.items():
            try:
                topic_created(future, options.timeout)
            except KafkaException as exc:
                raise wrap(exc, f"create topic {name} on cluster {options.to}") from exc
    return problems


def _ensure_mapping_topic(admin: Any, region: str, where: str, options: RestoreOptions) -> None:
    from mm_client.kafka.admin import ensure_topic

    # kept as long as the topics it maps (a group restored later still needs it)
    ensure_topic(
        admin,
        mapping_topic(region),
        where,
        options.replication_factor,
        config={"cleanup.policy": "delete", "retention.ms": "-1"},
        timeout=options.timeout,
    )


def _run_tasks(
    cfg: MirrorConfig,
    ctx: RestoreContext,
    tasks: list[RestoreTask],
    spark_factory: Callable[[], Any] | None,
) -> list[RestoreSummary]:
    return run_python_tasks(
        cfg,
        "mm-restore",
        functools.partial(restore_partition, ctx.to_dict()),
        tasks,
        spark_factory,
        "the partitions' committed transactions stay, and running the restore again "
        "continues from them",
    )


def _snapshots(storage: Storage, region: str) -> dict[int, str]:
    root = f"{storage.prefix}/{GROUPS_DIR}/{region}"
    infos = storage.fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    out = {}
    for i in infos:
        stem = i.base_name.removesuffix(".jsonl")
        if i.type == pafs.FileType.File and stem.isdigit() and i.base_name.endswith(".jsonl"):
            out[int(stem)] = i.path
    return out


def _groups(
    storage: Storage,
    region: str,
    options: RestoreOptions,
    names: dict[str, str],
    selected: Callable[[str], bool],
    target_admin: dict[str, str],
    consumer_conf: dict[str, str],
    report: RestoreReport,
    profile: BrokerProfile,
) -> tuple[list[GroupRow], int | None]:
    """Translate and commit the saved group offsets (only report them in a dry run)."""
    snapshots = _snapshots(storage, region)
    chosen = pick_group_snapshot(snapshots, options.until_ms)
    if chosen is None:
        return [], None
    with storage.fs.open_input_stream(snapshots[chosen]) as f:
        try:
            saved = decode_group_offsets(f.read())
        except ValueError as exc:
            raise MirrorError(f"{snapshots[chosen]}: {exc}") from None
    offsets = [g for g in saved if selected(g.group) and g.topic in names]
    if not offsets:
        return [], chosen
    restored = {(r.target_topic, r.partition) for r in report.rows if r.ok}
    keys = sorted(restored)
    if options.dry_run:
        # the target offsets exist only once the records are written
        moves = [
            GroupMove(g.group, g.topic, g.partition, g.offset, names[g.topic], None, None)
            for g in sorted(offsets, key=lambda x: (x.group, x.topic, x.partition))
        ]
    else:
        ends = _high_watermarks(consumer_conf, keys, options.timeout, profile)
        runs = read_mapping_runs(
            target_admin,
            consumer_conf,
            region,
            set(keys),
            options.timeout,
            f"cluster {options.to}",
            profile,
        )
        moves = group_moves(offsets, names, runs, ends)
    by_group: dict[str, list[GroupMove]] = defaultdict(list)
    for m in moves:
        by_group[m.group].append(m)
    states = describe_groups(new_admin(target_admin), sorted(by_group), options.timeout)
    rows = []
    for group, group_moves_ in sorted(by_group.items()):
        state = states.get(group)
        todo = {(m.target_topic, m.partition): m.target_offset for m in group_moves_}
        if isinstance(state, Exception):
            rows.append(GroupRow(group, group_moves_, f"failed: {state}"))
            continue
        if state is None or not group_is_idle(state.state):
            rows.append(
                GroupRow(
                    group,
                    group_moves_,
                    f"refused: the group has members on {options.to} "
                    f"({state.state if state else 'unknown'}); stop its consumers and run "
                    "the restore again (restored records are not written twice)",
                )
            )
            continue
        if options.dry_run:
            rows.append(GroupRow(group, group_moves_, "would move"))
            continue
        if any(o is None for o in todo.values()):
            missing = [m.reason for m in group_moves_ if m.target_offset is None]
            rows.append(GroupRow(group, group_moves_, f"failed: {missing[0]}"))
            continue
        try:
            commit_group_offsets(
                target_admin,
                group,
                {k: o for k, o in todo.items() if o is not None},
                options.timeout,
                allow_rewind=True,  # the restore's plan decided these moves
            )
        except (MirrorError, KafkaException) as exc:
            rows.append(GroupRow(group, group_moves_, f"failed: {exc}"))
            continue
        rows.append(GroupRow(group, group_moves_, "moved"))
    return rows, chosen


def _high_watermarks(
    consumer_conf: dict[str, str], keys: list[Key], timeout: float, profile: BrokerProfile
) -> dict[Key, int]:
    """Each restored partition's end past its last record, read as the cluster's broker
    profile says ends are read (:func:`mm.kafka.watermarks.watermarks`; the restore's
    transactions are done, so nothing of it is above the last stable offset). An end
    read short would put a group's end below records it holds: where ListOffsets
    under-reports, a restore under load once read an end of 0."""
    from mm.kafka.watermarks import watermarks

    marks = watermarks(consumer_conf, keys, timeout, profile=profile)
    return {key: end for key, (_start, end) in marks.items()}
