"""What a cluster's topic names say about replication (MM2's MirrorClient).

Answers from topic names alone, with the meaning of MM2's
``RemoteClusterUtils``/``MirrorClient``:

* heartbeat topics: ``heartbeats`` and its replicated copies (``A.heartbeats``,
  ``B.A.heartbeats``, ...), i.e. topics whose original name is ``heartbeats``;
* checkpoint topics: ``<alias>.checkpoints.internal``;
* upstream clusters: every alias that appears as a source along the chain of a
  heartbeat topic (``B.A.heartbeats`` -> ``B`` and ``A``);
* replication hops to ``alias``: over all heartbeat topics, the fewest prefixes
  to strip until ``alias`` is the source (``A.heartbeats`` -> 1 for ``A``,
  ``B.A.heartbeats`` -> 2 for ``A``), ``-1`` when no heartbeat topic leads to it
  (the alias is not upstream, i.e. unreachable by replication);
* remote topics: non-internal topics the policy says came from some cluster.

The pure functions take topic names; the ``config`` ones list the topics of a
cluster first and raise :class:`~mm_client.cluster_errors.ClusterUnavailableError`
when it does not answer within ``timeout``. Chains are followed with MM2's
cycle guards, so policies that cannot prevent cycles (identity) terminate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mm_client.connection import bootstrap_of, list_topic_names, prepare
from mm_client.errors import TopicNotOnTargetError
from mm_client.policy import ReplicationPolicy

__all__ = [
    "all_sources",
    "checkpoint_topics",
    "count_hops",
    "heartbeat_topics",
    "remote_topics",
    "replication_hops",
    "target_topics",
    "upstream_clusters",
]


# --- pure: from topic names ---------------------------------------------------------


def all_sources(topic: str, policy: ReplicationPolicy) -> set[str]:
    """Every cluster alias along ``topic``'s replication chain (MM2 ``allSources``)."""
    sources: set[str] = set()
    source = policy.topic_source(topic)
    current: str | None = topic
    while source is not None and source not in sources:
        sources.add(source)
        current = policy.upstream_topic(current) if current is not None else None
        if current is None:
            break
        source = policy.topic_source(current)
    return sources


def count_hops(topic: str, alias: str, policy: ReplicationPolicy) -> int:
    """Hops from ``alias`` to here along ``topic``'s chain, -1 if ``alias`` is not on it."""
    hops = 0
    visited: set[str] = set()
    current: str | None = topic
    while current is not None:
        hops += 1
        source = policy.topic_source(current)
        if source is None:
            return -1
        if source == alias:
            return hops
        if source in visited:
            return -1  # a cycle (identity policy): alias will never show up
        visited.add(source)
        current = policy.upstream_topic(current)
    return -1


def heartbeat_topics_in(topics: Iterable[str], policy: ReplicationPolicy) -> set[str]:
    return {t for t in topics if policy.is_heartbeats_topic(t)}


def checkpoint_topics_in(topics: Iterable[str], policy: ReplicationPolicy) -> set[str]:
    return {t for t in topics if policy.is_checkpoints_topic(t)}


def upstream_clusters_in(topics: Iterable[str], policy: ReplicationPolicy) -> set[str]:
    out: set[str] = set()
    for topic in heartbeat_topics_in(topics, policy):
        out |= all_sources(topic, policy)
    return out


def replication_hops_in(topics: Iterable[str], alias: str, policy: ReplicationPolicy) -> int:
    counts = [count_hops(t, alias, policy) for t in heartbeat_topics_in(topics, policy)]
    found = [c for c in counts if c != -1]
    return min(found) if found else -1


def remote_topics_in(
    topics: Iterable[str], policy: ReplicationPolicy, source_alias: str | None = None
) -> set[str]:
    out = set()
    for topic in topics:
        if policy.is_internal_topic(topic):
            continue
        source = policy.topic_source(topic)
        if source is not None and (source_alias is None or source == source_alias):
            out.add(topic)
    return out


# --- against a cluster --------------------------------------------------------------


def _topics(
    config: Mapping[str, Any], timeout: float, policy: ReplicationPolicy | None
) -> tuple[set[str], ReplicationPolicy]:
    conf, resolved = prepare(config, policy)
    return list_topic_names(conf, timeout), resolved


def heartbeat_topics(
    config: Mapping[str, Any],
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> set[str]:
    """Heartbeat topics on the cluster (``heartbeats``, ``A.heartbeats``, ...)."""
    topics, policy = _topics(config, timeout, replication_policy)
    return heartbeat_topics_in(topics, policy)


def checkpoint_topics(
    config: Mapping[str, Any],
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> set[str]:
    """Checkpoint topics on the cluster (``<alias>.checkpoints.internal``)."""
    topics, policy = _topics(config, timeout, replication_policy)
    return checkpoint_topics_in(topics, policy)


def upstream_clusters(
    config: Mapping[str, Any],
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> set[str]:
    """Aliases of the clusters replicating into this one, directly or not."""
    topics, policy = _topics(config, timeout, replication_policy)
    return upstream_clusters_in(topics, policy)


def replication_hops(
    config: Mapping[str, Any],
    alias: str,
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> int:
    """Fewest replication hops from cluster ``alias`` to this one; -1 if not upstream."""
    topics, policy = _topics(config, timeout, replication_policy)
    return replication_hops_in(topics, alias, policy)


def remote_topics(
    config: Mapping[str, Any],
    source_alias: str | None = None,
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> set[str]:
    """Replicated topics on the cluster (only those from ``source_alias`` if given)."""
    topics, policy = _topics(config, timeout, replication_policy)
    return remote_topics_in(topics, policy, source_alias)


def target_topics(
    config: Mapping[str, Any],
    source_alias: str,
    topics: Iterable[str],
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> list[str]:
    """The names on this (target) cluster of source ``topics`` mirrored from ``source_alias``.

    What a service subscribes to after failing over: ``["orders"]`` from ``A``
    answers ``["A.orders"]`` under MM2's default policy. Raises
    :class:`~mm_client.errors.TopicNotOnTargetError` when a mirrored copy is not
    there (never a name that subscribing would auto-create empty), naming the
    copies that are.
    """
    names = [topics] if isinstance(topics, str) else list(topics)
    conf, policy = prepare(config, replication_policy)  # once: it logs a kafka-python mapping
    on_target = list_topic_names(conf, timeout)
    remote = [policy.format_remote_topic(source_alias, t) for t in names]
    missing = [r for r in remote if r not in on_target]
    if missing:
        bootstrap = bootstrap_of(conf)
        have = sorted(remote_topics_in(on_target, policy, source_alias))
        shown = ", ".join(have[:20]) + (" ..." if len(have) > 20 else "")
        raise TopicNotOnTargetError(
            f"no mirrored copy on {bootstrap} of: "
            + ", ".join(
                f"{n!r} (expected {r!r})"
                for n, r in zip(names, remote, strict=True)
                if r in missing
            )
            + f". Topics mirrored from {source_alias} there: {shown or 'none'}. Is the mirror "
            "running for them, and is this the target cluster?",
            suggestions={n: [] for n, r in zip(names, remote, strict=True) if r in missing},
        )
    return remote
