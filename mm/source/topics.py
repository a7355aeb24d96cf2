"""Which source topics a flow mirrors, and their topics on the target.

Selection (MM2's rules): a topic is mirrored when the flow's ``topics`` /
``topics.exclude`` select it, or when it is a heartbeats topic (always
mirrored); never when it is internal (``__*``, ``*.internal``, MM2's own
topics) or when mirroring it would send it back to a cluster it came from.

Target topics are created with the source's partition count and its configs,
chosen as MM2's ``MirrorSourceConnector.targetConfig`` chooses them: never
read-only, sensitive or null-valued entries, never ``STATIC_BROKER_CONFIG``
ones, never names matching ``config.properties.exclude``; and entries the
broker labels ``DEFAULT_CONFIG`` (Java's ``ConfigEntry.isDefault()``) only with
``use.defaults.from = source`` (KIP-894). With the default ``target`` the remote
topic keeps the target cluster's defaults, so what is copied is what was set on
the source topic (``DYNAMIC_TOPIC_CONFIG``) or on its brokers
(``DYNAMIC_BROKER_CONFIG``, ``DYNAMIC_DEFAULT_BROKER_CONFIG``), as in MM2.

Brokers that label a topic's own settings ``DEFAULT_CONFIG`` (the embedded one
does, see :mod:`mm.kafka.profile`) get nothing copied with ``target``;
``use.defaults.from = source`` copies them.

``sync.topic.configs.enabled`` re-syncs existing remote topics every
``sync.topic.configs.interval.seconds`` (checked at each topic refresh, so
never more often than ``refresh.topics.interval.seconds``) with
IncrementalAlterConfigs, as MM2 does: SET for a copied entry whose value differs
on the target, DELETE (back to the target's default) for a source default under
``target`` when the target topic sets that config itself. A failed sync is a
warning; mirroring goes on.

A target topic with *fewer* partitions than its source fails that topic
(partitions are never remapped); more partitions are allowed.

Two flows into one cluster whose policies give two source topics the same
target name (``A->C`` and ``B->C`` with ``IdentityReplicationPolicy``, both
mirroring ``orders``) would mix two logs in one topic: :func:`target_collisions`
finds them and the driver refuses the topic in every such flow (``refused``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from mm_client.kafka.admin import topic_created
from mm_client.kafka.clients import new_admin
from mm_client.kafka.errors import kafka_error, wrap
from mm_client.policy import ReplicationPolicy, would_cycle

from mm.errors import MirrorError

DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # Kafka's broker default message.max.bytes

# use.defaults.from (KIP-894): whose defaults a remote topic gets
UseDefaultsFrom = Literal["target", "source"]

_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
_STATIC_BROKER = ConfigSource.STATIC_BROKER_CONFIG.value
_DEFAULT = ConfigSource.DEFAULT_CONFIG.value


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
        # MM2's shouldReplicateTopic: (filter or heartbeats) and not internal and not a cycle
        if policy.is_internal_topic(t) or extra_internal(t):
            continue
        if would_cycle(policy, t, target_alias):
            continue
        if policy.is_heartbeats_topic(t) or topic_filter(t):
            selected.append(t)
    return sorted(selected)


def target_collisions(
    claims: Mapping[str, tuple[str, Mapping[str, str]]],
) -> dict[str, dict[str, str]]:
    """Source topics of different flows that would be mirrored into one target topic (pure).

    ``claims``: flow name (``A->C``) -> (target alias, {source topic: target topic}).
    Returns flow name -> {source topic: why it is refused}, for every flow involved.
    """
    by_target: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for flow, (target, topics) in claims.items():
        for source_topic, target_topic in topics.items():
            by_target.setdefault((target, target_topic), []).append((flow, source_topic))
    out: dict[str, dict[str, str]] = {}
    for (target, target_topic), writers in sorted(by_target.items()):
        if len({f for f, _ in writers}) < 2:
            continue
        who = " and ".join(
            f"topic {t} of {f.split('->')[0]} (flow {f})" for f, t in sorted(writers)
        )
        msg = (
            f"target topic {target_topic} on {target} would receive {who}; one topic cannot "
            "hold two sources' records (their offsets, the mirror's positions and the "
            "checkpoints would mix), so no flow mirrors it: exclude it from all flows but "
            "one (<flow>.topics.exclude) or use a replication policy that prefixes the "
            "source alias (DefaultReplicationPolicy)"
        )
        for f, t in writers:
            out.setdefault(f, {})[t] = msg
    return out


def _source_of(entry: Any) -> int | None:
    source = getattr(entry, "source", None)  # an int from describe_configs, or an enum
    return None if source is None else int(getattr(source, "value", source))


def _is_default(entry: Any) -> bool:
    """Java's ``ConfigEntry.isDefault()``: the broker labels the value DEFAULT_CONFIG."""
    source = _source_of(entry)
    if source is None:
        return bool(getattr(entry, "is_default", False))
    return source == _DEFAULT


def _replicable(name: str, entry: Any, config_filter: Callable[[str], bool]) -> bool:
    """MM2's filters whatever ``use.defaults.from`` says."""
    return (
        not getattr(entry, "is_read_only", False)
        and not getattr(entry, "is_sensitive", False)
        and _source_of(entry) != _STATIC_BROKER
        and config_filter(name)
    )


def copyable_configs(
    described: dict[str, Any],
    config_filter: Callable[[str], bool],
    use_defaults_from: UseDefaultsFrom = "target",
) -> dict[str, str]:
    """Configs a new remote topic is created with, from the source's described ones (pure).

    Not read-only, sensitive, null-valued, STATIC_BROKER_CONFIG nor excluded by
    ``config_filter``; DEFAULT_CONFIG entries only when ``use_defaults_from`` is
    ``"source"``.
    """
    out: dict[str, str] = {}
    for name, entry in described.items():
        if entry.value is None or not _replicable(name, entry, config_filter):
            continue
        if _is_default(entry) and use_defaults_from != "source":
            continue  # the target's own default applies
        out[name] = entry.value
    return out


def config_changes(
    source: dict[str, Any],
    target: dict[str, Any],
    config_filter: Callable[[str], bool],
    use_defaults_from: UseDefaultsFrom = "target",
) -> dict[str, str | None]:
    """What syncing a remote topic alters: name -> value to SET, or None to DELETE (pure).

    ``source`` and ``target`` are the two topics' described configs. As MM2's
    incremental sync: a replicable source entry is SET on the target, except a
    DEFAULT_CONFIG one under ``use_defaults_from="target"``, which is DELETEd
    from the target topic so the target's default applies. Only real changes are
    returned: a SET whose value the target already has, or a DELETE of a config
    the target topic does not set itself (DYNAMIC_TOPIC_CONFIG), is left out.
    """
    changes: dict[str, str | None] = {}
    for name, entry in source.items():
        if not _replicable(name, entry, config_filter):
            continue
        have = target.get(name)
        if _is_default(entry) and use_defaults_from != "source":
            if have is not None and _source_of(have) == _TOPIC_CONFIG:
                changes[name] = None
        elif entry.value is not None and (have is None or have.value != entry.value):
            changes[name] = entry.value
    return changes


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
        sync_configs_interval: float,
        use_defaults_from: UseDefaultsFrom,
        log: Any,
        refused: Mapping[str, str] | None = None,
        topic_ids_path: str | None = None,
        state_group: str = "",
    ) -> None:
        self._source = new_admin(source_admin)
        self._target = new_admin(target_admin)
        self._topic_filter = topic_filter
        self._config_filter = config_filter
        self._policy = policy
        self._source_alias = source_alias
        self._target_alias = target_alias
        self._rf = replication_factor
        self._sync_configs = sync_configs
        self._sync_interval = sync_configs_interval
        self._last_sync: float | None = None  # monotonic; None: sync at the first refresh
        self._use_defaults_from: UseDefaultsFrom = use_defaults_from
        self._log = log
        self.known: dict[str, MirroredTopic] = {}
        self.failed: dict[str, str] = {}
        # source topics never mirrored, with why (see target_collisions)
        self.refused: dict[str, str] = dict(refused or {})
        # where the source topics' IDs are kept (mm.source.topic_ids); None: not checked
        self._topic_ids = None if topic_ids_path is None else Path(topic_ids_path)
        self._state_group = state_group
        self._ids_warned = False

    def source_partitions(self, timeout: float = 30.0) -> dict[str, int]:
        try:
            md = self._source.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise wrap(exc, f"list topics on source cluster {self._source_alias}") from exc
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def selected(self, timeout: float = 30.0) -> list[str]:
        """The source topics the flow's settings select now (no target is touched)."""
        return select_topics(
            self.source_partitions(timeout),
            topic_filter=self._topic_filter,
            policy=self._policy,
            target_alias=self._target_alias,
        )

    def refresh(self, timeout: float = 30.0) -> dict[str, MirroredTopic]:
        """Discover topics, create/check their targets, sync configs when due.

        Returns the mirrorable topics. Configs of existing remote topics are synced
        at the first refresh and then every ``sync_configs_interval`` seconds (at
        the first refresh after it elapsed); targets created by this refresh
        already have the source's configs and are left out.
        """
        partitions = self.source_partitions(timeout)
        selected = select_topics(
            partitions,
            topic_filter=self._topic_filter,
            policy=self._policy,
            target_alias=self._target_alias,
        )
        for t in selected:
            if t in self.refused:
                self.failed[t] = self.refused[t]
                self.known.pop(t, None)
        self._check_topic_ids([t for t in selected if t not in self.refused], timeout)
        looked_at = [
            t for t in selected if t in self.known or (t in self.failed and t not in self.refused)
        ]
        for t in self._targets_gone(looked_at, timeout):
            # deleted by an operator, to mirror the topic again (or, when it did not
            # fit, so that the mirror re-creates it): looked at again as a new topic
            # (a recreated source topic is still refused by its ID, above, until then)
            self._log.info(
                "target topic deleted: creating it again",
                topic=t,
                target_topic=self._policy.format_remote_topic(self._source_alias, t),
            )
            self.known.pop(t, None)
            self.failed.pop(t, None)
        new = [t for t in selected if t not in self.known and t not in self.failed]
        grown = [
            t for t in selected if t in self.known and partitions[t] > self.known[t].partitions
        ]
        created: set[str] = set()
        if new or grown:
            created = self._ensure_targets({t: partitions[t] for t in [*new, *grown]}, timeout)
        if self._sync_configs and self._sync_due():
            self._last_sync = time.monotonic()
            existing = [t for t in self.known if t not in created]
            if existing:
                try:
                    self.sync_configs(existing, timeout)
                except MirrorError as exc:
                    # keep mirroring: stale configs on the target are worth a warning
                    self._log.warning("topic config sync failed", error=str(exc))
        return dict(self.known)

    def _check_topic_ids(self, topics: list[str], timeout: float) -> None:
        """Refuse the topics recreated since their ID was recorded; record new ones."""
        if self._topic_ids is None or not topics:
            return
        from mm.source import topic_ids

        try:
            current = self._source_topic_ids(topics, timeout)
        except MirrorError as exc:
            # the check needs the IDs; without them the mirror goes on (as it did before
            # topic IDs existed) but says so, once
            if not self._ids_warned:
                self._ids_warned = True
                self._log.warning(
                    "source topic IDs not read: a topic deleted and recreated under the "
                    "same name is not detected",
                    error=str(exc),
                )
            return
        try:
            known = topic_ids.load(self._topic_ids)
        except ValueError as exc:
            raise MirrorError(str(exc)) from None
        keep, recreated = topic_ids.compare(known, current)
        if recreated:
            absent = self._targets_gone(list(recreated), timeout)
            keep, recreated, adopted = topic_ids.adopt_recreated(keep, recreated, absent)
            for t in adopted:
                self._log.info(
                    "source topic recreated and its target topic deleted: mirroring the new "
                    "topic from its start",
                    topic=t,
                    topic_id=keep[t],
                )
                self.failed.pop(t, None)
        if keep != known:
            topic_ids.save(self._topic_ids, keep)
        for t, (old, new) in recreated.items():
            msg = topic_ids.recreated_message(
                t,
                old,
                new,
                source=self._source_alias,
                target=self._target_alias,
                target_topic=self._policy.format_remote_topic(self._source_alias, t),
                state_group=self._state_group,
                path=self._topic_ids,
            )
            if self.failed.get(t) != msg:
                self._log.error("topic cannot be mirrored", topic=t, reason=msg)
            self.failed[t] = msg
            self.known.pop(t, None)

    def _targets_gone(self, topics: list[str], timeout: float) -> list[str]:
        """The source topics among ``topics`` whose target topic the target cluster
        does not list (one metadata request for all)."""
        if not topics:
            return []
        try:
            # all topics: a request naming one may create it (auto.create.topics.enable)
            md = self._target.list_topics(timeout=timeout).topics
        except KafkaException as exc:
            raise wrap(exc, f"list topics on target cluster {self._target_alias}") from exc
        gone = []
        for t in topics:
            found = md.get(self._policy.format_remote_topic(self._source_alias, t))
            if found is None or found.error is not None:
                gone.append(t)
        return gone

    def _source_topic_ids(self, topics: list[str], timeout: float) -> dict[str, str]:
        from confluent_kafka import TopicCollection

        futures = self._source.describe_topics(TopicCollection(topics), request_timeout=timeout)
        out: dict[str, str] = {}
        for name, fut in futures.items():
            try:
                desc = fut.result(timeout)
            except TimeoutError:
                # (a cluster that was frozen may take a while to answer again)
                raise MirrorError(
                    f"describe topic {name} on {self._source_alias}: no answer within {timeout:g}s"
                ) from None
            except KafkaException as exc:
                err = kafka_error(exc)
                if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue  # deleted since it was listed: the next refresh sees
                raise wrap(exc, f"describe topic {name} on {self._source_alias}") from exc
            if desc.topic_id is not None:
                out[name] = str(desc.topic_id)
        return out

    def seed(self, known: dict[str, MirroredTopic], failed: dict[str, str], age: float) -> None:
        """Start from another planner's refresh done ``age`` seconds ago (same flow):
        its topics exist on the target and its config sync counts as done then."""
        self.known = dict(known)
        self.failed = dict(failed)
        self._last_sync = time.monotonic() - age

    def _sync_due(self) -> bool:
        return self._last_sync is None or time.monotonic() - self._last_sync >= self._sync_interval

    def _describe(
        self,
        admin: AdminClient,
        topics: list[str],
        timeout: float,
        where: str,
        new: Iterable[str] = (),
    ) -> dict[str, dict[str, Any]]:
        """The configs of ``topics``. Those in ``new`` were just created: on a KRaft
        cluster their metadata can reach the broker after CreateTopics returned, so
        UNKNOWN_TOPIC_OR_PART is asked again (with a short backoff) until ``timeout``."""
        out: dict[str, dict[str, Any]] = {}
        todo, fresh = list(topics), set(new)
        deadline = time.monotonic() + timeout
        backoff = 0.05
        while todo:
            resources = [ConfigResource(ResourceType.TOPIC, t) for t in todo]
            again = []
            for res, fut in admin.describe_configs(resources, request_timeout=timeout).items():
                try:
                    out[res.name] = fut.result(timeout)
                except TimeoutError:
                    raise MirrorError(
                        f"describe configs of {res.name} on {where}: no answer within {timeout:g}s"
                    ) from None
                except KafkaException as exc:
                    err = kafka_error(exc)
                    unknown = err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
                    if unknown and res.name in fresh and time.monotonic() < deadline:
                        again.append(res.name)
                        continue
                    raise wrap(exc, f"describe configs of {res.name} on {where}") from exc
            todo = again
            if todo:
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        return out

    def _ensure_targets(self, wanted: dict[str, int], timeout: float) -> set[str]:
        """Create or check the targets of ``wanted``; returns the source topics whose
        target this call created."""
        source_configs = self._describe(self._source, list(wanted), timeout, self._source_alias)
        names = {t: self._policy.format_remote_topic(self._source_alias, t) for t in wanted}
        try:
            target_md = self._target.list_topics(timeout=timeout).topics
        except KafkaException as exc:
            raise wrap(exc, f"list topics on target cluster {self._target_alias}") from exc
        to_create = []
        created: set[str] = set()
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
            configs = copyable_configs(
                source_configs.get(t, {}), self._config_filter, self._use_defaults_from
            )
            to_create.append(NewTopic(target, n, self._rf, config=configs))
            created.add(t)
        if to_create:
            futures = self._target.create_topics(to_create, request_timeout=timeout)
            for target, fut in futures.items():
                try:
                    if topic_created(fut, timeout):
                        self._log.info("created target topic", target_topic=target)
                except KafkaException as exc:
                    raise wrap(exc, f"create topic {target} on {self._target_alias}") from exc
        ok = [t for t in wanted if t not in self.failed]
        limits = self._record_limits(
            [names[t] for t in ok], timeout, new=[names[t] for t in created]
        )
        for t in ok:
            self.known[t] = MirroredTopic(t, names[t], wanted[t], limits[names[t]])
        return created

    def _record_limits(
        self, targets: list[str], timeout: float, new: Iterable[str] = ()
    ) -> dict[str, int]:
        """max.message.bytes of each target topic (Kafka's default when not reported);
        ``new``: the targets just created."""
        described = self._describe(self._target, targets, timeout, self._target_alias, new)
        out = {}
        for name in targets:
            entry = described.get(name, {}).get("max.message.bytes")
            limit = int(entry.value) if entry is not None and entry.value else 0
            out[name] = limit or DEFAULT_MAX_MESSAGE_BYTES
        return out

    def sync_configs(self, topics: list[str], timeout: float) -> None:
        """Bring remote topic configs in line with the source (sync.topic.configs)."""
        source = self._describe(self._source, topics, timeout, self._source_alias)
        target_names = [self.known[t].target_topic for t in topics]
        target = self._describe(self._target, target_names, timeout, self._target_alias)
        resources = []
        by_target = {self.known[t].target_topic: t for t in topics}
        limit_changed = []
        for t in topics:
            name = self.known[t].target_topic
            changes = config_changes(
                source.get(t, {}),
                target.get(name, {}),
                self._config_filter,
                self._use_defaults_from,
            )
            if changes:
                entries = [
                    ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                    if v is not None
                    else ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k, v in sorted(changes.items())
                ]
                resources.append(
                    ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
                )
                if "max.message.bytes" in changes:
                    limit_changed.append(name)
        if not resources:
            return
        futures = self._target.incremental_alter_configs(resources, request_timeout=timeout)
        for res, fut in futures.items():
            try:
                fut.result(timeout)
                self._log.info("synced topic configs", target_topic=res.name)
            except TimeoutError:
                self._log.warning(
                    "topic config sync failed",
                    target_topic=res.name,
                    error=f"alter configs: no answer within {timeout:g}s",
                )
            except KafkaException as exc:
                # keep mirroring: a config we cannot copy is worth a warning, not an outage
                self._log.warning(
                    "topic config sync failed",
                    target_topic=res.name,
                    error=str(wrap(exc, "alter configs")),
                )
        if limit_changed:  # records are checked against the target's limit: keep it current
            for name, limit in self._record_limits(limit_changed, timeout).items():
                t = by_target[name]
                mt = self.known[t]
                self.known[t] = MirroredTopic(t, name, mt.partitions, limit)
