"""Durable translation history: the checkpoint job's store, one JSON file per flow.

``<mm.state.dir>/checkpoint/<source>-<target>/store.json`` holds the
:class:`OffsetSyncStore` (every kept sync, the mirror positions, prune floors)
and where reading of the offset-syncs topic stopped. It is written after every
micro-batch to a temporary file in the same directory, fsynced, then renamed
over the old one (``os.replace``), so a crash leaves either the old or the new
snapshot, never a torn one.

Why it matters: on Apache Kafka the offset-syncs topic is compacted, which
keeps only the newest sync per partition; a restarted job that re-read the
topic could then translate only offsets near the head. The snapshot keeps the
history a lagging group needs.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mm.checkpoint.store import OffsetSyncStore
from mm.errors import MirrorError

FORMAT_VERSION = 1
FILE_NAME = "store.json"


@dataclass
class Snapshot:
    flow: str
    store: OffsetSyncStore = field(default_factory=OffsetSyncStore)
    # "<offset-syncs topic>:<partition>" -> next offset to read
    syncs_next: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "flow": self.flow,
            "syncs_next": dict(sorted(self.syncs_next.items())),
            "partitions": self.store.to_json(),
        }


def snapshot_dir(state_dir: Path, source: str, target: str) -> Path:
    return Path(state_dir) / "checkpoint" / f"{source}-{target}"


def save(path: Path, snap: Snapshot) -> None:
    """Write ``snap`` to ``path`` atomically (temp file + fsync + os.replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(snap.to_json(), separators=(",", ":"))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def load(path: Path, flow: str) -> Snapshot | None:
    """The snapshot at ``path``, or None when there is none. Raises MirrorError if unreadable."""
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown version {data.get('version')!r}")
        if data.get("flow") != flow:
            raise ValueError(f"snapshot of flow {data.get('flow')!r}, not {flow!r}")
        store = OffsetSyncStore.from_json(data["partitions"])
        syncs_next = {str(k): int(v) for k, v in data["syncs_next"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MirrorError(
            f"checkpoint store snapshot {path} is unreadable ({exc}); move it away to rebuild "
            "the history from the offset-syncs topic (on Apache Kafka that topic is compacted, "
            "so lagging groups may get no checkpoint until they catch up)"
        ) from exc
    return Snapshot(flow, store, syncs_next)
