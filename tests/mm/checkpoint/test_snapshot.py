"""Store snapshots: round trip, atomic replace, pruned history stays pruned."""

import json
from pathlib import Path

import pytest

from mm.checkpoint import snapshot
from mm.checkpoint.store import OffsetSyncStore
from mm.errors import MirrorError

pytestmark = pytest.mark.unit

# the transaction id of mm-written syncs (one writer: transaction boundaries are
# told by the txn_first flags, as before syncs carried the id)
W = "t"


def _store() -> OffsetSyncStore:
    s = OffsetSyncStore()
    for u, d in [(0, 0), (9, 9), (11, 11), (20, 20), (40, 22)]:
        s.add_sync("orders", 0, u, d, writer=W)
    s.add_sync("orders", 1, 5, 0, writer=W)
    s.set_position("orders", 0, 41)
    return s


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "d" / "store.json"
    snap = snapshot.Snapshot("A->B", _store(), {"mm2-offset-syncs.B.internal:0": 123})
    snapshot.save(path, snap)
    got = snapshot.load(path, "A->B")
    assert got is not None
    assert got.syncs_next == snap.syncs_next
    assert got.store.partitions == snap.store.partitions
    assert got.store.translate("orders", 0, 10) == 10
    assert got.store.translate("orders", 0, 41) == 23
    assert [p.name for p in path.parent.iterdir()] == ["store.json"]  # no temp file left


def test_missing_and_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    assert snapshot.load(path, "A->B") is None
    path.write_text("{not json")
    with pytest.raises(MirrorError, match="unreadable"):
        snapshot.load(path, "A->B")
    snapshot.save(path, snapshot.Snapshot("A->B"))
    with pytest.raises(MirrorError, match="flow"):
        snapshot.load(path, "A->C")
    data = json.loads(path.read_text())
    data["partitions"] = [
        {
            "topic": "t",
            "partition": 0,
            "position": -1,
            "floor": -1,
            "upstreams": [5, -1],
            "downstreams": [0, 1],
        }
    ]
    path.write_text(json.dumps(data))
    with pytest.raises(MirrorError, match="increasing"):
        snapshot.load(path, "A->B")


def test_failed_write_keeps_old_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "store.json"
    snapshot.save(path, snapshot.Snapshot("A->B", _store(), {"s:0": 1}))
    before = path.read_text()

    def boom(*_a: object) -> None:
        raise OSError(28, "No space left on device")

    import mm.state_dir

    monkeypatch.setattr(mm.state_dir.os, "replace", boom)
    with pytest.raises(mm.state_dir.StateDirError, match=f"cannot write state in {path}: No space"):
        snapshot.save(path, snapshot.Snapshot("A->B", OffsetSyncStore(), {"s:0": 2}))
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["store.json"]


def test_pruned_history_ignores_replayed_old_syncs() -> None:
    s = _store()
    h = s.history("orders", 0)
    assert h is not None
    assert s.prune("orders", 0, 15) == 2  # keeps (11, 11), the newest sync <= 15
    assert h.floor == 11
    # re-reading the offset-syncs topic from its start replays older syncs: ignored,
    # where the rewind rule would otherwise wipe the history
    s.add_sync("orders", 0, 0, 0, writer=W)
    s.add_sync("orders", 0, 9, 9, writer=W)
    assert h.upstreams == [11, 20, 40]
    assert s.translate("orders", 0, 15) == 15
    restored = OffsetSyncStore.from_json(json.loads(json.dumps(s.to_json())))
    assert restored.history("orders", 0) == h


def test_trust_flags_survive_a_snapshot_and_continue(tmp_path: Path) -> None:
    s = OffsetSyncStore()
    s.add_sync("t", 0, 0, 0, txn_first=True, writer=W)
    s.add_sync("t", 0, 9, 9, writer=W)
    s.mark_hole()
    s.add_sync("t", 0, 50, 60, txn_first=True, writer=W)
    s.add_sync("t", 0, 59, 69, writer=W)
    s.mark_hole()  # the job stops right after seeing a gap
    path = tmp_path / "store.json"
    snapshot.save(path, snapshot.Snapshot("A->B", s, {"syncs:0": 7}))
    assert json.loads(path.read_text())["version"] == snapshot.FORMAT_VERSION == 3
    got = snapshot.load(path, "A->B")
    assert got is not None
    h = got.store.history("t", 0)
    assert h is not None
    assert h.complete == [True, True, False, True]
    assert h.txn_first == [True, False, True, False]
    assert h.hole_next
    got.store.set_position("t", 0, 80)
    assert got.store.translate("t", 0, 30) == 10  # inside the hole: conservative
    got.store.add_sync("t", 0, 70, 79, writer=W)  # continued: the gap seen before the stop counts
    assert h.complete[-1] is False
    assert got.store.translate("t", 0, 65) == 70


def test_format_1_loads_with_every_interval_untrusted(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    old = {
        "version": 1,
        "flow": "A->B",
        "syncs_next": {"syncs:0": 5},
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "position": 30,
                "floor": -1,
                "upstreams": [0, 9, 2],  # delta-encoded: 0, 9, 11
                "downstreams": [0, 9, 2],
            }
        ],
    }
    path.write_text(json.dumps(old))
    got = snapshot.load(path, "A->B")
    assert got is not None and got.syncs_next == {"syncs:0": 5}
    h = got.store.history("t", 0)
    assert h is not None
    assert h.upstreams == [0, 9, 11] and h.downstreams == [0, 9, 11]
    assert h.complete == [True, False, False]
    assert got.store.translate("t", 0, 5) == 1  # nothing says that history was complete
    assert got.store.translate("t", 0, 9) == 9  # at a sync: exact
    data = json.loads(path.read_text())
    data["partitions"][0]["incomplete"] = [3]
    data["version"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(MirrorError, match="out of range"):
        snapshot.load(path, "A->B")
