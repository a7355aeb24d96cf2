"""The typed mm.* settings: parsed once at load, bad values named, typos warned."""

from __future__ import annotations

from typing import Any

import pytest
from support.props import TWO_CLUSTERS

from mm.config import build_config
from mm.config.settings import SETTINGS, parse_settings
from mm.config.unknown import find_unknown_keys
from mm.errors import ConfigError

pytestmark = pytest.mark.unit

BASE = TWO_CLUSTERS


def test_defaults_where_unset_and_typed_values_where_set() -> None:
    cfg = build_config(BASE)
    for key, s in SETTINGS.items():
        assert cfg.setting(key) == s.default
    cfg = build_config(
        {
            **BASE,
            "mm.mirror.trigger.seconds": " 0.5 ",
            "mm.mirror.shards": "3",
            "mm.mirror.pool.max.clients": "600",
            "mm.offset.syncs.retention.ms": "-1",
            "mm.metrics.port": "0",
            "mm.alert.record.lag": "0",
        }
    )
    assert cfg.setting("mirror.trigger.seconds") == 0.5
    assert cfg.setting("mirror.shards") == 3
    assert build_config({**BASE, "mm.mirror.shards": " Auto "}).setting("mirror.shards") == 0
    assert cfg.setting("mirror.pool.max.clients") == 600
    assert cfg.setting("offset.syncs.retention.ms") == -1
    assert cfg.setting("metrics.port") == 0
    assert cfg.setting("alert.record.lag") == 0
    # an empty metrics port is "not served", as unset
    assert build_config({**BASE, "mm.metrics.port": ""}).setting("metrics.port") is None


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("mirror.trigger.seconds", "0", "a positive number of seconds"),
        ("mirror.trigger.seconds", "soon", "a positive number of seconds"),
        ("mirror.shards", "2.5", "auto or a positive whole number of shards"),
        ("mirror.shards", "0", "auto or a positive whole number of shards"),
        ("mirror.max.records.per.transaction", "lots", "a positive whole number"),
        ("mirror.max.records.per.transaction", "0", "a positive whole number"),
        ("mirror.max.bytes.per.transaction", "64MB", "a positive whole number of bytes"),
        ("mirror.max.bytes.per.transaction", "0", "a positive whole number of bytes"),
        ("mirror.max.seconds.per.transaction", "0", "a positive number of seconds"),
        ("mirror.position.refresh.interval.seconds", "-1", "a positive number of seconds"),
        ("mirror.retry.timeout.seconds", "soon", "a positive number of seconds"),
        ("mirror.max.records.per.partition.per.batch", "-5", "a positive whole number"),
        ("mirror.pool.max.clients", "-1", "a whole number of clients, 0 or more"),
        ("offset.syncs.retention.ms", "0", "a positive number of ms, or -1 (forever)"),
        ("offset.syncs.retention.ms", "-2", "a positive number of ms, or -1 (forever)"),
        ("metrics.port", "70000", "a TCP port (0-65535)"),
        ("metrics.bind.address", " ", "an address to bind to"),
        ("alert.replication.latency.ms", "-1", "a non-negative integer number of milliseconds"),
        ("status.checkpoints.scan.records", "0", "a positive number of records"),
    ],
)
def test_a_bad_value_fails_the_load_naming_key_value_and_expectation(
    key: str, value: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, f"mm.{key}": value})
    assert info.value.key == f"mm.{key}"
    assert info.value.value == value
    assert expected in info.value.expected


def test_an_unknown_key_is_kept_and_found_with_the_closest_known_one() -> None:
    props = {**BASE, "mm.mirror.shard": "4", "mm.zzz": "1"}
    cfg = build_config(props)
    assert cfg.mm["mirror.shard"] == "4"  # kept as written
    assert cfg.setting("mirror.shards") == 0  # the typo set nothing
    closest = {u.key: u.closest for u in find_unknown_keys(props)}
    assert closest == {"mm.mirror.shard": "mm.mirror.shards", "mm.zzz": None}


def test_parse_settings_without_a_logger() -> None:
    seen: list[Any] = []
    out = parse_settings({"mirror.shards": "5", "nope": "1"})
    assert out["mirror.shards"] == 5 and "nope" not in out
    parse_settings({"nope": "1"}, warn=lambda *a, **kw: seen.append((a, kw)))
    assert seen and seen[0][1]["key"] == "mm.nope"
