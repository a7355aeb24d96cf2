"""After a `mm drill -c FILE`: delete what the run created on the user's clusters (the
topics and groups carrying its mark, :func:`mm.drill.external.cleanup_plan`), or list
it with ``--keep``. Every failure is reported, item by item; none is skipped silently."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException
from mm_client.kafka import error_code, new_admin

from mm.drill.external import CleanupPlan, DrillNames, cleanup_plan

TIMEOUT_S = 30.0
# members of a group whose consumer crashed (the failover) leave after their session
# timeout: a non-empty group is retried that long
NON_EMPTY_RETRY_S = 15.0


def _listing(admin: Any) -> tuple[list[str], list[str]]:
    topics = list(admin.list_topics(timeout=TIMEOUT_S).topics)
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    return topics, [g.group_id for g in listed.valid]


def _plan(names: DrillNames, admins: Mapping[str, Any]) -> tuple[CleanupPlan, dict[str, list[str]]]:
    """The run's topics and groups per cluster, and the clusters that could not be listed."""
    topics: dict[str, list[str]] = {}
    groups: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for cluster, admin in admins.items():
        try:
            topics[cluster], groups[cluster] = _listing(admin)
        except KafkaException as exc:
            failed.setdefault("not deleted", []).append(
                f"{cluster}: could not list its topics and groups ({exc}); look for names "
                f"containing {names.mark}"
            )
    return cleanup_plan(names, topics, groups), failed


def kept(names: DrillNames, confs: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """--keep: what the run left on each cluster."""
    admins = {c: new_admin(dict(conf)) for c, conf in confs.items()}
    plan, failed = _plan(names, admins)
    out = {
        "kept": [f"{c} topic {t}" for c, ts in plan.topics.items() for t in ts]
        + [f"{c} group {g}" for c, gs in plan.groups.items() for g in gs]
    }
    return {**out, **failed}


def clean_up(names: DrillNames, confs: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """Deletes the run's groups, then its topics (A's first: a user's mirror that selected
    them stops copying before their copies on B go); returns what was deleted and what
    was not, and why."""
    admins = {c: new_admin(dict(conf)) for c, conf in confs.items()}
    plan, out = _plan(names, admins)
    out.setdefault("not deleted", [])
    out["deleted"] = []
    for cluster, groups in plan.groups.items():
        for group, error in _delete_groups(admins[cluster], groups).items():
            if error is None:
                out["deleted"].append(f"{cluster} group {group}")
            else:
                out["not deleted"].append(f"{cluster} group {group}: {error}")
    for cluster, topics in plan.topics.items():
        if not topics:
            continue
        futures = admins[cluster].delete_topics(topics, operation_timeout=TIMEOUT_S)
        for topic, future in futures.items():
            try:
                future.result(TIMEOUT_S)
                out["deleted"].append(f"{cluster} topic {topic}")
            except KafkaException as exc:
                out["not deleted"].append(f"{cluster} topic {topic}: {exc}")
    if not out["not deleted"]:
        del out["not deleted"]
    return out


def _delete_groups(admin: Any, groups: list[str]) -> dict[str, str | None]:
    """Group -> None (deleted) or why not."""
    result: dict[str, str | None] = {}
    pending = list(groups)
    deadline = time.monotonic() + NON_EMPTY_RETRY_S
    while pending:
        futures = admin.delete_consumer_groups(pending, request_timeout=TIMEOUT_S)
        retry = []
        for group, future in futures.items():
            try:
                future.result(TIMEOUT_S)
                result[group] = None
            except KafkaException as exc:
                if error_code(exc) == "NON_EMPTY_GROUP" and time.monotonic() < deadline:
                    retry.append(group)
                else:
                    result[group] = str(exc)
        pending = retry
        if pending:
            time.sleep(1.0)
    return result
