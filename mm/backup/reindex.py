"""`mm backup rebuild-index`: each partition's catalog rebuilt from its segment files
(:func:`mm.backup.rebuild.rebuild_catalog`) and committed as a new version.

The commit is a versioned one (:mod:`mm.backup.catalog_store`): a backup that
commits the partition meanwhile makes it fail instead of being overwritten. A
partition with an operation in flight (a copy started and not finished, a
delete started) is refused, naming it, unless ``force``: the files cannot show
an operation in flight, so the rebuilt catalog forgets it (a started copy's file
at its final key is complete and is listed; one in ``_tmp`` is left there).

What the rebuilt catalog holds: the highest level's segments where a compaction
left two levels (the lower ones are reported as shadowed: their files can be
deleted), no history of deleted segments. A catalog equal to the committed one
is not committed again (``unchanged``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from mm.backup.catalog import DELETING, STARTED, PartitionCatalog
from mm.backup.catalog_diff import CatalogDiff, diff_catalogs
from mm.backup.errors import BackupError
from mm.backup.inventory import stored_partitions
from mm.backup.layout import PartitionRef
from mm.backup.rebuild import rebuild_catalog
from mm.backup.settings import backup_settings
from mm.backup.storage import Storage, open_storage
from mm.config import MirrorConfig

COMMITTED = "committed"
UNCHANGED = "unchanged"
DRY_RUN = "would commit"
REFUSED = "refused"
FAILED = "failed"


@dataclass(frozen=True)
class ReindexResult:
    topic: str
    partition: int
    status: str  # COMMITTED, UNCHANGED, DRY_RUN, REFUSED or FAILED
    before_version: int
    after_version: int | None  # the committed version (None: nothing committed)
    segments: int  # visible in the rebuilt catalog
    next_offset: int | None  # where the next backup pass starts, per the rebuilt catalog
    diff: CatalogDiff | None = None
    shadowed: tuple[str, ...] = ()
    message: str | None = None  # why refused or failed; a replaced unreadable catalog

    @property
    def ok(self) -> bool:
        return self.status not in (REFUSED, FAILED)

    def to_json(self) -> dict[str, Any]:
        d = self.diff
        return {
            "topic": self.topic,
            "partition": self.partition,
            "status": self.status,
            "before_version": self.before_version,
            "after_version": self.after_version,
            "segments": self.segments,
            "next_offset": self.next_offset,
            "added": list(d.added) if d else [],
            "removed": list(d.removed) if d else [],
            "changed": [c.describe() for c in d.changed] if d else [],
            "shadowed": list(self.shadowed),
            "message": self.message,
        }


def in_flight(catalog: PartitionCatalog) -> list[str]:
    return [e.key for e in catalog.entries if e.state in (STARTED, DELETING)]


def reindex_partition(
    storage: Storage, ref: PartitionRef, *, dry_run: bool = False, force: bool = False
) -> ReindexResult:
    def result(status: str, **kw: Any) -> ReindexResult:
        base: dict[str, Any] = {"after_version": None, "segments": 0, "next_offset": None}
        return ReindexResult(ref.topic, ref.partition, status, before, **{**base, **kw})

    before = 0
    note = None
    try:
        before = storage.catalogs.latest_version(ref)
        before, committed = storage.catalogs.load(ref)
    except BackupError as exc:
        # a damaged catalog is what this command is for: replaced, and said so
        note = f"the committed catalog (version {before}) did not load and is replaced: {exc}"
        committed = PartitionCatalog(ref.region, ref.topic, ref.partition)
    except OSError as exc:
        return result(FAILED, message=f"{ref}: the catalog cannot be read: {exc}")
    busy = in_flight(committed)
    if busy and not force:
        return result(
            REFUSED,
            message=f"{ref}: operations in flight on {busy} (a running or crashed backup or "
            "compaction); run the backup once to clean up a crashed copy, or pass --force",
        )
    try:
        rebuilt = rebuild_catalog(storage.fs, ref)
    except (OSError, BackupError) as exc:
        return result(FAILED, message=f"{ref}: the index cannot be rebuilt from the files: {exc}")
    cat = rebuilt.catalog
    common: dict[str, Any] = {
        "segments": len(cat.visible()),
        "next_offset": cat.next_offset,
        "diff": diff_catalogs(committed, cat),
        "shadowed": rebuilt.shadowed,
        "message": note,
    }
    if cat == committed and note is None:
        return result(UNCHANGED, **common)
    if dry_run:
        return result(DRY_RUN, **common)
    try:
        after = storage.catalogs.commit(ref, before, cat)
    except BackupError as exc:
        return result(FAILED, **{**common, "message": f"{ref}: commit failed: {exc}"})
    return result(COMMITTED, after_version=after, **common)


@dataclass
class ReindexReport:
    region: str
    path: str
    dry_run: bool
    partitions: list[ReindexResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "region": self.region,
            "path": self.path,
            "dry_run": self.dry_run,
            "seconds": round(self.seconds, 3),
            "partitions": [r.to_json() for r in self.partitions],
        }


def rebuild_index(
    cfg: MirrorConfig,
    topics: re.Pattern[str] | None = None,
    *,
    dry_run: bool = False,
    force: bool = False,
) -> ReindexReport:
    started = time.monotonic()
    settings = backup_settings(cfg)
    storage = open_storage(settings.path)
    report = ReindexReport(settings.region, settings.path, dry_run)
    for ref in stored_partitions(storage.fs, storage.prefix, settings.region, topics):
        report.partitions.append(reindex_partition(storage, ref, dry_run=dry_run, force=force))
    report.seconds = time.monotonic() - started
    return report
