"""The compaction and retention `backup.*` keys: defaults, values, errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm.backup.compaction import limits_of
from mm.backup.settings import BackupSettings, is_backup_key, parse_backup_settings
from mm.errors import ConfigError

pytestmark = pytest.mark.unit


def parse(**raw: str) -> BackupSettings:
    base = {"cluster": "A", "path": "/b"}
    return parse_backup_settings({**base, **raw}, {"A": None}, cwd=Path("/w"))


def test_defaults_keep_forever_and_merge_four():
    s = parse()
    assert s.retention_ms is None
    limits = limits_of(s)
    assert (limits.min_segments, limits.max_records, limits.max_bytes, limits.min_age_ms) == (
        4,
        10_000_000,
        1 << 30,
        0,
    )


def test_values_round_trip_to_the_workers():
    s = parse(
        **{
            "compact.min.segments": "2",
            "compact.max.records": "500",
            "compact.max.bytes": "4096",
            "compact.min.age.ms": "60000",
            "retention.ms": "604800000",
        }
    )
    assert (s.compact_min_segments, s.compact_max_records, s.compact_max_bytes) == (2, 500, 4096)
    assert (s.compact_min_age_ms, s.retention_ms) == (60_000, 604_800_000)
    assert BackupSettings.from_dict(s.to_dict()) == s
    assert parse(**{"retention.ms": "-1"}).retention_ms is None  # Kafka's "forever"
    assert all(
        is_backup_key(f"backup.{k}")
        for k in ("compact.min.segments", "compact.max.bytes", "retention.ms")
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("compact.min.segments", "1", "at least 2"),
        ("compact.max.records", "0", "positive whole number of records"),
        ("compact.max.bytes", "1GB", "positive whole number of bytes"),
        ("compact.min.age.ms", "-5", "0 or more"),
        ("retention.ms", "0", "or -1 to keep segments forever"),
        ("retention.ms", "7d", "or -1 to keep segments forever"),
    ],
)
def test_bad_values_name_the_key(key, value, expected):
    with pytest.raises(ConfigError, match=expected) as info:
        parse(**{key: value})
    assert info.value.key == f"backup.{key}" and info.value.value == value
