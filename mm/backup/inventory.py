"""The partitions a region's backup holds: those with a catalog, and those with
segment files (a partition whose catalog was lost has only these)."""

from __future__ import annotations

import re

import pyarrow.fs as pafs

from mm.backup.errors import LayoutError
from mm.backup.layout import CATALOG_DIR, PartitionRef, check_topic
from mm.errors import UsageError

_PARTITION_DIR = re.compile(r"partition=(0|[1-9][0-9]{0,9})")


def _dirs(fs: pafs.FileSystem, path: str) -> list[str]:
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)


def _topics(fs: pafs.FileSystem, root: str) -> list[str]:
    out = []
    for name in _dirs(fs, root):
        try:
            out.append(check_topic(name))
        except LayoutError:
            continue  # not a topic's directory (someone's notes, a hidden directory)
    return out


def topic_filter(pattern: str | None) -> re.Pattern[str] | None:
    """``--topics RE`` (full match); a bad regex is a usage error."""
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--topics {pattern!r} is not a regular expression ({exc})") from None


def stored_partitions(
    fs: pafs.FileSystem, prefix: str, region: str, topics: re.Pattern[str] | None = None
) -> list[PartitionRef]:
    """Every partition of ``region`` with a catalog or a segment directory, by topic
    and partition; ``topics`` (full match) keeps some topics only."""
    found: set[tuple[str, int]] = set()
    catalogs = f"{prefix}/{CATALOG_DIR}/{region}"
    for topic in _topics(fs, catalogs):
        found |= {(topic, int(p)) for p in _dirs(fs, f"{catalogs}/{topic}") if p.isdigit()}
    segments = f"{prefix}/{region}"
    for topic in _topics(fs, segments):
        for d in _dirs(fs, f"{segments}/{topic}"):
            m = _PARTITION_DIR.fullmatch(d)
            if m:
                found.add((topic, int(m.group(1))))
    return [
        PartitionRef(prefix, region, t, p)
        for t, p in sorted(found)
        if topics is None or topics.fullmatch(t)
    ]
