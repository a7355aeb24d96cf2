"""What differs between two catalogs of one partition, entry by entry (pure).

Used by `mm backup verify` (the committed catalog against the one rebuilt from
the files) and `mm backup rebuild-index` (what a rebuild changes).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from mm.backup.catalog import PartitionCatalog, SegmentEntry


@dataclass(frozen=True)
class EntryChange:
    key: str
    fields: tuple[tuple[str, object, object], ...]  # (field, before, after)

    def describe(self) -> str:
        diffs = ", ".join(f"{name} {a!r} -> {b!r}" for name, a, b in self.fields)
        return f"{self.key}: {diffs}"


@dataclass(frozen=True)
class CatalogDiff:
    added: tuple[str, ...]  # keys only ``after`` lists
    removed: tuple[str, ...]  # keys only ``before`` lists
    changed: tuple[EntryChange, ...]  # keys both list, with different entries

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def entry_changes(before: SegmentEntry, after: SegmentEntry) -> EntryChange | None:
    diffs = tuple(
        (f.name, getattr(before, f.name), getattr(after, f.name))
        for f in fields(SegmentEntry)
        if getattr(before, f.name) != getattr(after, f.name)
    )
    return EntryChange(before.key, diffs) if diffs else None


def diff_entries(before: tuple[SegmentEntry, ...], after: tuple[SegmentEntry, ...]) -> CatalogDiff:
    old = {e.key: e for e in before}
    new = {e.key: e for e in after}
    changed = []
    for key in sorted(old.keys() & new.keys()):
        change = entry_changes(old[key], new[key])
        if change is not None:
            changed.append(change)
    return CatalogDiff(
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        changed=tuple(changed),
    )


def diff_catalogs(before: PartitionCatalog, after: PartitionCatalog) -> CatalogDiff:
    """Every entry, whatever its state (a state change is a changed field)."""
    return diff_entries(before.entries, after.entries)
