"""Errors of the backup's storage side; all derive from :class:`~mm.errors.MirrorError`."""

from __future__ import annotations

from mm.errors import MirrorError


class BackupError(MirrorError):
    """Root of the errors the backup's storage code raises on purpose."""


class LayoutError(BackupError, ValueError):
    """A key or a name is not what the backup layout allows: names the key and the form."""


class SegmentFormatError(BackupError):
    """A segment file is not a readable backup segment (names the path and what is off)."""


class CatalogError(BackupError):
    """A catalog change would break one of its invariants (names which, and where)."""


class ConcurrentCommitError(CatalogError):
    """Another writer committed the partition's catalog since this one loaded it.

    The caller reloads and decides again; it must not retry blindly with its old
    catalog, which would undo the other writer's change.
    """

    def __init__(self, where: str, expected: int, found: int | None) -> None:
        self.where = where
        self.expected = expected
        self.found = found
        now = "unknown (another writer raced for it)" if found is None else str(found)
        super().__init__(
            f"catalog of {where} moved: expected version {expected} to be the latest, "
            f"found {now}; reload and retry"
        )
