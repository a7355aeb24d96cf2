"""`backup.*` settings: defaults, each bad or missing key named in a ConfigError, how
the loader routes the keys (also next to a cluster alias called ``backup``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from mm.backup.settings import (
    DEFAULT_TOPICS_EXCLUDE,
    BackupSettings,
    backup_settings,
    parse_backup_settings,
    resolve_path,
)
from mm.config import build_config
from mm.config.unknown import UnknownKey, find_unknown_keys
from mm.errors import ConfigError

pytestmark = pytest.mark.unit

CLUSTERS = {"A": None, "B": None}
BASE = {"cluster": "A", "path": "/data/backup"}


def parse(**raw: str) -> BackupSettings:
    return parse_backup_settings({**BASE, **raw}, CLUSTERS, cwd=Path("/work"))


def test_defaults():
    s = parse()
    assert s.cluster == "A" and s.region == "A" and s.path == "/data/backup"
    assert s.topics == (".*",) and s.topics_exclude == DEFAULT_TOPICS_EXCLUDE
    assert s.groups == (".*",)
    assert (s.segment_records, s.segment_bytes, s.compression) == (1_000_000, 268_435_456, "zstd")
    assert s.committed_filter == "auto"


def test_values():
    s = parse(
        topics="orders.*, payments",
        **{
            "topics.exclude": "orders-tmp",
            "groups": "billing-.*",
            "region": "east-1",
            "segment.records": "10",
            "segment.bytes": "2048",
            "segment.ms": "3600000",
            "compression": " Snappy ",
            "committed.filter": "broker",
        },
    )
    assert s.topics == ("orders.*", "payments") and s.topics_exclude == ("orders-tmp",)
    assert s.region == "east-1" and s.segment_records == 10 and s.segment_bytes == 2048
    assert s.segment_ms == 3_600_000 and parse(**{"segment.ms": "-1"}).segment_ms is None
    assert s.compression == "snappy" and s.committed_filter == "broker"
    assert BackupSettings.from_dict(s.to_dict()) == s


@pytest.mark.parametrize(
    ("topic", "selected"),
    [
        ("orders", True),
        ("A.orders", True),  # a remote topic a mirror wrote is data too
        ("__consumer_offsets", False),
        ("mm2-offset-syncs.B.internal", False),
        ("A.checkpoints.internal", False),
        ("connect-status-internal", False),
        ("orders.replica", False),
        ("heartbeats", False),
        ("A.heartbeats", False),
        ("heartbeats-app", True),
    ],
)
def test_default_topic_selection(topic, selected):
    assert parse().topic_selected(topic) is selected


def test_group_selection():
    s = parse(groups="billing.*")
    assert s.group_selected("billing-1")
    assert not s.group_selected("shipping")
    assert not parse().group_selected("__mm.mirror.A.B")
    assert not parse().group_selected("console-consumer-123")


def test_paths(tmp_path):
    assert resolve_path("backups/x", tmp_path) == str(tmp_path / "backups/x")
    assert resolve_path("file:///srv/b", tmp_path) == "/srv/b"
    assert resolve_path("s3://bucket/pre/fix", tmp_path) == "s3://bucket/pre/fix"
    assert parse(path="rel").path == "/work/rel"


@pytest.mark.parametrize(
    ("raw", "key", "expected"),
    [
        ({"cluster": ""}, "backup.cluster", "a cluster alias listed in clusters"),
        ({"cluster": "C"}, "backup.cluster", r"a cluster alias listed in clusters \(A, B\)"),
        ({"path": " "}, "backup.path", "a local directory or s3://bucket/prefix"),
        ({"path": "hdfs://nn/x"}, "backup.path", "s3://bucket/prefix"),
        ({"path": "s3:///nobucket"}, "backup.path", "s3://bucket/prefix"),
        ({"topics": "orders, ("}, "backup.topics", "regular expressions"),
        ({"topics.exclude": "[x"}, "backup.topics.exclude", "regular expressions"),
        ({"groups": "*"}, "backup.groups", "regular expressions"),
        ({"groups.exclude": "a)"}, "backup.groups.exclude", "regular expressions"),
        ({"region": "_east"}, "backup.region", "starting with a letter or digit"),
        ({"region": "a/b"}, "backup.region", "region name"),
        ({"segment.records": "0"}, "backup.segment.records", "positive whole number of records"),
        ({"segment.records": "1e6"}, "backup.segment.records", "records"),
        ({"segment.bytes": "-5"}, "backup.segment.bytes", "positive whole number of bytes"),
        ({"segment.ms": "0"}, "backup.segment.ms", "or -1 for no limit"),
        ({"compression": "lzo"}, "backup.compression", "one of none, snappy, gzip"),
        ({"committed.filter": "yes"}, "backup.committed.filter", "one of auto, raw, broker"),
    ],
)
def test_bad_values_name_key_value_and_expectation(raw, key, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        parse(**raw)
    assert err.value.key == key
    assert err.value.value == next(iter(raw.values()))
    assert str(err.value).startswith(f"invalid config {key}=")


@pytest.mark.parametrize("key", ["cluster", "path"])
def test_required_keys(key):
    raw = {k: v for k, v in BASE.items() if k != key}
    with pytest.raises(ConfigError, match=rf"invalid config backup\.{key}=<missing>"):
        parse_backup_settings(raw, CLUSTERS)


def test_auto_filter_follows_the_broker_profile_and_raw_needs_plaintext():
    from mm.kafka.profile import EMBEDDED, KAFKA

    # Apache Kafka's read_committed is exact on every listener: auto trusts it
    assert parse().resolved_filter("PLAINTEXT", KAFKA) == "broker"
    assert parse().resolved_filter("SASL_SSL", KAFKA) == "broker"
    # a broker that serves aborted records: auto checks with the raw reader
    assert parse().resolved_filter("PLAINTEXT", EMBEDDED) == "raw"
    with pytest.raises(ConfigError, match=r"auto chose it: the broker profile embedded"):
        parse().resolved_filter("SSL", EMBEDDED)
    assert parse(**{"committed.filter": "broker"}).resolved_filter("PLAINTEXT", EMBEDDED) == (
        "broker"
    )
    assert parse(**{"committed.filter": "raw"}).resolved_filter("PLAINTEXT", KAFKA) == "raw"
    with pytest.raises(ConfigError, match=r"backup\.committed\.filter='raw'"):
        parse(**{"committed.filter": "raw"}).resolved_filter("SSL", KAFKA)


PROPS = {
    "clusters": "primary, backup",
    "primary.bootstrap.servers": "p:9092",
    "backup.bootstrap.servers": "b:9092",
    "backup.security.protocol": "PLAINTEXT",
    "backup.cluster": "primary",
    "backup.path": "/srv/backup",
    "backup.segment.records": "500",
}


def test_loader_routes_backup_keys_even_next_to_an_alias_called_backup():
    with capture_logs() as events:
        cfg = build_config(PROPS)
    assert cfg.backup == {"cluster": "primary", "path": "/srv/backup", "segment.records": "500"}
    # the cluster "backup" keeps its own client settings
    assert cfg.clusters["backup"].bootstrap_servers == ("b:9092",)
    assert cfg.clusters["backup"].client == {"security.protocol": "PLAINTEXT"}
    assert not [e for e in events if e["log_level"] == "warning"]
    s = backup_settings(cfg)
    assert (s.cluster, s.segment_records) == ("primary", 500)


def test_loader_warns_about_unknown_backup_keys():
    props = {k: v for k, v in PROPS.items() if not k.startswith("backup.")}
    props |= {"clusters": "primary", "backup.cluster": "primary", "backup.paht": "/x"}
    cfg = build_config(props)
    # load_config prints this as a warning line (mm.config.unknown)
    assert find_unknown_keys(props) == [UnknownKey("backup.paht", None, "backup.path")]
    assert "backup.paht" not in cfg.other
    with pytest.raises(ConfigError, match=r"invalid config backup\.path=<missing>"):
        backup_settings(cfg)
