"""Durable translation history: the checkpoint job's store, one JSON file per flow.

``<mm.state.dir>/checkpoint/<source>-<target>/store.json`` holds the
:class:`OffsetSyncStore` (every kept sync, the mirror positions, prune floors)
and where reading of the offset-syncs topic stopped. It is written after every
micro-batch to a temporary file in the same directory, fsynced, then renamed
over the old one (``os.replace``), so a crash leaves either the old or the new
snapshot, never a torn one.

Why it matters: the snapshot keeps the history a lagging group needs, with the
store's trust flags (which intervals are known complete, which syncs start a
mirror transaction), so a restarted job translates exactly where the history
it read was complete. Re-reading the offset-syncs topic instead works only as
far as the topic still holds every sync: an MM2-style compacted topic keeps just
the newest sync per partition once a segment rolls (see ``docs/offset-syncs.md``).

Format 2 adds the flags, format 3 each sync's writer; format 1 files still load,
with every interval taken as not known complete, and formats 1 and 2 with every
writer unknown, so their history is read conservatively
(:meth:`OffsetSyncStore.from_json`).

``report.json`` beside it is the job's small status report (:class:`Report`:
holes in the history, conservative translations of the last round, the
offset-syncs topic's cleanup policy), read by ``mm status``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mm.checkpoint.store import OffsetSyncStore
from mm.errors import MirrorError

FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
FILE_NAME = "store.json"
REPORT_FILE_NAME = "report.json"


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


@dataclass
class Report:
    """What the checkpoint job tells ``mm status`` about translation quality."""

    flow: str
    at_ms: int
    syncs_topic: str
    # the offset-syncs topic's cleanup.policy, None while unknown
    syncs_cleanup_policy: str | None = None
    # intervals of the kept history that are not known complete
    holes: int = 0
    # offset gaps in the offset-syncs topic taken as missing syncs (this process)
    syncs_gaps: int = 0
    # per group: partitions translated conservatively (maybe below exact) last round
    inexact: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "flow": self.flow,
            "at_ms": self.at_ms,
            "syncs_topic": self.syncs_topic,
            "syncs_cleanup_policy": self.syncs_cleanup_policy,
            "holes": self.holes,
            "syncs_gaps": self.syncs_gaps,
            "inexact": dict(sorted(self.inexact.items())),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        policy = data.get("syncs_cleanup_policy")
        return cls(
            str(data["flow"]),
            int(data["at_ms"]),
            str(data["syncs_topic"]),
            None if policy is None else str(policy),
            int(data.get("holes", 0)),
            int(data.get("syncs_gaps", 0)),
            {str(g): int(n) for g, n in dict(data.get("inexact", {})).items()},
        )


def save_report(path: Path, report: Report) -> None:
    _write_atomically(path, json.dumps(report.to_json(), separators=(",", ":")))


def load_report(path: Path, flow: str) -> Report | None:
    """The report at ``path``; None when missing, unreadable or of another flow."""
    try:
        report = Report.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return report if report.flow == flow else None


def save(path: Path, snap: Snapshot) -> None:
    """Write ``snap`` to ``path`` atomically (temp file + fsync + os.replace)."""
    _write_atomically(path, json.dumps(snap.to_json(), separators=(",", ":")))


def _write_atomically(path: Path, data: str) -> None:
    from mm.state_dir import write_atomically

    write_atomically(path, data)


def load(path: Path, flow: str) -> Snapshot | None:
    """The snapshot at ``path``, or None when there is none. Raises MirrorError if unreadable."""
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        if data.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"unknown version {data.get('version')!r}")
        if data.get("flow") != flow:
            raise ValueError(f"snapshot of flow {data.get('flow')!r}, not {flow!r}")
        store = OffsetSyncStore.from_json(data["partitions"])
        syncs_next = {str(k): int(v) for k, v in data["syncs_next"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MirrorError(
            f"checkpoint store snapshot {path} is unreadable ({exc}); move it away to rebuild "
            "the history from the offset-syncs topic (mm creates it with cleanup.policy=delete; "
            "where it is compacted or retention deleted syncs, lagging groups may get no or "
            "conservative checkpoints until they catch up)"
        ) from exc
    return Snapshot(flow, store, syncs_next)
