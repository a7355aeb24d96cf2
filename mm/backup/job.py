"""A whole `mm backup --once` pass, and `mm backup ls` (the I/O around the pure parts).

A pass, on the driver unless said otherwise:

1. the cluster's topics (metadata), kept by ``backup.topics`` /
   ``backup.topics.exclude``; their partitions' leaders;
2. the committed offsets of the groups ``backup.groups`` selects, on those
   topics (read *before* the log ends, so every saved offset is at most the end
   this pass backs up to);
3. each partition's (log start, read_committed end), read as the cluster's broker
   profile says (:func:`mm.kafka.watermarks.watermarks`);
4. each partition's catalog: copies a crashed run left ``COPY_SEGMENT_STARTED``
   are aborted and their files deleted (:func:`recover_partition`); the visible
   segments say where the backup stands;
5. one range per partition with new data (:mod:`mm.backup.plan`), copied in
   Spark Python tasks, one task per range (:mod:`mm.backup.task`): records go
   from the broker to the Parquet files inside the worker; only small summaries
   come back to the driver;
6. the group offsets saved as JSON lines (:mod:`mm.backup.groups`).

One backup job per cluster and region at a time: the catalog's versioned
commits make a second writer of a partition fail (``ConcurrentCommitError``)
instead of corrupting it, but recovery (step 4) takes any started copy for a
crashed one.
"""

from __future__ import annotations

import functools
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from mm.backup.catalog import STARTED, PartitionCatalog
from mm.backup.groups import GroupOffset, encode_group_offsets, group_offsets_key
from mm.backup.layout import CATALOG_DIR, PartitionRef, check_topic, topic_dirs
from mm.backup.listing import PartitionListing, partition_listing
from mm.backup.plan import PartitionPlan, plan_backup, select_topics
from mm.backup.settings import BackupSettings, CommittedFilter, backup_settings
from mm.backup.storage import Storage, open_storage
from mm.backup.task import RangeSummary, RangeTask, TaskContext, backup_range
from mm.backup.topics import describe_topics, write_topic_meta
from mm.config import MirrorConfig
from mm.spark_tasks import map_tasks, run_python_tasks

Key = tuple[str, int]


@dataclass(frozen=True)
class PartitionRow:
    """One partition of a pass: what was planned and what the task did."""

    plan: PartitionPlan
    summary: RangeSummary | None  # None: nothing to copy, or a planning problem

    @property
    def error(self) -> str | None:
        return self.plan.problem or (self.summary.error if self.summary else None)

    @property
    def reached(self) -> int:
        """Where the backup stands after the pass."""
        return self.summary.next_offset if self.summary else self.plan.start

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {
            "topic": self.plan.topic,
            "partition": self.plan.partition,
            "from": self.plan.start,
            "to": self.reached,
            "end": self.plan.end,
            "records": s.records if s else 0,
            "segments": s.segments if s else 0,
            "lost": s.lost if s else 0,
            "lost_unrecorded": s.lost_unrecorded if s else 0,
            "aborted_dropped": s.aborted_dropped if s else 0,
            "error": self.error,
        }


@dataclass
class BackupReport:
    cluster: str
    region: str
    path: str
    committed_filter: str
    rows: list[PartitionRow] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  # aborted started copies
    groups_key: str | None = None
    group_offsets: int = 0
    group_errors: dict[str, str] = field(default_factory=dict)
    spark_tasks: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.group_errors and all(r.error is None for r in self.rows)

    def totals(self) -> dict[str, int]:
        return {
            "partitions": len(self.rows),
            "records": sum(r.summary.records for r in self.rows if r.summary),
            "segments": sum(r.summary.segments for r in self.rows if r.summary),
            "lost": sum(r.summary.lost for r in self.rows if r.summary),
            "failed": sum(1 for r in self.rows if r.error is not None),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "cluster": self.cluster,
            "region": self.region,
            "path": self.path,
            "committed_filter": self.committed_filter,
            "seconds": round(self.seconds, 3),
            "spark_tasks": self.spark_tasks,
            "recovered": list(self.recovered),
            "groups": {
                "key": self.groups_key,
                "offsets": self.group_offsets,
                "errors": dict(self.group_errors),
            },
            "partitions": [r.to_json() for r in self.rows],
            "totals": self.totals(),
        }


def recover_partition(storage: Storage, ref: PartitionRef) -> tuple[PartitionCatalog, list[str]]:
    """The partition's catalog with every level-0 COPY_SEGMENT_STARTED entry aborted
    (and its file, if the crash left one at its key, deleted); the aborted keys.

    Higher levels are compactions' copies, which may be running: `mm backup
    compact` cleans up its own (:mod:`mm.backup.compaction`)."""
    version, catalog = storage.catalogs.load(ref)
    started = [e for e in catalog.in_state(STARTED) if e.level == 0]
    if not started:
        return catalog, []
    for e in started:
        path = f"{ref.prefix}/{e.key}"
        if storage.fs.get_file_info(path).type != pafs.FileType.NotFound:
            # moved into place before the crash, never finished: not the catalog's
            storage.fs.delete_file(path)
        catalog = catalog.abort_copy(e.key)
    storage.catalogs.commit(ref, version, catalog)
    return catalog, [e.key for e in started]


def _write(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    try:
        out = fs.open_output_stream(path)
    except FileNotFoundError:
        fs.create_dir(posixpath.dirname(path), recursive=True)
        out = fs.open_output_stream(path)
    with out:
        out.write(data)


def read_group_offsets(
    admin_conf: dict[str, str],
    settings: BackupSettings,
    topics: set[str],
    timeout: float,
) -> tuple[list[GroupOffset], dict[str, str], int]:
    """Committed offsets of the selected groups on ``topics``; errors per group; the
    time they were read (ms)."""
    from mm_client.kafka.admin import group_offsets_or_errors
    from mm_client.kafka.clients import new_admin
    from mm_client.kafka.errors import wrap

    where = f"cluster {settings.cluster}"
    admin = new_admin(admin_conf)
    try:
        listed = admin.list_consumer_groups(request_timeout=timeout).result(timeout + 5)
    except Exception as exc:
        raise wrap(exc, f"list consumer groups on {where}") from exc
    names = sorted({g.group_id for g in listed.valid if settings.group_selected(g.group_id)})
    time_ms = int(time.time() * 1000)
    found = group_offsets_or_errors(admin, names, timeout, where)
    rows: list[GroupOffset] = []
    errors: dict[str, str] = {}
    for g, result in found.items():
        if isinstance(result, Exception):
            errors[g] = str(result)
            continue
        rows += [
            GroupOffset(g, tp.topic, tp.partition, tp.offset, time_ms)
            for tp in result
            if tp.topic in topics and tp.offset >= 0
        ]
    return rows, errors, time_ms


def committed_filter(cfg: MirrorConfig, settings: BackupSettings) -> CommittedFilter:
    """The committed filter the backed-up cluster's broker profile and protocol choose
    (a ConfigError where ``raw`` cannot speak its protocol)."""
    cluster = cfg.cluster(settings.cluster)
    protocol = str(cluster.librdkafka("consumer").get("security.protocol", "PLAINTEXT"))
    return settings.resolved_filter(protocol, cluster.profile)


def task_context(cfg: MirrorConfig, settings: BackupSettings, timeout: float) -> TaskContext:
    """What every Spark task of a pass gets: the backed-up cluster's consumer settings,
    its security settings included (tasks build their own clients on the workers),
    and the committed filter (:func:`committed_filter`)."""
    consumer = cfg.cluster(settings.cluster).librdkafka("consumer")
    return TaskContext(settings.to_dict(), dict(consumer), committed_filter(cfg, settings), timeout)


def run_backup_once(
    cfg: MirrorConfig,
    *,
    timeout: float = 60.0,
    spark_factory: Callable[[], Any] | None = None,
) -> BackupReport:
    """One pass (see the module docstring); Spark starts only when there is data."""
    from mm.kafka.watermarks import watermarks
    from mm.verify.reads import cluster_meta

    started = time.monotonic()
    settings = backup_settings(cfg)
    ctx = task_context(cfg, settings, timeout)
    consumer, mode = ctx.consumer, ctx.committed_filter
    admin = cfg.cluster(settings.cluster).librdkafka("admin")
    storage = open_storage(settings.path)
    report = BackupReport(settings.cluster, settings.region, settings.path, mode)

    cluster_name = f"cluster {settings.cluster}"
    meta = cluster_meta(admin, cluster_name, timeout)
    topics = select_topics(meta.partitions, settings.topic_selected)
    offsets, report.group_errors, groups_ms = read_group_offsets(
        admin, settings, set(topics), timeout
    )
    # what a restore creates each topic with (written every pass: the newest wins)
    for tm in describe_topics(
        admin, {t: meta.partitions[t] for t in topics}, cluster_name, timeout
    ):
        write_topic_meta(storage.fs, storage.prefix, settings.region, tm)
    keys = [(t, p) for t in topics for p in range(meta.partitions[t])]
    bounds = watermarks(consumer, keys, timeout, profile=cfg.cluster(settings.cluster).profile)
    next_offsets: dict[Key, int | None] = {}
    for t, p in keys:
        catalog, aborted = recover_partition(
            storage, PartitionRef(storage.prefix, settings.region, t, p)
        )
        report.recovered += aborted
        next_offsets[(t, p)] = catalog.next_offset
    # the way out of a plan's problem names where the topic's backup lives
    scheme = "s3://" if isinstance(storage.fs, pafs.S3FileSystem) else ""
    plans = plan_backup(
        {t: meta.partitions[t] for t in topics},
        bounds,
        next_offsets,
        lambda t: tuple(scheme + d for d in topic_dirs(storage.prefix, settings.region, t)),
    )
    tasks = [
        RangeTask(pl.topic, pl.partition, pl.start, pl.end, meta.leaders.get(pl.key))
        for pl in plans
        if pl.has_data
    ]
    summaries = _run_tasks(cfg, ctx, tasks, spark_factory)
    by_key = {(s.topic, s.partition): s for s in summaries}
    report.rows = [PartitionRow(pl, by_key.get((pl.topic, pl.partition))) for pl in plans]
    report.spark_tasks = len(tasks)

    key = group_offsets_key(storage.prefix, settings.region, groups_ms)
    _write(storage.fs, key, encode_group_offsets(offsets))
    report.groups_key, report.group_offsets = key, len(offsets)
    report.seconds = time.monotonic() - started
    return report


def _run_tasks(
    cfg: MirrorConfig,
    ctx: TaskContext,
    tasks: list[RangeTask],
    spark_factory: Callable[[], Any] | None,
) -> list[RangeSummary]:
    return run_python_tasks(
        cfg,
        "mm-backup",
        functools.partial(backup_range, ctx.to_dict()),
        tasks,
        spark_factory,
        "partitions whose segments were committed before it keep them, the next run "
        "continues from there",
    )


def run_ranges(spark: Any, ctx: TaskContext, tasks: list[RangeTask]) -> list[RangeSummary]:
    """Every range backed up in its own Spark task; the summaries, in task order.

    The context travels as a plain dict inside the mapped function; records never
    leave the Python workers."""
    return map_tasks(spark, functools.partial(backup_range, ctx.to_dict()), tasks)


def _spark(cfg: MirrorConfig) -> Any:
    from mm.spark_session import build_spark

    return build_spark("mm-backup", cfg.spark, cfg.setting("spark.class.archive"))


# --- ls ---------------------------------------------------------------------------------


def _dirs(fs: pafs.FileSystem, path: str) -> list[str]:
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)


def catalog_refs(storage: Storage, region: str) -> list[PartitionRef]:
    """Every partition with a catalog directory under the region, by topic and partition."""
    root = f"{storage.prefix}/{CATALOG_DIR}/{region}"
    out = []
    for topic in _dirs(storage.fs, root):
        try:
            check_topic(topic)
        except ValueError:
            continue  # not a topic's catalog directory (e.g. someone's notes)
        parts = [d for d in _dirs(storage.fs, f"{root}/{topic}") if d.isdigit()]
        out += [PartitionRef(storage.prefix, region, topic, int(p)) for p in sorted(parts, key=int)]
    return out


def list_backup(cfg: MirrorConfig) -> tuple[BackupSettings, list[PartitionListing]]:
    """Every partition with a catalog under the region, from the catalogs alone."""
    settings = backup_settings(cfg)
    storage = open_storage(settings.path)
    out = []
    for ref in catalog_refs(storage, settings.region):
        _version, catalog = storage.catalogs.load(ref)
        out.append(partition_listing(catalog))
    return settings, out
