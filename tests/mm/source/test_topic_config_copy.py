"""Which source topic configs a remote topic gets (mm.source.topics, pure functions).

MM2's rules (MirrorSourceConnector.targetConfig and its incremental sync, with
DefaultConfigPropertyFilter and KIP-894's ``use.defaults.from``): never read-only,
sensitive or STATIC_BROKER_CONFIG entries, never excluded names; DEFAULT_CONFIG
entries only with ``use.defaults.from = source``; every other source (topic and
dynamic broker settings) is copied. Expected values are written out by hand.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigEntry, ConfigSource
from support.mirror import topic_planner

import mm.source.topics as topics_module
from mm.config import build_config
from mm.errors import MirrorError
from mm.source.topics import (
    MirroredTopic,
    TopicMirrorPlanner,
    config_changes,
    copyable_configs,
)

pytestmark = pytest.mark.unit

TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG
BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG
CLUSTER = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC = ConfigSource.STATIC_BROKER_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG


def entry(
    name: str,
    value: str | None,
    source: ConfigSource,
    *,
    read_only: bool = False,
    sensitive: bool = False,
    raw_source: bool = True,
) -> ConfigEntry:
    """A described entry; ``raw_source``: an int source, as describe_configs returns it."""
    return ConfigEntry(
        name,
        value,
        source=source.value if raw_source else source,  # type: ignore[arg-type]
        is_read_only=read_only,
        is_default=source == DEFAULT,
        is_sensitive=sensitive,
    )


def described(*entries: ConfigEntry) -> dict[str, ConfigEntry]:
    return {e.name: e for e in entries}


# What Apache Kafka describes for a topic: every config, each with its source.
KAFKA = described(
    entry("retention.ms", "123456789", TOPIC),
    entry("cleanup.policy", "compact", TOPIC),
    entry("segment.bytes", "1048576", BROKER),
    entry("compression.type", "zstd", CLUSTER),
    entry("max.message.bytes", "1048588", STATIC),
    entry("segment.ms", "604800000", DEFAULT),
    entry("min.insync.replicas", "2", TOPIC),  # excluded by name
    entry("message.timestamp.type", "CreateTime", DEFAULT),  # excluded by name
    entry("flush.ms", None, DEFAULT),
    entry("some.read.only", "x", TOPIC, read_only=True),
    entry("some.secret", None, TOPIC, sensitive=True),
)
# What Tansu 0.6 describes: only the configs set on the topic, labelled DEFAULT_CONFIG.
TANSU = described(
    entry("retention.ms", "123456789", DEFAULT),
    entry("cleanup.policy", "compact", DEFAULT),
    entry("unclean.leader.election.enable", "true", DEFAULT),  # excluded by name
)


# MM2's default config.properties.exclude, as our config builds it
mm2_filter = (
    build_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:9092",
            "B.bootstrap.servers": "b:9092",
            "A->B.enabled": "true",
        }
    )
    .flow("A", "B")
    .config_property_filter
)


def test_target_defaults_copy_topic_and_dynamic_broker_configs() -> None:
    assert copyable_configs(KAFKA, mm2_filter) == {
        "retention.ms": "123456789",
        "cleanup.policy": "compact",
        "segment.bytes": "1048576",
        "compression.type": "zstd",
    }
    # "target" is the default
    assert copyable_configs(KAFKA, mm2_filter, "target") == copyable_configs(KAFKA, mm2_filter)


def test_source_defaults_copy_default_labelled_configs_too() -> None:
    assert copyable_configs(KAFKA, mm2_filter, "source") == {
        "retention.ms": "123456789",
        "cleanup.policy": "compact",
        "segment.bytes": "1048576",
        "compression.type": "zstd",
        "segment.ms": "604800000",
    }


def test_default_labelled_topic_configs_need_source_defaults() -> None:
    # Tansu labels a topic's own settings DEFAULT_CONFIG
    assert copyable_configs(TANSU, mm2_filter, "target") == {}
    assert copyable_configs(TANSU, mm2_filter, "source") == {
        "retention.ms": "123456789",
        "cleanup.policy": "compact",
    }


def test_enum_sources_and_source_less_entries() -> None:
    enum_sourced = described(
        entry("retention.ms", "1", TOPIC, raw_source=False),
        entry("segment.ms", "2", DEFAULT, raw_source=False),
        entry("max.message.bytes", "3", STATIC, raw_source=False),
    )
    assert copyable_configs(enum_sourced, mm2_filter) == {"retention.ms": "1"}
    assert copyable_configs(enum_sourced, mm2_filter, "source") == {
        "retention.ms": "1",
        "segment.ms": "2",
    }

    class Bare:  # no source: is_default decides
        def __init__(self, value: str, is_default: bool) -> None:
            self.value, self.is_default = value, is_default

    bare = {"retention.ms": Bare("1", False), "segment.ms": Bare("2", True)}
    assert copyable_configs(bare, mm2_filter) == {"retention.ms": "1"}
    assert copyable_configs(bare, mm2_filter, "source") == {"retention.ms": "1", "segment.ms": "2"}


def test_custom_exclusions_apply_in_both_modes() -> None:
    def no_retention(prop: str) -> bool:
        return not prop.startswith("retention.")

    assert "retention.ms" not in copyable_configs(KAFKA, no_retention, "target")
    assert "retention.ms" not in copyable_configs(TANSU, no_retention, "source")
    assert copyable_configs(TANSU, no_retention, "source") == {
        "cleanup.policy": "compact",
        "unclean.leader.election.enable": "true",
    }


# --- periodic sync ----------------------------------------------------------------


def test_sync_sets_changed_values_and_deletes_overrides_of_source_defaults() -> None:
    source = described(
        entry("retention.ms", "999", TOPIC),  # changed on the source
        entry("cleanup.policy", "compact", TOPIC),  # same on the target
        entry("segment.bytes", "1048576", BROKER),  # target has its own default
        entry("segment.ms", "604800000", DEFAULT),  # target topic overrides it: DELETE
        entry("flush.ms", "1000", DEFAULT),  # target uses its default: nothing to do
        entry("max.message.bytes", "5", STATIC),  # never synced
        entry("min.insync.replicas", "2", TOPIC),  # excluded
    )
    target = described(
        entry("retention.ms", "123", TOPIC),
        entry("cleanup.policy", "compact", TOPIC),
        entry("segment.bytes", "1073741824", DEFAULT),
        entry("segment.ms", "3600000", TOPIC),
        entry("flush.ms", "9223372036854775807", DEFAULT),
        entry("max.message.bytes", "1048588", DEFAULT),
        entry("min.insync.replicas", "1", DEFAULT),
    )
    assert config_changes(source, target, mm2_filter) == {
        "retention.ms": "999",
        "segment.bytes": "1048576",
        "segment.ms": None,
    }
    assert config_changes(source, target, mm2_filter, "source") == {
        "retention.ms": "999",
        "segment.bytes": "1048576",
        "segment.ms": "604800000",
        "flush.ms": "1000",
    }


def test_sync_sets_configs_the_target_does_not_report() -> None:
    # Tansu on both sides: only configs set on the topics, all labelled DEFAULT_CONFIG
    source = described(
        entry("retention.ms", "555", DEFAULT),
        entry("segment.ms", "3600000", DEFAULT),
        entry("unclean.leader.election.enable", "true", DEFAULT),
    )
    target = described(entry("retention.ms", "123", DEFAULT))
    assert config_changes(source, target, mm2_filter, "source") == {
        "retention.ms": "555",
        "segment.ms": "3600000",
    }
    # with the target's defaults nothing is copied, and nothing set on the target
    # topic itself (DYNAMIC_TOPIC_CONFIG) is there to delete
    assert config_changes(source, target, mm2_filter, "target") == {}
    assert config_changes(source, source, mm2_filter, "source") == {}


# --- when the planner syncs ---------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refresh_syncs_existing_targets_every_sync_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first refresh syncs the targets it did not just create; later refreshes
    sync again only once ``sync.topic.configs.interval.seconds`` has passed."""
    clock = Clock()
    monkeypatch.setattr(topics_module.time, "monotonic", clock)
    planner = _planner(
        sync_configs=True,
        **{
            "A->B.sync.topic.configs.interval.seconds": "30",
            "A->B.use.defaults.from": "source",
        },
    )
    on_source = {"existing": 1, "fresh": 1}
    synced: list[list[str]] = []

    def ensure(wanted: dict[str, int], timeout: float) -> set[str]:
        for t, n in wanted.items():
            planner.known[t] = MirroredTopic(t, f"A.{t}", n, 1)
        return {"fresh"} & set(wanted)  # "existing" had a target already

    monkeypatch.setattr(planner, "source_partitions", lambda timeout=30.0: dict(on_source))
    monkeypatch.setattr(planner, "_ensure_targets", ensure)
    monkeypatch.setattr(planner, "_targets_gone", lambda topics, timeout: [])
    monkeypatch.setattr(planner, "sync_configs", lambda topics, timeout: synced.append(topics))

    planner.refresh()
    assert synced == [["existing"]]
    clock.now += 29
    planner.refresh()
    assert synced == [["existing"]]
    clock.now += 1
    planner.refresh()
    assert synced == [["existing"], ["existing", "fresh"]]
    # a topic created between syncs is not synced at its creation
    on_source["late"] = 2
    clock.now += 10
    planner.refresh()
    assert synced == [["existing"], ["existing", "fresh"]]
    clock.now += 20
    planner.refresh()
    assert synced[-1] == ["existing", "fresh", "late"]


def test_use_defaults_from_for_one_flow_beats_the_global_key() -> None:
    cfg = build_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:9092",
            "B.bootstrap.servers": "b:9092",
            "A->B.enabled": "true",
            "B->A.enabled": "true",
            "use.defaults.from": "source",
            "B->A.use.defaults.from": "TARGET",
        }
    )
    assert cfg.flow("A", "B").use_defaults_from == "source"
    assert cfg.flow("B", "A").use_defaults_from == "target"


class _LateMetadataAdmin:
    """Answers DescribeConfigs of a just-created topic with UNKNOWN_TOPIC_OR_PART the
    first ``late`` times, as a KRaft broker does until the topic's metadata reaches it."""

    def __init__(self, late: int) -> None:
        self.late = late
        self.calls = 0

    def describe_configs(self, resources: list[Any], **_kw: Any) -> dict[Any, Future[Any]]:
        self.calls += 1
        out: dict[Any, Future[Any]] = {}
        for res in resources:
            fut: Future[Any] = Future()
            if self.calls <= self.late:
                fut.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            else:
                fut.set_result({"max.message.bytes": ConfigEntry("max.message.bytes", "2048")})
            out[res] = fut
        return out


def _planner(sync_configs: bool = False, **props: str) -> TopicMirrorPlanner:
    # a:9092 and b:9092 are never contacted: the broker calls are faked
    return topic_planner("a:9092", "b:9092", props, sync_configs=sync_configs)


def test_a_just_created_target_whose_metadata_is_late_is_described_again() -> None:
    """KRaft: DescribeConfigs right after CreateTopics can answer UNKNOWN_TOPIC_OR_PART;
    the mirror used to exit on it (a continuous mirror ended at a new topic)."""
    planner = _planner()
    admin = _LateMetadataAdmin(late=3)
    planner._target = admin  # type: ignore[assignment]
    assert planner._record_limits(["A.orders"], 10.0, new=["A.orders"]) == {"A.orders": 2048}
    assert admin.calls == 4


def test_an_unknown_topic_not_just_created_is_an_error_at_once() -> None:
    planner = _planner()
    admin = _LateMetadataAdmin(late=1)
    planner._target = admin  # type: ignore[assignment]
    with pytest.raises(MirrorError, match=r"describe configs of A\.orders on B"):
        planner._record_limits(["A.orders"], 10.0)
    assert admin.calls == 1


def test_a_just_created_topic_still_unknown_at_the_deadline_is_an_error() -> None:
    planner = _planner()
    planner._target = _LateMetadataAdmin(late=10**6)  # type: ignore[assignment]
    with pytest.raises(MirrorError, match="UNKNOWN_TOPIC_OR_PART"):
        planner._record_limits(["A.orders"], 0.3, new=["A.orders"])


def test_refresh_creates_a_deleted_target_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A known topic whose target was deleted (an operator mirroring it again), and a
    topic failed because its target has too few partitions whose target was then
    deleted (the refusal's way out; also for a planner that took the failure from
    another's refresh): the next refresh creates both targets again."""
    planner = _planner()
    planner.known["orders"] = MirroredTopic("orders", "A.orders", 2, 1)
    planner.failed["small"] = "target topic A.small on B has 1 partitions ..."
    planner.failed["other"] = "failed, its target still there"
    planner.refused["twice"] = "two flows write A.twice"
    ensured: list[dict[str, int]] = []
    gone_asked: list[list[str]] = []

    def ensure(wanted: dict[str, int], timeout: float) -> set[str]:
        ensured.append(dict(wanted))
        for t, n in wanted.items():
            planner.known[t] = MirroredTopic(t, f"A.{t}", n, 1)
        return set(wanted)

    def gone(topics: list[str], timeout: float) -> list[str]:
        gone_asked.append(sorted(topics))
        return [t for t in topics if t in ("orders", "small")]

    parts = {"orders": 2, "small": 3, "other": 1, "twice": 1}
    monkeypatch.setattr(planner, "source_partitions", lambda timeout=30.0: dict(parts))
    monkeypatch.setattr(planner, "_ensure_targets", ensure)
    monkeypatch.setattr(planner, "_targets_gone", gone)
    planner.refresh()
    # a refused topic is never looked at (its target may be another flow's)
    assert gone_asked == [["orders", "other", "small"]]
    assert ensured == [{"orders": 2, "small": 3}]
    assert "small" not in planner.failed and planner.failed["other"] and planner.failed["twice"]
