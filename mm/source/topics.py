"""Which source topics a flow mirrors, and their topics on the target.

Selection (MM2's rules): a topic is mirrored when the flow's ``topics`` /
``topics.exclude`` select it, or when it is a heartbeats topic (always
mirrored); never when it is internal (``__*``, ``*.internal``, MM2's own
topics) or when mirroring it would send it back to a cluster it came from.

Target topics are created with the source's partition count and its explicitly
set configs minus ``config.properties.exclude``. A target topic with *fewer*
partitions than its source fails that topic (partitions are never remapped);
more partitions are allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from mm_client.policy import ReplicationPolicy, would_cycle

from mm.kafka.errors import wrap

DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # Kafka's broker default message.max.bytes


@dataclass(frozen=True)
class MirroredTopic:
    source_topic: str
    target_topic: str
    partitions: int
    max_record_bytes: int


def select_topics(
    names: Iterable[str],
    *,
    topic_filter: Callable[[str], bool],
    policy: ReplicationPolicy,
    target_alias: str,
    extra_internal: Callable[[str], bool] = lambda _t: False,
) -> list[str]:
    """The topics of ``names`` that the flow mirrors, sorted (pure)."""
    selected = []
    for t in names:
        if would_cycle(policy, t, target_alias):
            continue
        if policy.is_heartbeats_topic(t):
            selected.append(t)
            continue
        if policy.is_internal_topic(t) or extra_internal(t):
            continue
        if topic_filter(t):
            selected.append(t)
    return sorted(selected)


def copyable_configs(
    described: dict[str, Any], config_filter: Callable[[str], bool]
) -> dict[str, str]:
    """Source topic configs worth copying: set on the topic itself, not excluded (pure)."""
    out: dict[str, str] = {}
    for name, entry in described.items():
        source = getattr(entry, "source", None)
        if source is not None and source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value:
            continue
        if getattr(entry, "is_sensitive", False) or entry.value is None:
            continue
        if config_filter(name):
            out[name] = entry.value
    return out


class TopicMirrorPlanner:
    """Finds the flow's topics on the source and makes their targets exist (driver side)."""

    def __init__(
        self,
        source_admin: dict[str, Any],
        target_admin: dict[str, Any],
        *,
        topic_filter: Callable[[str], bool],
        config_filter: Callable[[str], bool],
        policy: ReplicationPolicy,
        source_alias: str,
        target_alias: str,
        replication_factor: int,
        sync_configs: bool,
        log: Any,
    ) -> None:
        self._source = AdminClient(source_admin)
        self._target = AdminClient(target_admin)
        self._topic_filter = topic_filter
        self._config_filter = config_filter
        self._policy = policy
        self._source_alias = source_alias
        self._target_alias = target_alias
        self._rf = replication_factor
        self._sync_configs = sync_configs
        self._log = log
        self.known: dict[str, MirroredTopic] = {}
        self.failed: dict[str, str] = {}

    def source_partitions(self, timeout: float = 30.0) -> dict[str, int]:
        try:
            md = self._source.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise wrap(exc, f"list topics on source cluster {self._source_alias}") from exc
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def refresh(self, timeout: float = 30.0) -> dict[str, MirroredTopic]:
        """Discover topics, create/check their targets; returns the mirrorable ones."""
        partitions = self.source_partitions(timeout)
        selected = select_topics(
            partitions,
            topic_filter=self._topic_filter,
            policy=self._policy,
            target_alias=self._target_alias,
        )
        new = [t for t in selected if t not in self.known and t not in self.failed]
        grown = [
            t for t in selected if t in self.known and partitions[t] > self.known[t].partitions
        ]
        if new or grown:
            self._ensure_targets({t: partitions[t] for t in [*new, *grown]}, timeout)
        elif self._sync_configs and self.known:
            self.sync_configs(list(self.known), timeout)
        return dict(self.known)

    def _describe(
        self, admin: AdminClient, topics: list[str], timeout: float, where: str
    ) -> dict[str, dict[str, Any]]:
        if not topics:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        out: dict[str, dict[str, Any]] = {}
        for res, fut in admin.describe_configs(resources, request_timeout=timeout).items():
            try:
                out[res.name] = fut.result(timeout)
            except KafkaException as exc:
                raise wrap(exc, f"describe configs of {res.name} on {where}") from exc
        return out

    def _ensure_targets(self, wanted: dict[str, int], timeout: float) -> None:
        source_configs = self._describe(self._source, list(wanted), timeout, self._source_alias)
        names = {t: self._policy.format_remote_topic(self._source_alias, t) for t in wanted}
        try:
            target_md = self._target.list_topics(timeout=timeout).topics
        except KafkaException as exc:
            raise wrap(exc, f"list topics on target cluster {self._target_alias}") from exc
        to_create = []
        for t, n in wanted.items():
            target = names[t]
            existing = target_md.get(target)
            if existing is not None and existing.error is None:
                if len(existing.partitions) < n:
                    msg = (
                        f"target topic {target} on {self._target_alias} has "
                        f"{len(existing.partitions)} partitions but source topic {t} has {n}; "
                        "partitions are never remapped: add partitions to the target topic "
                        f"(at least {n}) or delete it so the mirror recreates it"
                    )
                    self.failed[t] = msg
                    self.known.pop(t, None)
                    self._log.error(
                        "topic cannot be mirrored", topic=t, target_topic=target, reason=msg
                    )
                continue
            configs = copyable_configs(source_configs.get(t, {}), self._config_filter)
            to_create.append(NewTopic(target, n, self._rf, config=configs))
        if to_create:
            futures = self._target.create_topics(to_create, request_timeout=timeout)
            for target, fut in futures.items():
                try:
                    fut.result(timeout)
                    self._log.info("created target topic", target_topic=target)
                except KafkaException as exc:
                    err = exc.args[0]
                    if getattr(err, "name", lambda: "")() != "TOPIC_ALREADY_EXISTS":
                        raise wrap(exc, f"create topic {target} on {self._target_alias}") from exc
        ok = [t for t in wanted if t not in self.failed]
        limits = self._describe(self._target, [names[t] for t in ok], timeout, self._target_alias)
        for t in ok:
            entry = limits.get(names[t], {}).get("max.message.bytes")
            limit = int(entry.value) if entry is not None and entry.value else 0
            self.known[t] = MirroredTopic(
                t, names[t], wanted[t], limit or DEFAULT_MAX_MESSAGE_BYTES
            )

    def sync_configs(self, topics: list[str], timeout: float) -> None:
        """Bring target topic configs in line with the source (sync.topic.configs)."""
        source = self._describe(self._source, topics, timeout, self._source_alias)
        target_names = [self.known[t].target_topic for t in topics]
        target = self._describe(self._target, target_names, timeout, self._target_alias)
        resources = []
        for t in topics:
            want = copyable_configs(source.get(t, {}), self._config_filter)
            have = target.get(self.known[t].target_topic, {})
            changes = [
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in want.items()
                if k not in have or have[k].value != v
            ]
            if changes:
                resources.append(
                    ConfigResource(
                        ResourceType.TOPIC, self.known[t].target_topic, incremental_configs=changes
                    )
                )
        if not resources:
            return
        for res, fut in self._target.incremental_alter_configs(resources).items():
            try:
                fut.result(timeout)
                self._log.info("synced topic configs", target_topic=res.name)
            except KafkaException as exc:
                # keep mirroring: a config we cannot copy is worth a warning, not an outage
                self._log.warning(
                    "topic config sync failed",
                    target_topic=res.name,
                    error=str(wrap(exc, "alter configs")),
                )
