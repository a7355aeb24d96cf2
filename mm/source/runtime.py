"""Builds a flow's :class:`FlowRuntime` and :class:`MirrorPlan` from the validated
configuration (driver side)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mm.config import FlowConfig, MirrorConfig
from mm.source.plan import MirrorPlan, NameFilter
from mm.source.spec import DEFAULT_TXN_TIMEOUT_MS, FlowRuntime
from mm.source.topic_ids import topic_ids_file
from mm.source.topics import TopicMirrorPlanner


def state_group(flow: FlowConfig) -> str:
    """The target-side group that records the mirror's position (never checkpointed:
    MM2's default group exclusions skip ``__*``, and the checkpoint job skips it too)."""
    return f"__mm.mirror.{flow.source}.{flow.target}"


def offset_syncs_topic(flow: FlowConfig) -> str:
    policy = flow.policy()
    if flow.offset_syncs_topic_location == "target":
        return policy.offset_syncs_topic(flow.source)
    return policy.offset_syncs_topic(flow.target)


def transaction_seconds(setting: float, target_producer: Mapping[str, Any]) -> float:
    """How long a mirror transaction may stay open: ``setting``, at most a quarter of
    the target producer's ``transaction.timeout.ms`` (the mirror's default 120 s), so
    its commit (which still delivers what was produced last) lands well before the
    coordinator aborts it."""
    timeout_ms = float(target_producer.get("transaction.timeout.ms", DEFAULT_TXN_TIMEOUT_MS))
    return min(setting, timeout_ms / 4000)


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
        max_records_per_txn=cfg.setting("mirror.max.records.per.transaction"),
        max_bytes_per_txn=cfg.setting("mirror.max.bytes.per.transaction"),
        max_seconds_per_txn=transaction_seconds(
            cfg.setting("mirror.max.seconds.per.transaction"),
            target.librdkafka("producer"),
        ),
        pool_max_clients=cfg.setting("mirror.pool.max.clients"),
        source_admin=dict(source.librdkafka("admin")),
        source_profile=source.profile,
        target_profile=target.profile,
    )


def planner_settings(cfg: MirrorConfig, flow: FlowConfig) -> dict[str, Any]:
    """Keyword arguments of the flow's :class:`~mm.source.topics.TopicMirrorPlanner`
    (all picklable), except ``log``."""
    return {
        "source_admin": dict(cfg.cluster(flow.source).librdkafka("admin")),
        "target_admin": dict(cfg.cluster(flow.target).librdkafka("admin")),
        "topic_filter": NameFilter(tuple(flow.topics), tuple(flow.topics_exclude)),
        "config_filter": NameFilter((".*",), tuple(flow.config_properties_exclude)),
        "policy": flow.policy(),
        "source_alias": flow.source,
        "target_alias": flow.target,
        "replication_factor": flow.replication_factor,
        "sync_configs": flow.sync_topic_configs_enabled,
        "sync_configs_interval": flow.sync_topic_configs_interval_seconds,
        "use_defaults_from": flow.use_defaults_from,
        # a topic deleted and recreated under its name is refused (mm.source.topic_ids)
        "topic_ids_path": str(topic_ids_file(cfg.state_dir, flow.source, flow.target)),
        "state_group": state_group(flow),
    }


def mirror_plan(
    cfg: MirrorConfig,
    flow: FlowConfig,
    planner: TopicMirrorPlanner | None = None,
    *,
    continuous: bool = False,
    run_id: str = "",
) -> MirrorPlan:
    """The flow's plan; with ``planner``, its last refresh (just done) goes along.
    ``continuous``: tasks keep mirroring after their planned ranges (mm.source.sweep);
    ``run_id``: the mirror run the plan belongs to (FlowRuntime.run_id)."""
    runtime = dataclasses.replace(flow_runtime(cfg, flow), run_id=run_id)
    if continuous:
        runtime = dataclasses.replace(
            runtime, task_continue_seconds=cfg.setting("mirror.task.continue.seconds")
        )
    return MirrorPlan(
        runtime=runtime,
        # topics refused across flows are not found again by one flow's planner
        planner={
            **planner_settings(cfg, flow),
            "refused": dict(planner.refused) if planner is not None else {},
        },
        refresh_topics_interval_seconds=flow.refresh_topics_interval_seconds,
        topics=dict(planner.known) if planner is not None else {},
        failed=dict(planner.failed) if planner is not None else {},
        refreshed_at=time.time(),
        position_refresh_seconds=cfg.setting("mirror.position.refresh.interval.seconds"),
        shards=cfg.setting("mirror.shards"),
        position_refresh_file=str(
            Path(cfg.state_dir) / "mirror" / f"{flow.source}-{flow.target}.refreshed.json"
        ),
    )
