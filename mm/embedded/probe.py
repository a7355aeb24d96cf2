"""Is a Kafka-protocol broker answering? (A Metadata request, quietly.)"""

from __future__ import annotations

import logging
from typing import Any

from mm.embedded import procs

# librdkafka logs every refused connection; readiness polling expects those.
QUIET_LOGGER = logging.getLogger("mm.embedded.librdkafka")
QUIET_LOGGER.addHandler(logging.NullHandler())
QUIET_LOGGER.propagate = False
QUIET_LOGGER.setLevel(logging.CRITICAL)


def cluster_id(bootstrap_servers: str, timeout: float = 2.0) -> str | None:
    """The cluster id from a Metadata response, or None if nothing answered in time."""
    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
    # A cheap TCP check first: no client threads, no log noise while a broker boots.
    if not procs.port_open(host, int(port), timeout=min(timeout, 0.5)):
        return None
    from confluent_kafka import KafkaException
    from mm_client.kafka.clients import new_admin

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "logger": QUIET_LOGGER,
        "socket.connection.setup.timeout.ms": max(1000, int(timeout * 1000)),
    }
    admin = new_admin(config)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException:
        return None
    return str(metadata.cluster_id or "")


def answers_metadata(bootstrap_servers: str, timeout: float = 2.0) -> bool:
    return cluster_id(bootstrap_servers, timeout) is not None
