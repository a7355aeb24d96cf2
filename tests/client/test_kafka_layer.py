"""mm_client.kafka: building clients, error unwrapping, producing with acknowledgements,
admin helpers (unit)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from mm_client.errors import KafkaOperationError
from mm_client.kafka import (
    AcknowledgedProducer,
    GroupState,
    cause_code,
    closing_consumer,
    describe_exception,
    describe_groups,
    ensure_topic,
    error_code,
    group_offsets,
    group_offsets_or_errors,
    is_refusal,
    kafka_cause,
    kafka_error,
    new_consumer,
    produce_retrying,
    reader_conf,
    throwaway_group,
    topic_created,
    wrap,
)
from mm_client.kafka import clients as kafka_clients

pytestmark = pytest.mark.unit


def _exc(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


def _done(value: Any) -> Future[Any]:
    f: Future[Any] = Future()
    f.set_result(value)
    return f


def _failed(exc: BaseException) -> Future[Any]:
    f: Future[Any] = Future()
    f.set_exception(exc)
    return f


# --- errors ---------------------------------------------------------------------------------


def test_a_kafka_exception_is_unwrapped_with_its_code() -> None:
    exc = _exc(KafkaError.GROUP_ID_NOT_FOUND)
    assert kafka_error(exc) is exc.args[0]
    assert error_code(exc) == "GROUP_ID_NOT_FOUND"
    assert describe_exception(exc) == exc.args[0].str()
    err = wrap(exc, "committed offsets of group g")
    assert isinstance(err, KafkaOperationError)
    assert err.code == "GROUP_ID_NOT_FOUND" and err.retriable is False
    assert (
        str(err) == f"committed offsets of group g: {exc.args[0].str()} (code=GROUP_ID_NOT_FOUND)"
    )


def test_retriable_is_kept() -> None:
    err = wrap(KafkaException(KafkaError(KafkaError._TIMED_OUT, retriable=True)), "x")
    assert err.code == "_TIMED_OUT" and err.retriable is True


def test_a_refusal_is_never_retriable() -> None:
    """Retrying cannot grant an ACL, even where librdkafka marks the error retriable."""
    for code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._AUTHENTICATION):
        err = wrap(KafkaException(KafkaError(code, retriable=True)), "x")
        assert err.retriable is False and is_refusal(err.code), err
    assert not is_refusal("_TIMED_OUT") and not is_refusal(None)


@pytest.mark.parametrize("exc", [KafkaException(), KafkaException("plain text"), RuntimeError("x")])
def test_an_exception_without_a_kafka_error_keeps_its_text(exc: BaseException) -> None:
    assert kafka_error(exc) is None and error_code(exc) is None
    assert describe_exception(exc) == str(exc)
    err = wrap(exc, "ctx")
    assert str(err) == f"ctx: {exc}" and err.code is None and err.retriable is False


# --- producing ----------------------------------------------------------------------------


class FakeProducer:
    """Queue of ``room`` records; delivery reports answered at poll/flush with ``refuse``."""

    def __init__(self, room: int = 1_000, refuse: dict[bytes, int] | None = None) -> None:
        self.room = room
        self.refuse = refuse or {}
        self.queued: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.delivered: list[Any] = []
        self.polls = 0
        self.unanswered = 0  # left in the queue by flush (a timeout)

    def produce(self, *args: Any, **kwargs: Any) -> None:
        if len(self.queued) >= self.room:
            raise BufferError("queue full")
        self.queued.append((args, kwargs))

    def poll(self, timeout: float = 0) -> int:
        self.polls += 1
        return self._answer(len(self.queued))

    def flush(self, timeout: float = 0) -> int:
        self._answer(len(self.queued) - self.unanswered)
        return len(self.queued)

    def _answer(self, n: int) -> int:
        done, self.queued = self.queued[:n], self.queued[n:]
        for args, kwargs in done:
            self.delivered.append(args[1])
            code = self.refuse.get(args[1])
            cb = kwargs.get("on_delivery")
            if cb is not None:
                cb(KafkaError(code) if code is not None else None, None)
        return len(done)


def test_produce_retrying_polls_until_the_queue_has_room() -> None:
    p = FakeProducer(room=1)
    produce_retrying(p, "t", b"1")
    produce_retrying(p, "t", b"2", partition=0)
    assert p.polls == 1
    assert p.delivered == [b"1"] and p.queued == [(("t", b"2"), {"partition": 0})]


def test_produce_retrying_lets_kafka_errors_through() -> None:
    class Fenced(FakeProducer):
        def produce(self, *args: Any, **kwargs: Any) -> None:
            raise _exc(KafkaError._FENCED)

    with pytest.raises(KafkaException):
        produce_retrying(Fenced(), "t", b"v")


def test_acknowledged_records_pass() -> None:
    p = FakeProducer(room=2)
    ack = AcknowledgedProducer(p)
    for v in (b"a", b"b", b"c"):
        ack.produce("t", v, b"k", partition=0)
    ack.flush(5, "writing t failed")
    assert p.delivered == [b"a", b"b", b"c"]


def test_the_first_refusal_is_named() -> None:
    p = FakeProducer(refuse={b"b": KafkaError.TOPIC_AUTHORIZATION_FAILED, b"c": 1})
    ack = AcknowledgedProducer(p)
    for v in (b"a", b"b", b"c"):
        ack.produce("t", v, tag=v)
    acks = ack.wait(5)
    assert [(f.tag, f.error.name()) for f in acks.failures] == [
        (b"b", "TOPIC_AUTHORIZATION_FAILED"),
        (b"c", "OFFSET_OUT_OF_RANGE"),
    ]
    err = acks.error("writing t failed")
    # a refusal is named with its code and is not retriable: no retry grants an ACL
    assert err is not None and not err.retriable
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED).str()
    assert str(err) == f"writing t failed: {refused} (code=TOPIC_AUTHORIZATION_FAILED)"
    assert err.code == "TOPIC_AUTHORIZATION_FAILED"
    # a later flush reports only what was produced since
    ack.produce("t", b"d")
    ack.flush(5, "writing t failed")


def test_other_failures_are_retriable_and_their_text_says_what_failed() -> None:
    p = FakeProducer(refuse={b"a": KafkaError.OFFSET_OUT_OF_RANGE})
    ack = AcknowledgedProducer(p)
    ack.produce("t", b"a")
    err = ack.wait(5).error("writing t failed")
    assert err is not None and err.retriable and err.code is None
    assert str(err) == f"writing t failed: {KafkaError(KafkaError.OFFSET_OUT_OF_RANGE).str()}"


def test_a_fatal_error_raised_through_flush_is_a_failure_not_a_system_error() -> None:
    """librdkafka raises an idempotent producer's fatal error (its topic refused) from
    inside flush, through the delivery callback, as a SystemError."""

    class Refused(FakeProducer):
        def flush(self, timeout: float = 0) -> int:
            try:
                raise _exc(KafkaError.TOPIC_AUTHORIZATION_FAILED)
            except KafkaException as exc:
                raise SystemError("returned a result with an exception set") from exc

    ack = AcknowledgedProducer(Refused())
    ack.produce("t", b"a")
    with pytest.raises(KafkaOperationError) as raised:
        ack.flush(5, "syncs not written", code="_TIMED_OUT")
    assert raised.value.code == "TOPIC_AUTHORIZATION_FAILED" and not raised.value.retriable

    class Broken(FakeProducer):
        def flush(self, timeout: float = 0) -> int:
            raise SystemError("not a Kafka error")

    with pytest.raises(SystemError):
        AcknowledgedProducer(Broken()).wait(1)


def test_unacknowledged_records_are_counted_and_time_out() -> None:
    p = FakeProducer()
    p.unanswered = 2
    ack = AcknowledgedProducer(p)
    for v in (b"a", b"b", b"c"):
        ack.produce("t", v)
    with pytest.raises(KafkaOperationError) as raised:
        ack.flush(5, "writing t failed")
    assert str(raised.value) == "writing t failed: 2 not acknowledged (code=_TIMED_OUT)"
    assert raised.value.code == "_TIMED_OUT" and raised.value.retriable


def test_the_caller_may_set_the_code() -> None:
    p = FakeProducer(refuse={b"a": KafkaError._MSG_TIMED_OUT})
    ack = AcknowledgedProducer(p)
    ack.produce("t", b"a")
    with pytest.raises(KafkaOperationError) as raised:
        ack.flush(5, "syncs not written", code="_TIMED_OUT")
    assert raised.value.code == "_TIMED_OUT"


def test_nothing_produced_is_all_acknowledged() -> None:
    acks = AcknowledgedProducer(FakeProducer()).wait(1)
    assert acks.ok and acks.error("x") is None


# --- admin ----------------------------------------------------------------------------------


@dataclass
class _Partition:
    leader: int = 1


@dataclass
class _Topic:
    error: Any = None
    partitions: dict[int, _Partition] = field(default_factory=lambda: {0: _Partition()})


@dataclass
class _Metadata:
    topics: dict[str, _Topic]


@dataclass
class _Offsets:
    topic_partitions: list[TopicPartition]


@dataclass
class _State:
    name: str


@dataclass
class _Description:
    state: _State
    members: list[Any]


class FakeAdmin:
    def __init__(self, **answers: Any) -> None:
        self.topics: dict[str, _Topic] = answers.get("topics", {})
        self.create: Future[Any] = answers.get("create", _done(None))
        self.offsets: dict[str, Future[Any]] = answers.get("offsets", {})
        self.described: dict[str, Future[Any]] = answers.get("described", {})
        # metadata answers a created topic gets before the brokers know it (KRaft)
        self.unseen: int = answers.get("unseen", 0)
        self.created: list[Any] = []
        self.requests: list[str] = []
        self.lookups = 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> _Metadata:
        if "down" in self.topics:
            raise _exc(KafkaError._TRANSPORT)
        if topic is not None:
            self.lookups += 1
            if self.unseen > 0 or topic not in self.topics:
                self.unseen -= 1
                return _Metadata({topic: _Topic(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))})
        return _Metadata(self.topics)

    def create_topics(self, new: list[Any], **_kw: Any) -> dict[str, Future[Any]]:
        self.created += new
        for t in new:
            self.topics[t.topic] = _Topic()
        return {t.topic: self.create for t in new}

    def list_consumer_group_offsets(self, reqs: list[Any], **_kw: Any) -> dict[str, Any]:
        self.requests += [r.group_id for r in reqs]
        return {r.group_id: self.offsets[r.group_id] for r in reqs}

    def describe_consumer_groups(self, groups: list[str], **_kw: Any) -> dict[str, Any]:
        return {g: self.described[g] for g in groups}


def test_ensure_topic_creates_a_missing_topic_compacted_by_default() -> None:
    admin = FakeAdmin()
    assert ensure_topic(admin, "cp", "cluster B", 3) is True  # type: ignore[arg-type]
    (new,) = admin.created
    assert (new.topic, new.num_partitions, new.replication_factor) == ("cp", 1, 3)
    assert new.config == {"cleanup.policy": "compact"}


def test_ensure_topic_leaves_an_existing_topic_and_tolerates_a_race() -> None:
    assert ensure_topic(FakeAdmin(topics={"cp": _Topic()}), "cp", "cluster B", 1) is False  # type: ignore[arg-type]
    raced = FakeAdmin(create=_failed(_exc(KafkaError.TOPIC_ALREADY_EXISTS)))
    assert ensure_topic(raced, "cp", "cluster B", 1, config={}) is False  # type: ignore[arg-type]
    assert raced.created[0].config == {}


def test_ensure_topic_returns_once_the_created_topic_has_leaders() -> None:
    # KRaft: CreateTopics answered, the broker asked next does not know the topic yet
    lagging = FakeAdmin(unseen=3)
    assert ensure_topic(lagging, "cp", "cluster B", 1) is True  # type: ignore[arg-type]
    assert lagging.lookups == 4
    never = FakeAdmin(unseen=10**9)
    with pytest.raises(KafkaOperationError, match=r"^cp on cluster B was created but ") as raised:
        ensure_topic(never, "cp", "cluster B", 1, timeout=0.3)  # type: ignore[arg-type]
    assert raised.value.code == "UNKNOWN_TOPIC_OR_PART" and raised.value.retriable


def test_ensure_topic_names_the_failed_step() -> None:
    refused = FakeAdmin(create=_failed(_exc(KafkaError.POLICY_VIOLATION)))
    with pytest.raises(KafkaOperationError, match=r"^create cp on cluster B: ") as raised:
        ensure_topic(refused, "cp", "cluster B", 1)  # type: ignore[arg-type]
    assert raised.value.code == "POLICY_VIOLATION"
    with pytest.raises(KafkaOperationError, match=r"^list topics on cluster B: "):
        ensure_topic(FakeAdmin(topics={"down": _Topic()}), "cp", "cluster B", 1)  # type: ignore[arg-type]


def test_topic_created() -> None:
    assert topic_created(_done(None), 1) is True
    assert topic_created(_failed(_exc(KafkaError.TOPIC_ALREADY_EXISTS)), 1) is False
    with pytest.raises(KafkaException):
        topic_created(_failed(_exc(KafkaError.INVALID_CONFIG)), 1)


def test_group_offsets_a_missing_group_has_none() -> None:
    tp = TopicPartition("t", 0, 5)
    admin = FakeAdmin(
        offsets={
            "g": _done(_Offsets([tp])),
            "gone": _failed(_exc(KafkaError.GROUP_ID_NOT_FOUND)),
            "empty": _done(_Offsets(None)),  # type: ignore[arg-type]
        }
    )
    assert group_offsets(admin, ["g", "gone", "empty"], 1, "B") == {  # type: ignore[arg-type]
        "g": [tp],
        "gone": [],
        "empty": [],
    }
    assert admin.requests == ["g", "gone", "empty"]  # one request per group


def test_group_offsets_errors_name_the_group() -> None:
    admin = FakeAdmin(
        offsets={
            "ok": _done(_Offsets([])),
            "denied": _failed(_exc(KafkaError.GROUP_AUTHORIZATION_FAILED)),
            "slow": _failed(TimeoutError()),
        }
    )
    out = group_offsets_or_errors(admin, ["ok", "denied", "slow"], 2)  # type: ignore[arg-type]
    assert out["ok"] == []
    denied = out["denied"]
    assert isinstance(denied, KafkaOperationError)
    assert str(denied).startswith("committed offsets of group denied: ")
    assert denied.code == "GROUP_AUTHORIZATION_FAILED"
    assert isinstance(denied.__cause__, KafkaException)
    assert isinstance(out["slow"], TimeoutError)
    assert str(out["slow"]) == "committed offsets of group slow: no answer within 2s"
    with pytest.raises(KafkaOperationError, match=r"^committed offsets of group denied on B: "):
        group_offsets(admin, ["ok", "denied"], 2, "B")  # type: ignore[arg-type]


def test_describe_groups() -> None:
    admin = FakeAdmin(
        described={
            "busy": _done(_Description(_State("STABLE"), [object(), object()])),
            "idle": _done(_Description(_State("EMPTY"), None)),  # type: ignore[arg-type]
            "gone": _failed(_exc(KafkaError.GROUP_ID_NOT_FOUND)),
            "denied": _failed(_exc(KafkaError.GROUP_AUTHORIZATION_FAILED)),
            "slow": _failed(TimeoutError()),
        }
    )
    out = describe_groups(admin, ["busy", "idle", "gone", "denied", "slow"], 3)  # type: ignore[arg-type]
    assert out["busy"] == GroupState("STABLE", 2)
    assert out["idle"] == GroupState("EMPTY", 0)
    assert out["gone"] == GroupState("DEAD", 0)
    assert isinstance(out["denied"], KafkaOperationError)
    assert str(out["denied"]).startswith("describe group denied: ")
    assert str(out["slow"]) == "describe group slow: no answer within 3s"


def test_the_kafka_error_behind_a_system_error_is_found() -> None:
    """A fatal error met in a delivery callback reaches Python as a SystemError
    caused by the KafkaException."""
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    try:
        try:
            raise fenced
        except KafkaException as exc:
            raise SystemError("callback returned a result with an exception set") from exc
    except SystemError as outer:
        assert kafka_cause(outer) is fenced
        assert cause_code(outer) == "_FENCED"
    wrapped = KafkaOperationError("commit", code="PRODUCER_FENCED")
    assert cause_code(wrapped) == "PRODUCER_FENCED"
    assert kafka_cause(ValueError("no kafka here")) is None and cause_code(None) is None


# --- clients --------------------------------------------------------------------------------

READER_SETTINGS = {
    "group.id": "g",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
}


def test_a_reader_never_commits_reads_committed_and_sees_the_partition_end() -> None:
    base = MappingProxyType({"bootstrap.servers": "a:9092"})
    assert reader_conf(base, group="g") == {"bootstrap.servers": "a:9092", **READER_SETTINGS}
    assert base == {"bootstrap.servers": "a:9092"}


def test_reader_settings_win_over_the_base_and_overrides_over_both() -> None:
    base = {
        "bootstrap.servers": "a:9092",
        "group.id": "the-application",
        "enable.auto.commit": True,
        "enable.auto.offset.store": True,
        "isolation.level": "read_uncommitted",
        "enable.partition.eof": False,
        "auto.offset.reset": "latest",
        "fetch.wait.max.ms": 500,
    }
    conf = reader_conf(
        base, {"auto.offset.reset": "earliest", "enable.partition.eof": False}, group="g"
    )
    assert conf == {
        **READER_SETTINGS,
        "bootstrap.servers": "a:9092",
        "auto.offset.reset": "earliest",  # the override
        "enable.partition.eof": False,  # the override beats the reader setting
        "fetch.wait.max.ms": 500,  # the base's, untouched
    }
    assert base["group.id"] == "the-application"  # the base is copied, not changed


def test_reader_isolation_and_eof_can_be_chosen_or_left_to_the_base() -> None:
    conf = reader_conf({"b": 1}, group="g", isolation="read_uncommitted", eof=False)
    assert conf["isolation.level"] == "read_uncommitted" and conf["enable.partition.eof"] is False
    assert "isolation.level" not in reader_conf({"b": 1}, group="g", isolation=None)
    kept = reader_conf({"isolation.level": "read_uncommitted"}, group="g", isolation=None)
    assert kept["isolation.level"] == "read_uncommitted"


def test_dropped_base_keys_are_left_out_but_an_override_may_set_them() -> None:
    base = {"bootstrap.servers": "a:9092", "group.instance.id": "member-1", "on_commit": print}
    conf = reader_conf(base, group="g", drop=("group.instance.id", "on_commit", "absent"))
    assert "group.instance.id" not in conf and "on_commit" not in conf
    again = reader_conf(base, {"client.id": "x"}, group="g", drop=["client.id"])
    assert again["client.id"] == "x"


def test_throwaway_groups_are_unique_under_a_stable_prefix() -> None:
    a, b = throwaway_group("__mm-probe"), throwaway_group("__mm-probe")
    assert a != b
    assert a.startswith("__mm-probe-") and len(a) == len("__mm-probe-") + 8
    assert len(throwaway_group("__mm-client-x", 12)) == len("__mm-client-x-") + 12


class _FakeConsumer:
    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_new_consumer_gets_a_copy_and_closing_consumer_closes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_clients, "Consumer", _FakeConsumer)
    conf = MappingProxyType({"group.id": "g"})
    made: Any = new_consumer(conf)
    # a copy, with librdkafka's log lines sent to a Python logger (not stderr)
    assert type(made.conf) is dict
    assert made.conf == {**conf, "logger": kafka_clients.LIBRDKAFKA_LOGGER}
    with pytest.raises(RuntimeError), closing_consumer(conf) as consumer:
        held: Any = consumer
        raise RuntimeError("the read failed")
    assert held.closed
