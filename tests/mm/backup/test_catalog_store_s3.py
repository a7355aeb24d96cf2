"""The catalog store on S3 (a local moto server over HTTP, read through pyarrow's
S3FileSystem): commits with S3's conditional put; racing writers, one wins each."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from mm.backup.catalog import PartitionCatalog, SegmentEntry
from mm.backup.catalog_store import FsCatalogStore, S3ConditionalPut
from mm.backup.errors import ConcurrentCommitError
from mm.backup.layout import PartitionRef
from mm.embedded.s3 import AWS_ENV, MotoServer

pytestmark = pytest.mark.integration

BUCKET = "mm-backup-catalog"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[pafs.S3FileSystem, object]]:
    import boto3

    server = MotoServer(Path(tmp_path_factory.mktemp("moto")) / "moto.log")
    server.start()
    try:
        server.create_bucket(BUCKET)
        fs = pafs.S3FileSystem(
            access_key=AWS_ENV["AWS_ACCESS_KEY_ID"],
            secret_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
            region=AWS_ENV["AWS_DEFAULT_REGION"],
            endpoint_override=server.endpoint,
            scheme="http",
        )
        client = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
            region_name=AWS_ENV["AWS_DEFAULT_REGION"],
        )
        yield fs, client
    finally:
        server.stop()


def entry(start: int, end: int) -> SegmentEntry:
    return SegmentEntry(0, start, end, f"k{start}", end - start + 1, 10, 0, 1)


def test_versions_commit_and_load_on_s3(s3: tuple[pafs.S3FileSystem, object]) -> None:
    fs, client = s3
    store = FsCatalogStore(fs, conditional_put=S3ConditionalPut(client))
    ref = PartitionRef(f"{BUCKET}/one", "east", "orders", 0)
    version, cat = store.load(ref)
    assert version == 0
    one = cat.finish_copy(entry(0, 9))
    assert store.commit(ref, 0, one) == 1
    two = one.finish_copy(entry(10, 19))
    assert store.commit(ref, 1, two) == 2
    assert store.load(ref) == (2, two)
    with pytest.raises(ConcurrentCommitError):
        store.commit(ref, 1, one.finish_copy(entry(10, 12)))  # from a stale load
    assert store.load(ref) == (2, two)


def _race(
    store: FsCatalogStore, ref: PartitionRef, version: int, base: PartitionCatalog, start: int
) -> tuple[list[int], list[int]]:
    """Four writers commit different catalogs on ``version`` at once: (wins, losses)."""
    wins: list[int] = []
    losses: list[int] = []
    barrier = threading.Barrier(4)

    def write(i: int) -> None:
        cat = base.finish_copy(entry(start, start + i))
        barrier.wait()
        try:
            store.commit(ref, version, cat)
            wins.append(i)
        except ConcurrentCommitError:
            losses.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return wins, losses


def test_racing_writers_on_s3_one_wins_each_version(
    s3: tuple[pafs.S3FileSystem, object],
) -> None:
    fs, client = s3
    store = FsCatalogStore(fs, conditional_put=S3ConditionalPut(client))
    ref = PartitionRef(f"{BUCKET}/race", "east", "orders", 1)
    for version in range(5):
        _, base = store.load(ref)
        start = base.entries[-1].end + 1 if base.entries else 0
        wins, losses = _race(store, ref, version, base, start)
        assert len(wins) == 1 and len(losses) == 3, (wins, losses)
        got_version, got = store.load(ref)
        assert got_version == version + 1
        assert got.entries[-1].end == start + wins[0]  # the winner's catalog stands
