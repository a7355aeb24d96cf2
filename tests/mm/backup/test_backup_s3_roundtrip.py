"""`mm backup` to S3 (a local moto server over HTTP), end to end with the real CLI:
`--once`, `ls`, `verify`; the catalog deleted and rebuilt by `rebuild-index`,
equal to what it was; the next `--once` continues exactly where the segments end;
`compact` merges them to level 1; `mm restore` from S3 into another cluster holds
the source's records, in order.

Catalog commits must take the conditional-put path: moto records the requests,
and every catalog version is a PUT with ``If-None-Match: *``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from support.backup import (
    assert_backup_equals_source,
    produce_numbered,
    rec_tuple,
    write_config,
)
from support.clusters import KafkaCluster
from support.groups import run_mm
from support.mirror import create_topic, read_partition, read_topic_committed

from mm.backup.catalog_store import FsCatalogStore
from mm.backup.layout import PartitionRef
from mm.embedded.s3 import AWS_ENV, MotoServer

pytestmark = pytest.mark.integration

BUCKET = "mm-backup-roundtrip"
PARTITIONS = 2
REGION = "east"


@pytest.fixture
def moto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MotoServer, Path]]:
    """A moto server recording every request it serves, and the recording's path; the
    AWS credentials in this process's environment (`mm` subprocesses inherit it)."""
    recording = tmp_path / "moto-requests.jsonl"
    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MOTO_ENABLE_RECORDING", "true")
    monkeypatch.setenv("MOTO_RECORDER_FILEPATH", str(recording))
    server = MotoServer(tmp_path / "moto.log")
    server.start()
    try:
        server.create_bucket(BUCKET)
        yield server, recording
    finally:
        server.stop()


def catalog_puts(recording: Path) -> list[dict[str, str]]:
    """Headers of the PUTs of catalog version documents moto served."""
    out = []
    for line in recording.read_text().splitlines():
        req = json.loads(line)
        if req["method"] == "PUT" and "/_catalog/" in req["url"] and "/v0" in req["url"]:
            out.append({k.lower(): v for k, v in req["headers"].items()})
    return out


def test_backup_to_s3_ls_verify_rebuild_continue_and_restore(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, unique_topic, moto, tmp_path: Path
) -> None:
    server, recording = moto
    bootstrap = cluster_a.bootstrap_servers
    topic = unique_topic("s3bk")
    create_topic(bootstrap, topic, PARTITIONS)
    produce_numbered(bootstrap, topic, PARTITIONS, 120, "one")

    host = server.endpoint.removeprefix("http://")
    region = AWS_ENV["AWS_DEFAULT_REGION"]
    uri = f"s3://{BUCKET}/bk?endpoint_override={host}&scheme=http&region={region}"
    config = write_config(
        tmp_path / "mm.properties",
        [
            "clusters = A, B",
            f"A.bootstrap.servers = {bootstrap}",
            f"B.bootstrap.servers = {cluster_b.bootstrap_servers}",
            "backup.cluster = A",
            f"backup.path = {uri}",
            f"backup.topics = {topic}",
            f"backup.region = {REGION}",
            "backup.segment.records = 50",
            "backup.compact.min.segments = 2",
            f"mm.state.dir = {tmp_path / 'state'}",
            "spark.master = local[2]",
        ],
    )
    fs = pafs.S3FileSystem(
        access_key=AWS_ENV["AWS_ACCESS_KEY_ID"],
        secret_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        region=region,
        endpoint_override=host,
        scheme="http",
    )
    prefix = f"{BUCKET}/bk"

    first = run_mm(config, "backup", "--once")
    assert first.returncode == 0, first.describe()
    assert assert_backup_equals_source(fs, prefix, REGION, bootstrap, topic, PARTITIONS) == 240

    listed = run_mm(config, "backup", "ls", "--json")
    assert listed.returncode == 0, listed.describe()
    rows = {r["partition"]: r for r in json.loads(listed.stdout)["partitions"]}
    assert {p: (r["next_offset"], r["records"], r["segments"]) for p, r in rows.items()} == {
        p: (120, 120, 3) for p in range(PARTITIONS)
    }

    verified = run_mm(config, "backup", "verify", "--json")
    assert verified.returncode == 0, verified.describe()
    doc = json.loads(verified.stdout)
    assert doc["ok"] is True and doc["totals"]["problems"] == 0, doc
    assert (doc["totals"]["segments"], doc["totals"]["records"]) == (6, 240)

    # every catalog version went through the conditional put (two per segment: started, finished)
    puts = catalog_puts(recording)
    assert len(puts) == 2 * 6, len(puts)
    assert all(h.get("if-none-match") == "*" for h in puts), puts

    # the catalog lost: rebuilt from the segment files, equal to what it was (settled)
    store = FsCatalogStore(fs)
    refs = [PartitionRef(prefix, REGION, topic, p) for p in range(PARTITIONS)]
    before = {r.partition: store.load(r)[1].settled() for r in refs}
    fs.delete_dir(f"{prefix}/_catalog")
    assert all(store.load(r)[0] == 0 for r in refs)
    broken = run_mm(config, "backup", "verify")
    assert broken.returncode == 1, broken.describe()
    assert "no catalog, but 3 segment files" in broken.stdout, broken.describe()
    dry = run_mm(config, "backup", "rebuild-index", "--dry-run")
    assert dry.returncode == 0 and "would commit" in dry.stdout, dry.describe()
    assert all(store.load(r)[0] == 0 for r in refs)
    rebuilt = run_mm(config, "backup", "rebuild-index", "--json")
    assert rebuilt.returncode == 0, rebuilt.describe()
    results = {r["partition"]: r for r in json.loads(rebuilt.stdout)["partitions"]}
    assert {p: (r["status"], r["after_version"], r["next_offset"]) for p, r in results.items()} == {
        p: ("committed", 1, 120) for p in range(PARTITIONS)
    }
    assert {r.partition: store.load(r) for r in refs} == {p: (1, before[p]) for p in before}

    # the next pass continues where the segments end: no gap, no overlap
    produce_numbered(bootstrap, topic, PARTITIONS, 30, "two")
    second = run_mm(config, "backup", "--once")
    assert second.returncode == 0, second.describe()
    for r in refs:
        _, cat = store.load(r)
        assert [(e.start, e.end) for e in cat.visible()] == [
            (0, 49),
            (50, 99),
            (100, 119),
            (120, 149),
        ]
        assert cat.lost_count == 0
    assert assert_backup_equals_source(fs, prefix, REGION, bootstrap, topic, PARTITIONS) == 300
    final = run_mm(config, "backup", "verify")
    assert final.returncode == 0, final.describe()
    assert "consistent" in final.stdout

    # compacted on S3 to level 1 (the catalog switched by conditional put), still consistent
    compacted = run_mm(config, "backup", "compact")
    assert compacted.returncode == 0, compacted.describe()
    for r in refs:
        _, cat = store.load(r)
        assert [(e.level, e.start, e.end) for e in cat.visible()] == [(1, 0, 149)]
    assert run_mm(config, "backup", "verify").returncode == 0

    # restored from S3 into B: the source's records, in order, each once
    restored = run_mm(config, "restore", "--to", "B", "--topic-prefix", "s3.", "--json")
    assert restored.returncode == 0, restored.describe()
    assert sum(r["summary"]["records"] for r in json.loads(restored.stdout)["partitions"]) == 300
    targets = read_topic_committed(cluster_b.bootstrap_servers, f"s3.{topic}", PARTITIONS)
    for part in range(PARTITIONS):
        source = [rec_tuple(r)[1:] for r in read_partition(bootstrap, topic, part)]
        assert len(source) == 150
        assert [rec_tuple(r)[1:] for r in targets[part]] == source, f"partition {part}"
