"""Replication policies: how MirrorMaker 2 names remote and internal topics.

A policy answers two kinds of question from topic names alone: which name a
source topic gets on the target (``format_remote_topic``), and, reading a name
backwards, which cluster it came from (``topic_source``) and what it was called
one hop upstream (``upstream_topic``). The answers match MM2's
``DefaultReplicationPolicy`` and ``IdentityReplicationPolicy`` so that topic
names, and the internal topics we read and write, agree with an MM2 deployment
given the same ``replication.policy.class`` and ``replication.policy.separator``.

Invariants:

* ``upstream_topic(t)`` is ``None`` exactly when ``topic_source(t)`` is ``None``
  (for the identity policy, except that non-heartbeat topics return ``t`` itself);
* following ``upstream_topic`` always terminates: each default-policy step
  strictly shortens the name, and an identity step that returns its input stops
  the walk (``original_topic``, ``would_cycle``);
* policies are immutable (read-only properties), hashable and compare by value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Final

__all__ = [
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "ReplicationPolicy",
    "policy_from_class_name",
    "would_cycle",
]

HEARTBEATS_TOPIC: Final = "heartbeats"
OFFSET_SYNCS_PREFIX: Final = "mm2-offset-syncs"
DEFAULT_SEPARATOR: Final = "."


class ReplicationPolicy(ABC):
    """Naming rules for remote topics and MM2's internal topics.

    Subclasses supply the three naming primitives; the rest has MM2's interface
    defaults (which hard-code ``.`` as separator; ``DefaultReplicationPolicy``
    overrides them to honour its separator).
    """

    __slots__ = ()

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """Name on the target of ``topic`` replicated from cluster ``source_alias``."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster ``topic`` was replicated from, or ``None`` if it is local."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Name of ``topic`` one hop upstream (itself possibly remote), ``None`` if local."""

    def original_topic(self, topic: str) -> str:
        """Name of the topic at the start of its replication chain (``topic`` if local)."""
        # A loop, not recursion as in MM2: same result, no recursion limit on deep chains.
        current = topic
        while True:
            upstream = self.upstream_topic(current)
            if upstream is None or upstream == current:
                return current
            current = upstream

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"{OFFSET_SYNCS_PREFIX}.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """True for ``heartbeats`` and its copies (``A.heartbeats``, ``B.A.heartbeats``)."""
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """MM2's own bookkeeping topics (offset syncs, checkpoints, its Connect topics)."""
        return (topic.startswith("mm2") and topic.endswith(".internal")) or (
            self.is_checkpoints_topic(topic)
        )

    def is_internal_topic(self, topic: str) -> bool:
        """Never replicated: MM2's, Kafka's (``__*``, ``.*``), Connect's (``*-internal``)."""
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith(("__", "."))
            or topic.endswith((".internal", "-internal"))
        )


class DefaultReplicationPolicy(ReplicationPolicy):
    """Remote topics are ``<source alias><separator><topic>``, e.g. ``A.orders``.

    ``topic_source`` splits on the separator like Java's ``String.split`` (trailing
    empty pieces dropped): the name is remote when at least two pieces remain, and
    its source is the first piece. So ``A.orders`` -> ``A``, ``orders`` -> ``None``,
    ``A.`` -> ``None``, ``.orders`` -> ``""`` (as in MM2).

    Internal topic names use ``separator`` too (MM2 3.1+), unless
    ``internal_topic_separator_enabled`` is false (MM2's
    ``replication.policy.internal.topic.separator.enabled``), which restores ``.``.
    """

    __slots__ = ("_internal_separator", "_separator")

    def __init__(
        self, separator: str = DEFAULT_SEPARATOR, *, internal_topic_separator_enabled: bool = True
    ) -> None:
        if not isinstance(separator, str) or not separator:
            raise ValueError(f"replication policy separator must be non-empty: {separator!r}")
        self._separator = separator
        self._internal_separator = separator if internal_topic_separator_enabled else "."

    @property
    def separator(self) -> str:
        """Separator between source alias and topic (``replication.policy.separator``)."""
        return self._separator

    def _repr_extra(self) -> str:
        if self._internal_separator != self._separator:
            return ", internal_topic_separator_enabled=False"
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(separator={self.separator!r}{self._repr_extra()})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DefaultReplicationPolicy) or type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def _key(self) -> tuple[object, ...]:
        return (self.separator, self._internal_separator)

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        head, sep, tail = topic.partition(self.separator)
        # Java's split drops trailing empty pieces, so "A." or "A.." is not remote:
        # some non-empty piece must follow the first separator.
        if not sep or not tail.replace(self.separator, ""):
            return None
        return head

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def _internal_suffix(self) -> str:
        return f"{self._internal_separator}internal"

    def _checkpoints_suffix(self) -> str:
        return f"{self._internal_separator}checkpoints{self._internal_suffix()}"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator
        return f"{OFFSET_SYNCS_PREFIX}{sep}{cluster_alias}{self._internal_suffix()}"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}{self._checkpoints_suffix()}"

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (topic.startswith("mm2") and topic.endswith(self._internal_suffix())) or (
            self.is_checkpoints_topic(topic)
        )


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names (``orders`` stays ``orders``), except heartbeats.

    Heartbeat topics (any name ending in ``heartbeats``) follow the default policy,
    so ``A.heartbeats`` still shows where heartbeats came from. For every other
    topic the name carries no origin: ``topic_source`` returns the configured
    ``source_cluster_alias`` (MM2's ``source.cluster.alias``; ``None`` when not set)
    and ``upstream_topic`` returns the topic itself.

    This policy cannot stop replication cycles (``would_cycle`` is false unless the
    configured source alias is the target), so the topology must be acyclic.
    """

    __slots__ = ("_source_cluster_alias",)

    def __init__(
        self,
        source_cluster_alias: str | None = None,
        separator: str = DEFAULT_SEPARATOR,
        *,
        internal_topic_separator_enabled: bool = True,
    ) -> None:
        super().__init__(
            separator, internal_topic_separator_enabled=internal_topic_separator_enabled
        )
        self._source_cluster_alias = source_cluster_alias

    @property
    def source_cluster_alias(self) -> str | None:
        """Alias reported as every non-heartbeat topic's source (``source.cluster.alias``)."""
        return self._source_cluster_alias

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(source_cluster_alias={self.source_cluster_alias!r}, "
            f"separator={self.separator!r}{self._repr_extra()})"
        )

    def _key(self) -> tuple[object, ...]:
        return (*super()._key(), self.source_cluster_alias)

    def _looks_like_heartbeats(self, topic: str) -> bool:
        # A plain suffix test, as MM2 does: "A.heartbeats" and also "myheartbeats".
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeats(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return super().topic_source(topic)
        return self._source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return super().upstream_topic(topic)
        return topic


def would_cycle(policy: ReplicationPolicy, topic: str, target_alias: str) -> bool:
    """True if replicating ``topic`` to cluster ``target_alias`` would send it home.

    Walks the topic's replication chain (``topic_source``/``upstream_topic``) and
    reports a cycle when any hop names ``target_alias`` as its source, as MM2's
    source connector does before it picks a topic. The walk stops at a local topic
    or at a policy that cannot see further upstream (identity: upstream is itself).
    """
    current = topic
    while True:
        source = policy.topic_source(current)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(current)
        if upstream is None or upstream == current:
            return False
        current = upstream


_JAVA_PACKAGE: Final = "org.apache.kafka.connect.mirror."
_POLICY_CLASSES: Final[dict[str, type[DefaultReplicationPolicy]]] = {
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}
ACCEPTED_POLICY_CLASS_NAMES: Final = tuple(
    name for short in _POLICY_CLASSES for name in (_JAVA_PACKAGE + short, short)
)


def policy_from_class_name(
    class_name: str,
    separator: str = DEFAULT_SEPARATOR,
    source_cluster_alias: str | None = None,
    *,
    internal_topic_separator_enabled: bool = True,
) -> ReplicationPolicy:
    """Build the policy named by ``replication.policy.class`` (Java FQCN or short name).

    ``source_cluster_alias`` only matters for the identity policy. Raises
    ``ValueError`` listing the accepted names for anything else, since a custom
    Java policy cannot be reproduced here and guessing would misname topics.
    """
    name = class_name.strip()
    short = name.removeprefix(_JAVA_PACKAGE)
    # Only the exact FQCN or the bare class name: "com.acme.DefaultReplicationPolicy" is custom.
    cls = _POLICY_CLASSES.get(short) if name in ACCEPTED_POLICY_CLASS_NAMES else None
    if cls is None:
        raise ValueError(
            f"unsupported replication.policy.class {class_name!r}; accepted: "
            + ", ".join(ACCEPTED_POLICY_CLASS_NAMES)
        )
    if cls is IdentityReplicationPolicy:
        return IdentityReplicationPolicy(
            source_cluster_alias,
            separator,
            internal_topic_separator_enabled=internal_topic_separator_enabled,
        )
    return cls(separator, internal_topic_separator_enabled=internal_topic_separator_enabled)
