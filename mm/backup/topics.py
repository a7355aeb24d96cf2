"""What a restore needs to create a backed-up topic: its partitions and configs.

Each backup pass writes, per topic it backs up, a small JSON document::

    <prefix>/_topics/<region>/<topic>.json
    {"topic": "orders", "partitions": 6, "configs": {"cleanup.policy": "compact", ...},
     "time_ms": 1795624857298}

``configs`` are the topic's own settings (not the broker's defaults, not read-only
nor sensitive ones, nor those MM2's ``config.properties.exclude`` leaves out: the
same rule the mirror uses to create a remote topic). The newest pass overwrites
the document: a restore creates the topic as it was at the last backup. A
document that cannot be read is an error naming the key, never a silent default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from mm.backup.layout import check_region, check_topic

TOPICS_DIR = "_topics"


@dataclass(frozen=True)
class TopicMeta:
    topic: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    time_ms: int = 0


def topic_meta_key(prefix: str, region: str, topic: str) -> str:
    return f"{prefix.rstrip('/')}/{TOPICS_DIR}/{check_region(region)}/{check_topic(topic)}.json"


def encode_topic_meta(meta: TopicMeta) -> bytes:
    doc = {
        "topic": meta.topic,
        "partitions": meta.partitions,
        "configs": dict(sorted(meta.configs.items())),
        "time_ms": meta.time_ms,
    }
    return json.dumps(doc, indent=1).encode() + b"\n"


def decode_topic_meta(data: bytes, where: str) -> TopicMeta:
    """Raises ValueError naming ``where`` and what is wrong."""
    try:
        doc: Any = json.loads(data)
        meta = TopicMeta(
            str(doc["topic"]),
            int(doc["partitions"]),
            {str(k): str(v) for k, v in dict(doc.get("configs") or {}).items()},
            int(doc.get("time_ms", 0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"{where}: not a topic description ({exc!r}); expected JSON with topic, "
            "partitions, configs and time_ms"
        ) from None
    if meta.partitions < 1:
        raise ValueError(f"{where}: partitions {meta.partitions}: expected at least 1")
    return meta


def write_topic_meta(fs: pafs.FileSystem, prefix: str, region: str, meta: TopicMeta) -> None:
    key = topic_meta_key(prefix, region, meta.topic)
    try:
        out = fs.open_output_stream(key)
    except FileNotFoundError:  # a local directory not made yet (S3 has none to make)
        fs.create_dir(key.rsplit("/", 1)[0], recursive=True)
        out = fs.open_output_stream(key)
    with out:
        out.write(encode_topic_meta(meta))


def describe_topics(
    admin_conf: dict[str, Any], topics: dict[str, int], where: str, timeout: float
) -> list[TopicMeta]:
    """Each topic's partitions and the configs a restore creates it with (the mirror's
    rule for a new remote topic, with MM2's default ``config.properties.exclude``)."""
    import time

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType
    from mm_client.kafka.clients import new_admin
    from mm_client.kafka.errors import wrap

    from mm.config.model import FlowConfig
    from mm.source.plan import NameFilter
    from mm.source.topics import copyable_configs

    if not topics:
        return []
    exclude = tuple(FlowConfig.model_fields["config_properties_exclude"].default)
    keep = NameFilter((".*",), exclude)
    admin = new_admin(admin_conf)
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(topics)]
    now = int(time.time() * 1000)
    out = []
    for res, fut in admin.describe_configs(resources, request_timeout=timeout).items():
        try:
            described = fut.result(timeout)
        except KafkaException as exc:
            raise wrap(exc, f"describe configs of {res.name} on {where}") from exc
        configs = copyable_configs(described, keep)
        out.append(TopicMeta(res.name, topics[res.name], configs, now))
    return sorted(out, key=lambda m: m.topic)


def read_topic_meta(fs: pafs.FileSystem, prefix: str, region: str, topic: str) -> TopicMeta | None:
    """The topic's description, or None when no pass wrote one (backups made before
    descriptions were kept)."""
    key = topic_meta_key(prefix, region, topic)
    if fs.get_file_info(key).type == pafs.FileType.NotFound:
        return None
    with fs.open_input_stream(key) as f:
        return decode_topic_meta(f.read(), key)
