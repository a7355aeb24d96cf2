"""Topic ACL sync (``sync.topic.acls.enabled``): MM2's mapping of source ACLs to
target ACLs, as a pure function; :mod:`mm.source.acl_sync` runs it in the mirror.

MM2 (``MirrorSourceConnector.syncTopicAcls``) lists the source's ACL bindings on
topics and creates, on the target, one binding per source binding that is

* on a TOPIC resource with a LITERAL pattern (prefixed patterns are skipped:
  their names cannot be mapped to remote names one to one). Unlike MM2, the
  LITERAL wildcard ``*`` is skipped too: MM2 would create a binding on a topic
  literally named ``A.*``, which grants nothing;
* not ALLOW WRITE: nobody but the mirror may write to a remote topic, so write
  permissions are never copied (DENY WRITE is, it only takes rights away);
* on a topic the flow mirrors (the flow's topic filter, heartbeats included,
  internal topics and cycles excluded: the mirror's own selection);

with the topic renamed to its remote name and ALLOW ALL downgraded to ALLOW READ
(ALL would grant WRITE). Everything else (principal, host, operation, permission)
is kept: READ, DESCRIBE, DESCRIBE_CONFIGS, ... and every DENY are copied as is.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from mm.config import FlowConfig
from mm.source.topics import select_topics

__all__ = ["replicated_acl", "target_acl_bindings"]


def replicated_acl(binding: AclBinding) -> bool:
    """MM2's ``shouldReplicateAcl`` plus the resource filter of ``syncTopicAcls``."""
    if binding.restype != ResourceType.TOPIC:
        return False
    if binding.resource_pattern_type != ResourcePatternType.LITERAL or binding.name == "*":
        return False
    return not (
        binding.permission_type == AclPermissionType.ALLOW
        and binding.operation == AclOperation.WRITE
    )


def _target_binding(binding: AclBinding, remote: str) -> AclBinding:
    operation = binding.operation
    if binding.permission_type == AclPermissionType.ALLOW and operation == AclOperation.ALL:
        operation = AclOperation.READ  # MM2's downgradeAllowAllACL
    return AclBinding(
        ResourceType.TOPIC,
        remote,
        ResourcePatternType.LITERAL,
        binding.principal,
        binding.host,
        operation,
        binding.permission_type,
    )


def target_acl_bindings(
    flow: FlowConfig, source_bindings: Iterable[AclBinding]
) -> list[AclBinding]:
    """The bindings to create on ``flow``'s target for the source's ``source_bindings``,
    in input order, duplicates removed (two source bindings can map to one, e.g.
    ALLOW ALL and ALLOW READ for the same principal)."""
    candidates = [b for b in source_bindings if replicated_acl(b)]
    policy = flow.policy()
    mirrored = set(
        select_topics(
            {b.name for b in candidates},
            topic_filter=flow.topic_filter,
            policy=policy,
            target_alias=flow.target,
        )
    )
    out: dict[AclBinding, None] = {}
    for b in candidates:
        if b.name in mirrored:
            out[_target_binding(b, policy.format_remote_topic(flow.source, b.name))] = None
    return list(out)
