"""Segment keys: format and parse round-trip, temporary keys, malformed keys refused."""

from __future__ import annotations

import pytest

from mm.backup.errors import LayoutError
from mm.backup.layout import PartitionRef, is_temp_key, parse_segment_key, topic_dirs

pytestmark = pytest.mark.unit

REF = PartitionRef("bucket/backups", "east", "orders.v2_eu-1", 7)


def test_key_is_zero_padded_and_inclusive():
    seg = REF.segment(0, 5, 1_234)
    assert seg.key == (
        "bucket/backups/east/orders.v2_eu-1/partition=7/level=0/"
        "00000000000000000005-00000000000000001234.parquet"
    )
    assert seg.relative == seg.key.removeprefix("bucket/backups/")


def test_parse_round_trips():
    seg = REF.segment(2, 0, 2**63 - 1)
    assert parse_segment_key(seg.key) == seg


def test_prefix_may_hold_slashes_and_an_absolute_path():
    ref = PartitionRef("/tmp/x/y/", "r1", "t", 0)
    assert ref.prefix == "/tmp/x/y"
    seg = ref.segment(1, 3, 3)
    assert parse_segment_key(seg.key) == seg


def test_topic_dirs_hold_its_partitions_and_catalogs():
    segments, catalogs = topic_dirs("bucket/backups/", "east", "orders.v2_eu-1")
    assert REF.directory.startswith(segments + "/")
    assert REF.catalog_dir.startswith(catalogs + "/")


def test_names_sort_by_offset():
    keys = [REF.segment(0, s, s + 9).key for s in (100, 9, 20, 1_000_000)]
    assert sorted(keys) == [REF.segment(0, s, s + 9).key for s in (9, 20, 100, 1_000_000)]


def test_temp_key():
    key = REF.temp_key(0, token="abc")
    assert key == "bucket/backups/east/orders.v2_eu-1/partition=7/level=0/_tmp/abc.parquet"
    assert is_temp_key(key)
    assert not is_temp_key(REF.segment(0, 0, 1).key)
    assert REF.temp_key(0) != REF.temp_key(0)
    with pytest.raises(LayoutError):
        parse_segment_key(key)


def test_catalog_dir():
    assert REF.catalog_dir == "bucket/backups/_catalog/east/orders.v2_eu-1/7"


@pytest.mark.parametrize(
    "key",
    [
        "",
        "a/b/c",
        "p/r/t/partition=0/level=0/00000000000000000001-00000000000000000002.parq",
        "p/r/t/partition=0/level=0/1-2.parquet",
        "p/r/t/partition=0/level=0/00000000000000000003-00000000000000000002.parquet",
        "p/r/t/partition=x/level=0/00000000000000000001-00000000000000000002.parquet",
        "p/r/t/partition=01/level=0/00000000000000000001-00000000000000000002.parquet",
        "p/r/t/0/0/00000000000000000001-00000000000000000002.parquet",
        "p/r/t/partition=0/level=100/00000000000000000001-00000000000000000002.parquet",
        "p/r/bad topic/partition=0/level=0/00000000000000000001-00000000000000000002.parquet",
        "p/r/../partition=0/level=0/00000000000000000001-00000000000000000002.parquet",
        "p/_catalog/t/partition=0/level=0/00000000000000000001-00000000000000000002.parquet",
        "r/t/partition=0/level=0/00000000000000000001-00000000000000000002.parquet",
        "p/r/t/partition=0/level=0/99999999999999999999-99999999999999999999.parquet",
    ],
)
def test_malformed_keys_are_refused_naming_the_form(key):
    with pytest.raises(LayoutError, match="expected <prefix>/<region>/<topic>/partition="):
        parse_segment_key(key)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"topic": "a/b"}, "invalid topic"),
        ({"topic": "x" * 250}, "invalid topic"),
        ({"topic": "."}, "invalid topic"),
        ({"region": "_r"}, "invalid region"),
        ({"prefix": "/"}, "invalid prefix"),
        ({"partition": -1}, "invalid partition"),
    ],
)
def test_bad_names_are_refused(kwargs, match):
    args = {"prefix": "p", "region": "r", "topic": "t", "partition": 0} | kwargs
    with pytest.raises(LayoutError, match=match):
        PartitionRef(**args)


def test_bad_ranges_are_refused():
    with pytest.raises(LayoutError, match="both inclusive"):
        REF.segment(0, 5, 4)
    with pytest.raises(LayoutError, match="invalid level"):
        REF.segment(-1, 0, 0)
