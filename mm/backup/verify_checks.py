"""`mm backup verify`'s checks of one partition (pure).

The I/O side (:mod:`mm.backup.verify`) gathers the facts (:class:`PartitionFacts`):
the committed catalog (or why it does not load), what reading each visible
segment file in full showed (:class:`SegmentScan`, rows tallied by
:class:`RowTally`), the catalog rebuilt from the files (:mod:`mm.backup.rebuild`,
or why it cannot be), and leftover temporary files. :func:`judge_partition` turns
them into problems (the backup is inconsistent: exit 1) and warnings.

What is a problem:

* the catalog does not load, or breaks its invariants (overlapping segments, a
  hole between visible segments that is not a recorded lost range: the catalog
  refuses to load, so coverage is checked there);
* segment files exist but no catalog does (a lost catalog: ``rebuild-index``);
* a visible segment's file is missing or not readable in full;
* its key, footer and catalog entry disagree (range, record count, timestamps,
  lost range; size in bytes);
* its rows' offsets are not strictly increasing inside ``[start, end]``, their
  number is not the footer's record count, or the offsets without a row are not
  exactly the footer's gaps; the rows' timestamps are not the footer's min/max;
* the index cannot be rebuilt from the files, or differs from the committed
  catalog on a segment the catalog lists as visible.

Warnings: segment files at a final key that the catalog does not list (stray:
``rebuild-index`` would adopt them unless a higher level covers them), files of
segments the catalog says are deleted, leftover ``_tmp`` files of interrupted
writes. Copies in flight (``COPY_SEGMENT_STARTED``) are named, neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mm.backup.catalog import DELETED, DELETING, STARTED, PartitionCatalog, SegmentEntry
from mm.backup.catalog_diff import entry_changes
from mm.backup.errors import LayoutError
from mm.backup.layout import parse_segment_key
from mm.backup.ranges import Range
from mm.backup.rebuild import Rebuilt
from mm.backup.segment import SegmentMeta


class RowTally:
    """Counts a segment's rows as they are read: offsets' order and range, the
    offsets of ``[start, end]`` without a row, the timestamps' min and max."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end
        self.rows = 0
        self.offsets_error: str | None = None
        self._gaps: list[Range] = []
        self._expected = start  # the next offset with no gap before it
        self.min_timestamp: int | None = None
        self.max_timestamp: int | None = None

    def add(self, offset: int, timestamp: int) -> None:
        self.rows += 1
        if timestamp >= 0:  # -1: the record has no timestamp (the footer's rule)
            lo, hi = self.min_timestamp, self.max_timestamp
            self.min_timestamp = timestamp if lo is None else min(lo, timestamp)
            self.max_timestamp = timestamp if hi is None else max(hi, timestamp)
        if self.offsets_error is not None:
            return  # the gaps mean nothing after the first bad offset
        if offset < self._expected or offset > self.end:
            why = "out of order" if self.start <= offset <= self.end else "outside"
            self.offsets_error = (
                f"row {self.rows} has offset {offset}, {why} (expected strictly increasing "
                f"offsets inside {self.start}-{self.end}, the next one >= {self._expected})"
            )
            return
        if offset > self._expected:
            self._gaps.append((self._expected, offset - 1))
        self._expected = offset + 1

    @property
    def gaps(self) -> tuple[Range, ...]:
        tail = [(self._expected, self.end)] if self._expected <= self.end else []
        return tuple(self._gaps + tail)


@dataclass(frozen=True)
class SegmentScan:
    """What reading one segment file in full showed."""

    path: str  # the file's full path
    size_bytes: int | None  # None: no file at the key
    meta: SegmentMeta | None = None  # None: the footer could not be read (``error``)
    error: str | None = None  # the file could not be read in full: why
    rows: int = 0
    offsets_error: str | None = None
    gaps: tuple[Range, ...] = ()  # offsets of the footer's [start, end] without a row
    min_timestamp: int | None = None
    max_timestamp: int | None = None

    @classmethod
    def of_tally(
        cls, path: str, size_bytes: int, meta: SegmentMeta, tally: RowTally
    ) -> SegmentScan:
        return cls(
            path,
            size_bytes,
            meta,
            None,
            tally.rows,
            tally.offsets_error,
            tally.gaps,
            tally.min_timestamp,
            tally.max_timestamp,
        )


@dataclass(frozen=True)
class PartitionFacts:
    topic: str
    partition: int
    version: int  # the committed catalog's version (0: none)
    catalog: PartitionCatalog | None  # None: it does not load (``catalog_error``)
    catalog_error: str | None = None
    scans: Mapping[str, SegmentScan] = field(default_factory=dict)  # visible entries' keys
    rebuilt: Rebuilt | None = None  # None: not rebuildable (``rebuild_error``)
    rebuild_error: str | None = None
    temp_files: tuple[str, ...] = ()  # leftover files of interrupted writes


@dataclass(frozen=True)
class PartitionVerdict:
    topic: str
    partition: int
    version: int
    segments: int  # visible segments checked
    records: int  # rows read
    bytes_checked: int  # size of the files read
    first_offset: int | None
    last_offset: int | None
    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    in_flight: tuple[str, ...]  # keys of copies started and not finished

    @property
    def ok(self) -> bool:
        return not self.problems


def _ranges(rs: tuple[Range, ...]) -> str:
    return "[" + ", ".join(f"{a}-{b}" for a, b in rs) + "]"


def check_segment(entry: SegmentEntry, scan: SegmentScan) -> list[str]:
    """Problems of one visible segment: its file, footer, rows and catalog entry."""
    where = f"segment {entry.key}"
    if scan.size_bytes is None:
        return [f"{where}: file missing at {scan.path} (the catalog lists it as visible)"]
    if scan.error is not None or scan.meta is None:
        return [f"{where}: not readable in full: {scan.error or 'no footer'}"]
    m = scan.meta
    out = []
    try:
        k = parse_segment_key(scan.path)
        named = (k.ref.topic, k.ref.partition, k.level, k.start, k.end)
        listed = (m.topic, m.partition, entry.level, entry.start, entry.end)
        if named != listed:
            out.append(
                f"{where}: its key names topic, partition, level, start, end = {named}, "
                f"the catalog and footer say {listed}"
            )
    except LayoutError as exc:
        out.append(f"{where}: {exc}")
    footer = {
        "start": m.start,
        "end": m.end,
        "record_count": m.record_count,
        "min_timestamp": m.min_timestamp,
        "max_timestamp": m.max_timestamp,
        "lost_before": m.lost_before,
        "size_bytes": scan.size_bytes,
    }
    for name, value in footer.items():
        if getattr(entry, name) != value:
            source = "file" if name == "size_bytes" else "footer"
            out.append(
                f"{where}: the catalog says {name} {getattr(entry, name)!r}, the {source} "
                f"says {value!r}"
            )
    if scan.offsets_error is not None:
        out.append(f"{where}: {scan.offsets_error}")
    if scan.rows != m.record_count:
        out.append(f"{where}: holds {scan.rows} rows, its footer says {m.record_count} records")
    if scan.offsets_error is None and scan.gaps != m.gaps:
        out.append(
            f"{where}: the offsets without a row are {_ranges(scan.gaps)}, the footer's gaps "
            f"are {_ranges(m.gaps)} (expected them to be the same)"
        )
    seen = (scan.min_timestamp, scan.max_timestamp)
    if seen != (m.min_timestamp, m.max_timestamp):
        out.append(
            f"{where}: the rows' timestamps span {seen}, the footer says "
            f"{(m.min_timestamp, m.max_timestamp)}"
        )
    return out


def compare_rebuilt(
    catalog: PartitionCatalog, rebuilt: Rebuilt, missing: set[str]
) -> tuple[list[str], list[str]]:
    """(problems, warnings) from the index rebuilt from the files against the
    committed catalog (settled: copies and deletes in flight are what the files
    cannot show). ``missing``: visible keys whose file is missing (reported already)."""
    problems: list[str] = []
    warnings: list[str] = []
    listed = {e.key: e for e in catalog.entries}
    visible = {e.key: e for e in catalog.visible()}
    files = {e.key: e for e in rebuilt.catalog.visible()}
    shadowed = set(rebuilt.shadowed)
    for key in sorted(visible.keys() - files.keys() - missing):
        if key in shadowed:
            problems.append(
                f"segment {key}: the catalog lists it as visible, but a higher-level file not "
                "in the catalog covers it (rebuild-index would drop it)"
            )
        else:
            problems.append(f"segment {key}: visible in the catalog, absent from the rebuilt index")
    for key in sorted(visible.keys() & files.keys()):
        change = entry_changes(visible[key], files[key])
        if change is not None:
            problems.append(f"the index rebuilt from the files differs: {change.describe()}")
    for key in sorted((files.keys() | shadowed) - visible.keys()):
        state = listed[key].state if key in listed else None
        if state in (STARTED, DELETING):
            continue  # in flight: the catalog already says what happens to it
        if state is DELETED:
            warnings.append(f"file of a segment the catalog says is deleted is still there: {key}")
        elif key in shadowed:
            warnings.append(
                f"stray segment file not in the catalog: {key} (a higher level covers it)"
            )
        else:
            warnings.append(
                f"stray segment file not in the catalog: {key} (rebuild-index would list it)"
            )
    return problems, warnings


def judge_partition(facts: PartitionFacts) -> PartitionVerdict:
    problems: list[str] = []
    warnings = [
        f"leftover temporary file of an interrupted write: {p} (safe to delete when no "
        "backup, compaction or rebuild-index runs)"
        for p in facts.temp_files
    ]
    cat = facts.catalog
    visible = cat.visible() if cat is not None else ()
    if cat is None:
        problems.append(
            f"catalog version {facts.version} does not load: {facts.catalog_error} "
            "(`mm backup rebuild-index` rebuilds it from the segment files)"
        )
    elif facts.version == 0 and facts.rebuilt is not None and facts.rebuilt.catalog.visible():
        problems.append(
            f"no catalog, but {len(facts.rebuilt.catalog.visible())} segment files: "
            "`mm backup rebuild-index` rebuilds it from them"
        )
    scans = [facts.scans.get(e.key) for e in visible]
    for e, scan in zip(visible, scans, strict=True):
        if scan is None:
            problems.append(f"segment {e.key}: not checked (no scan of it)")
            continue
        problems += check_segment(e, scan)
    if facts.rebuilt is None:
        problems.append(f"the index cannot be rebuilt from the files: {facts.rebuild_error}")
    elif cat is not None and not (facts.version == 0 and facts.rebuilt.catalog.visible()):
        missing = {e.key for e, s in zip(visible, scans, strict=True) if s and s.size_bytes is None}
        more_problems, more_warnings = compare_rebuilt(cat, facts.rebuilt, missing)
        problems += more_problems
        warnings += more_warnings
    return PartitionVerdict(
        topic=facts.topic,
        partition=facts.partition,
        version=facts.version,
        segments=len(visible),
        records=sum(s.rows for s in scans if s is not None),
        bytes_checked=sum(s.size_bytes or 0 for s in scans if s is not None),
        first_offset=visible[0].start if visible else None,
        last_offset=visible[-1].end if visible else None,
        problems=tuple(problems),
        warnings=tuple(warnings),
        in_flight=tuple(e.key for e in cat.in_state(STARTED)) if cat is not None else (),
    )
