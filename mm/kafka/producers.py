"""Which producer holds a transaction open on a partition, and since when.

confluent-kafka's admin client has no DescribeProducers (KIP-664); kafka-python's
has (``KafkaAdminClient.describe_producers``), so it is asked, with the cluster's
connection settings translated from librdkafka's names (:func:`kafka_python_config`).
Used to name the producer in a refusal about an open transaction; a cluster whose
settings it cannot translate, or a broker that does not answer, leaves the
producer unnamed (the caller says why), never the refusal unmade.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Key = tuple[str, int]

# librdkafka -> kafka-python, for the settings that decide how to connect
_NAMES = {
    "security.protocol": "security_protocol",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "client.id": "client_id",
}
# settings kafka-python has no counterpart for, which change how to connect
_UNTRANSLATABLE = ("ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem", "sasl.oauthbearer.")


def kafka_python_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python's settings for a librdkafka config (other keys: tunables, left
    out). ValueError naming the setting it cannot translate."""
    out: dict[str, Any] = {
        "bootstrap_servers": [s.strip() for s in str(conf["bootstrap.servers"]).split(",")]
    }
    for key, value in conf.items():
        if key.startswith(_UNTRANSLATABLE):
            raise ValueError(f"{key} has no kafka-python counterpart")
        name = _NAMES.get(key)
        if name is not None:
            out[name] = str(value).upper() if name == "security_protocol" else value
    if str(conf.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        out["ssl_check_hostname"] = False
    return out


@dataclass(frozen=True)
class OpenProducer:
    producer_id: int
    epoch: int
    transaction_start: int  # the first offset of its open transaction
    last_timestamp_ms: int  # its last write's timestamp (-1: unknown)
    transactional_id: str | None = None  # None: its coordinator lists none (hanging)
    started_ms: int | None = None  # when its coordinator says the transaction began


def open_producers(
    conf: Mapping[str, Any], keys: Iterable[Key], timeout: float
) -> dict[Key, list[OpenProducer]]:
    """The producers with a transaction open on each of ``keys`` (librdkafka ``conf``).
    Raises what kafka-python raises (the caller reports it)."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    settings = kafka_python_config(conf)
    settings.setdefault("client_id", "mm-transactions")
    admin = KafkaAdminClient(**settings, request_timeout_ms=int(timeout * 1000))
    try:
        states = admin.describe_producers([TopicPartition(t, p) for t, p in keys])
        found = {
            (tp.topic, tp.partition): [
                s for s in state.active_producers if s.current_transaction_start_offset >= 0
            ]
            for tp, state in states.items()
        }
        ids = sorted({s.producer_id for rows in found.values() for s in rows})
        # broker id -> the transactions its coordinator partitions hold
        listed = admin.list_transactions(producer_id_filters=ids) if ids else {}
        by_producer = {t.producer_id: t.transactional_id for ts in listed.values() for t in ts}
        described = admin.describe_transactions(sorted(set(by_producer.values()))) if ids else {}
    finally:
        admin.close()
    started = {d.producer_id: d.transaction_start_time_ms for d in described.values()}
    return {
        key: [
            OpenProducer(
                s.producer_id,
                s.producer_epoch,
                s.current_transaction_start_offset,
                s.last_timestamp,
                by_producer.get(s.producer_id),
                started.get(s.producer_id),
            )
            for s in rows
        ]
        for key, rows in found.items()
    }


def live_transactional_ids(
    conf: Mapping[str, Any], ids: Iterable[str], timeout: float = 10.0
) -> tuple[list[str], str | None]:
    """Which of ``ids`` the cluster's transaction coordinators hold (ListTransactions,
    through kafka-python): only those can have a producer to fence. An id never
    initialised (a new flow's per-partition ids, say) has none, and fencing it
    would only create it. Returns (ids to fence, None), or every id of ``ids`` and
    the reason when the cluster could not say (no ListTransactions, a refusal, no
    answer within ``timeout``): then each is fenced, as if all were live."""
    import threading

    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return [], None
    answer: dict[str, Any] = {}

    def ask() -> None:
        try:
            from kafka.admin import KafkaAdminClient

            settings = kafka_python_config(conf)
            settings.setdefault("client_id", "mm-fence")
            admin = KafkaAdminClient(**settings, request_timeout_ms=int(timeout * 1000))
            try:
                listed = admin.list_transactions()
            finally:
                admin.close()
            answer["ids"] = {t.transactional_id for ts in listed.values() for t in ts}
        except Exception as exc:  # any failure: every id is fenced (the caller says why)
            answer["error"] = f"{type(exc).__name__}: {exc}"

    # a thread: kafka-python's own timeouts do not bound every wait (module doc of
    # examples/harness.py: a join that never ends); fencing all is the way out
    asker = threading.Thread(target=ask, name="mm-list-transactions", daemon=True)
    asker.start()
    asker.join(timeout)
    if "ids" in answer:
        live = answer["ids"]
        return [i for i in wanted if i in live], None
    reason = answer.get("error", f"no answer within {timeout:g}s")
    return wanted, reason
