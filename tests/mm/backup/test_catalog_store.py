"""The catalog store on the local filesystem: versions, history, and racing writers
(exclusive create by hard link; the object-store path's write-then-read-back)."""

from __future__ import annotations

import json
import threading

import pyarrow.fs as pafs
import pytest

from mm.backup import catalog_store
from mm.backup.catalog import PartitionCatalog, SegmentEntry
from mm.backup.catalog_store import FsCatalogStore, version_name
from mm.backup.errors import CatalogError, ConcurrentCommitError
from mm.backup.layout import PartitionRef

pytestmark = pytest.mark.unit

FS = pafs.LocalFileSystem()


def entry(start, end):
    return SegmentEntry(0, start, end, f"k{start}", end - start + 1, 10, 0, 1)


@pytest.fixture(params=[True, False], ids=["exclusive", "read-back"])
def store(request):
    return FsCatalogStore(FS, exclusive_create=request.param)


@pytest.fixture
def ref(tmp_path):
    return PartitionRef(str(tmp_path), "east", "orders", 2)


def test_versions_and_history(store, ref, tmp_path):
    version, cat = store.load(ref)
    assert version == 0 and cat == PartitionCatalog("east", "orders", 2)
    one = cat.finish_copy(entry(0, 9))
    assert store.commit(ref, 0, one) == 1
    two = one.finish_copy(entry(10, 19))
    assert store.commit(ref, 1, two) == 2
    assert store.load(ref) == (2, two)
    files = sorted(p.name for p in (tmp_path / "_catalog/east/orders/2").iterdir() if p.is_file())
    assert files == [version_name(1), version_name(2)]
    assert not list((tmp_path / "_catalog/east/orders/2/_tmp").iterdir())
    doc = json.loads((tmp_path / "_catalog/east/orders/2" / version_name(1)).read_text())
    assert doc["version"] == 1 and doc["catalog"]["segments"][0]["key"] == "k0"


def test_a_stale_writer_loses(store, ref):
    _, cat = store.load(ref)
    store.commit(ref, 0, cat.finish_copy(entry(0, 9)))
    with pytest.raises(ConcurrentCommitError, match="expected version 0 to be the latest, found 1"):
        store.commit(ref, 0, cat.finish_copy(entry(0, 4)))
    assert store.load(ref)[1].visible()[0].end == 9


def test_both_pass_the_check_one_loses_at_publish(store, ref, monkeypatch):
    """The second writer checked before the first published: the publish catches it."""
    _, cat = store.load(ref)
    store.commit(ref, 0, cat.finish_copy(entry(0, 9)))
    monkeypatch.setattr(store, "latest_version", lambda r: 0)  # its check ran earlier
    with pytest.raises(ConcurrentCommitError):
        store.commit(ref, 0, cat.finish_copy(entry(0, 4)))
    monkeypatch.undo()
    assert store.load(ref)[1].visible()[0].end == 9


def test_read_back_sees_an_overwrite(ref, monkeypatch):
    """Object-store path: another writer's copy lands after ours; we read it back, we lose."""
    store = FsCatalogStore(FS, exclusive_create=False)
    _, cat = store.load(ref)
    theirs = cat.finish_copy(entry(0, 4))

    def move_then_overwritten(fs, src, dst):
        fs.move(src, dst)
        doc = {"version": 1, "writer": "other", "catalog": catalog_store.catalog_to_dict(theirs)}
        with fs.open_output_stream(dst) as out:
            out.write(json.dumps(doc).encode())

    monkeypatch.setattr(catalog_store, "_move", move_then_overwritten)
    with pytest.raises(ConcurrentCommitError, match="another writer raced"):
        store.commit(ref, 0, cat.finish_copy(entry(0, 9)))
    assert store.load(ref) == (1, theirs)


def race(store, ref, version, cat, base, writers):
    """``writers`` threads commit over ``version`` at once; returns (winners, losers)."""
    barrier = threading.Barrier(writers)
    won: list[int] = []
    lost: list[int] = []

    def write(w):
        mine = cat.finish_copy(entry(base, base + w))
        barrier.wait()
        try:
            store.commit(ref, version, mine)
            won.append(w)
        except ConcurrentCommitError:
            lost.append(w)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, lost


def test_racing_threads_one_winner_per_version(ref):
    """Local filesystem: many writers race for each version; exactly one wins it."""
    store = FsCatalogStore(FS)
    writers = 6
    for base in range(0, 150, 10):
        version, cat = store.load(ref)
        won, lost = race(store, ref, version, cat, base, writers)
        assert len(won) == 1 and len(lost) == writers - 1
        version_after, cat_after = store.load(ref)
        assert version_after == version + 1
        assert cat_after.visible()[-1].end == base + won[0]
        # fill up to the next round's start
        store.commit(ref, version_after, cat_after.finish_copy(entry(base + won[0] + 1, base + 9)))


def test_wrong_partition_is_refused(store, ref):
    with pytest.raises(CatalogError, match=r"holds the catalog of east/orders\[3\]"):
        store.commit(ref, 0, PartitionCatalog("east", "orders", 3))


def test_corrupt_version_is_reported(store, ref, tmp_path):
    d = tmp_path / "_catalog/east/orders/2"
    d.mkdir(parents=True)
    (d / version_name(1)).write_text("{not json")
    with pytest.raises(CatalogError, match="not a catalog version document"):
        store.load(ref)
    (d / version_name(1)).write_text('{"version": 7, "catalog": {}}')
    with pytest.raises(CatalogError, match="expected a document with version 1"):
        store.load(ref)


def test_exclusive_create_needs_a_local_filesystem():
    sub = pafs.SubTreeFileSystem("/tmp", FS)
    with pytest.raises(ValueError, match="LocalFileSystem"):
        FsCatalogStore(sub, exclusive_create=True)
    FsCatalogStore(sub)  # the read-back path
