"""Builds a flow's :class:`FlowRuntime` from the validated configuration."""

from __future__ import annotations

from mm.config import FlowConfig, MirrorConfig
from mm.source.spec import FlowRuntime


def state_group(flow: FlowConfig) -> str:
    """The target-side group that records the mirror's position (never checkpointed:
    MM2's default group exclusions skip ``__*``, and the checkpoint job skips it too)."""
    return f"__mm.mirror.{flow.source}.{flow.target}"


def offset_syncs_topic(flow: FlowConfig) -> str:
    policy = flow.policy()
    if flow.offset_syncs_topic_location == "target":
        return policy.offset_syncs_topic(flow.source)
    return policy.offset_syncs_topic(flow.target)


def flow_runtime(cfg: MirrorConfig, flow: FlowConfig) -> FlowRuntime:
    source = cfg.cluster(flow.source)
    target = cfg.cluster(flow.target)
    return FlowRuntime(
        source=flow.source,
        target=flow.target,
        source_consumer=dict(source.librdkafka("consumer")),
        source_producer=dict(source.librdkafka("producer")),
        target_producer=dict(target.librdkafka("producer")),
        target_consumer=dict(target.librdkafka("consumer")),
        offset_syncs_topic=offset_syncs_topic(flow),
        offset_syncs_on_target=flow.offset_syncs_topic_location == "target",
        state_group=state_group(flow),
        transactional_id_prefix=f"mm.{flow.source}.{flow.target}",
        errors_tolerance=flow.errors_tolerance,
        dead_letter_topic=flow.errors_deadletterqueue_topic_name,
    )
