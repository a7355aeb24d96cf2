"""Rebuilding a partition's catalog from its segment files alone.

For a lost or damaged catalog, and to check one. The partition's directory is
listed (files under ``_tmp`` and names starting with ``_`` or ``.`` are skipped:
unfinished writes and hidden files); every other file must be a segment key
whose footer (:func:`mm.backup.segment.read_segment_meta`) agrees with its name.

**Overlaps**: a compaction writes its level-``n+1`` segment before the level-``n``
segments it replaces are deleted, so both may be present. The rule: the highest
level wins. Segments are taken from the highest level down, and one that
lies inside a segment already taken is left out (reported in ``shadowed``: a
compaction covers whole lower-level segments). A partial overlap, or a hole no
lost range explains, means the store is inconsistent:
:class:`~mm.backup.errors.CatalogError`.

What the files cannot show: copies in flight (their files are in ``_tmp``), and
deleted segments (their files are gone). So for a store with no operation in
flight, ``rebuild_catalog(...).catalog == committed.settled()`` (which equals the
committed catalog once deleted entries are forgotten).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import pyarrow.fs as pafs

from mm.backup.catalog import FINISHED, PartitionCatalog, SegmentEntry
from mm.backup.errors import CatalogError, SegmentFormatError
from mm.backup.layout import PartitionRef, SegmentKey, is_temp_key, parse_segment_key
from mm.backup.segment import SegmentMeta, StoredSegment, read_segment_meta


def segment_entry(stored: StoredSegment) -> SegmentEntry:
    """The catalog entry (finished) of a segment stored at its key."""
    m = stored.meta
    return SegmentEntry(
        level=stored.key.level,
        start=m.start,
        end=m.end,
        key=stored.key.relative,
        record_count=m.record_count,
        size_bytes=stored.size_bytes,
        min_timestamp=m.min_timestamp,
        max_timestamp=m.max_timestamp,
        state=FINISHED,
        lost_before=m.lost_before,
    )


@dataclass(frozen=True)
class Rebuilt:
    catalog: PartitionCatalog
    shadowed: tuple[str, ...]  # keys of segments a higher level covers (to delete)


def _check_meta(path: str, key: SegmentKey, meta: SegmentMeta) -> None:
    want = (key.ref.topic, key.ref.partition, key.start, key.end)
    have = (meta.topic, meta.partition, meta.start, meta.end)
    if have != want:
        raise SegmentFormatError(
            f"{path}: metadata says topic, partition, start, end = {have}, expected {want} "
            "from its key"
        )


def list_segments(fs: pafs.FileSystem, ref: PartitionRef) -> list[tuple[SegmentKey, int]]:
    """The partition's segment files (key, size in bytes), in no particular order."""
    selector = pafs.FileSelector(ref.directory, recursive=True, allow_not_found=True)
    found = []
    for info in fs.get_file_info(selector):
        if not info.is_file or is_temp_key(info.path) or info.base_name[:1] in ("_", "."):
            continue
        key = parse_segment_key(info.path)
        if key.ref != ref:
            raise SegmentFormatError(f"{info.path}: listed under {ref.directory}, names {key.ref}")
        found.append((key, info.size or 0))
    return found


def rebuild_catalog(fs: pafs.FileSystem, ref: PartitionRef) -> Rebuilt:
    stored = []
    for key, size in list_segments(fs, ref):
        meta = read_segment_meta(fs, key.key)
        _check_meta(key.key, key, meta)
        stored.append(StoredSegment(key, meta, size))
    # highest level first; within a level by offset
    stored.sort(key=lambda s: (-s.key.level, s.key.start))
    taken: list[tuple[int, int]] = []  # (start, end), sorted, disjoint
    entries: list[SegmentEntry] = []
    shadowed: list[str] = []
    for s in stored:
        start, end = s.key.start, s.key.end
        i = bisect_left(taken, (start, end))
        near = [taken[j] for j in (i - 1, i) if 0 <= j < len(taken)]
        if any(a <= start and end <= b for a, b in near):
            shadowed.append(s.key.relative)
            continue
        clash = [(a, b) for a, b in near if a <= end and start <= b]
        if clash:
            raise CatalogError(
                f"{s.key}: covers {start}-{end}, which partly overlaps the higher-level "
                f"segment(s) {clash}: expected a compaction's segment to cover whole "
                "lower-level segments"
            )
        taken.insert(i, (start, end))
        entries.append(segment_entry(s))
    catalog = PartitionCatalog(ref.region, ref.topic, ref.partition, tuple(entries))
    return Rebuilt(catalog, tuple(sorted(shadowed)))
