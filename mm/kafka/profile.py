"""What a cluster's broker does where Kafka-protocol brokers differ: the one seam.

mm follows Apache Kafka's semantics (MSK, Confluent and Strimzi run Apache Kafka).
A cluster may instead declare the embedded broker that ``mm embedded``, ``mm demo``
and ``mm drill`` start where Apache Kafka's jars are absent (Tansu 0.6), with

    <alias>.mm.broker.profile = embedded     # one cluster
    mm.broker.profile = embedded             # every cluster of the file

Code that must behave differently on such a broker asks the cluster's
:class:`BrokerProfile` for the one property it depends on, never the broker's
name, so Apache Kafka's path is the main path and each difference is named here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EMBEDDED", "KAFKA", "PROFILES", "BrokerProfile", "broker_profile"]


@dataclass(frozen=True)
class BrokerProfile:
    """One broker's answers where Kafka-protocol brokers differ (picklable: Spark
    tasks carry it)."""

    name: str
    list_offsets_exact: bool
    """ListOffsets(latest) answers a partition's end exactly: the log end offset,
    or under read_committed the last stable offset. When False (Tansu answers the
    base offset of the last batch + 1), ends come from the high watermark of a real
    fetch (:func:`mm.kafka.watermarks.watermarks`)."""


KAFKA = BrokerProfile(name="kafka", list_offsets_exact=True)
EMBEDDED = BrokerProfile(name="embedded", list_offsets_exact=False)
PROFILES: dict[str, BrokerProfile] = {p.name: p for p in (KAFKA, EMBEDDED)}


def broker_profile(name: str) -> BrokerProfile:
    """The profile called ``name`` (case-insensitive); ValueError naming the choices."""
    key = name.strip().lower()
    if key not in PROFILES:
        raise ValueError(f"{name!r} is not a broker profile; expected one of {', '.join(PROFILES)}")
    return PROFILES[key]
