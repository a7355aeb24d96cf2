"""Topic ACL sync (mm.source.acl_sync) against fake admin clients: Apache Kafka's
answers (an authorizer, none, a principal without rights), which the embedded
broker cannot give (it answers DescribeAcls with nothing and cannot create ACLs)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from structlog.testing import capture_logs

from mm.config import FlowConfig, build_config
from mm.kafka.profile import EMBEDDED
from mm.source.acl_sync import AclSyncThread, TopicAclSync, start_acl_sync

pytestmark = pytest.mark.unit

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL = ResourcePatternType.LITERAL


def _acl(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    principal: str = "User:app",
    pattern: ResourcePatternType = LITERAL,
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", op, perm)


def _flow(**extra: str) -> FlowConfig:
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:9092",
        "B.bootstrap.servers": "b:9092",
        "A->B.enabled": "true",
        **extra,
    }
    return build_config(props).flow("A", "B")


def _done(value: Any = None, error: int | None = None) -> Future[Any]:
    f: Future[Any] = Future()
    if error is None:
        f.set_result(value)
    else:
        f.set_exception(KafkaException(KafkaError(error)))
    return f


class FakeAdmin:
    """describe_acls/create_acls as confluent-kafka's AdminClient answers them."""

    def __init__(
        self,
        bindings: list[AclBinding] | None = None,
        *,
        describe_error: int | None = None,
        create_error: int | None = None,
        cluster_ops: list[AclOperation] | None = None,
    ) -> None:
        self.bindings = list(bindings or [])
        self.describe_error, self.create_error = describe_error, create_error
        # what DescribeCluster lists the principal may do on the cluster (default:
        # everything, as a cluster without an authorizer answers)
        self.cluster_ops = (
            [AclOperation.DESCRIBE, AclOperation.ALTER] if cluster_ops is None else cluster_ops
        )
        self.describes: list[AclBindingFilter] = []
        self.creates: list[list[AclBinding]] = []

    def describe_acls(self, acl_filter: AclBindingFilter, request_timeout: float) -> Future[Any]:
        self.describes.append(acl_filter)
        if self.describe_error is not None:
            return _done(error=self.describe_error)
        # what the sync asks for: topic bindings (LITERAL on the target, ANY on the source)
        assert acl_filter.restype == ResourceType.TOPIC
        pattern = acl_filter.resource_pattern_type
        return _done(
            [
                b
                for b in self.bindings
                if pattern == ResourcePatternType.ANY or b.resource_pattern_type == pattern
            ]
        )

    def describe_cluster(
        self, include_authorized_operations: bool, request_timeout: float
    ) -> Future[Any]:
        assert include_authorized_operations
        return _done(SimpleNamespace(authorized_operations=self.cluster_ops))

    def create_acls(self, bindings: list[AclBinding], request_timeout: float) -> dict[Any, Any]:
        self.creates.append(list(bindings))
        out: dict[Any, Any] = {}
        for b in bindings:
            if self.create_error is not None:
                out[b] = _done(error=self.create_error)
            else:
                if b not in self.bindings:
                    self.bindings.append(b)
                out[b] = _done()
        return out


@pytest.fixture(autouse=True)
def _debug_events_reach_the_capture() -> Iterator[None]:
    """The tests count debug events: an earlier test's configure_logging() may have left
    a logger that drops them before capture_logs() sees them (order-dependent)."""
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    yield
    structlog.configure(**old)


def _warnings(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["log_level"] == "warning"]


def test_read_and_describe_are_copied_and_logged() -> None:
    source = FakeAdmin(
        [
            _acl("orders", AclOperation.READ, principal="User:billing"),
            _acl("orders", AclOperation.DESCRIBE, principal="User:billing"),
        ]
    )
    target = FakeAdmin()
    with capture_logs() as logs:
        created = TopicAclSync(_flow(), source, target).run_once()
    want = [
        _acl("A.orders", AclOperation.READ, principal="User:billing"),
        _acl("A.orders", AclOperation.DESCRIBE, principal="User:billing"),
    ]
    assert created == want
    assert target.bindings == want
    (info,) = [e for e in logs if e["event"] == "topic ACLs created on the target"]
    assert info["cluster"] == "B" and info["count"] == 2
    assert "User:billing ALLOW READ on topic A.orders from host *" in info["acls"]
    assert not _warnings(logs)


def test_allow_all_is_downgraded_to_read_and_write_is_never_copied() -> None:
    source = FakeAdmin(
        [
            _acl("orders", AclOperation.ALL),
            _acl("orders", AclOperation.WRITE, principal="User:producer"),
            _acl("payments", AclOperation.WRITE, DENY, principal="User:intruder"),
        ]
    )
    target = FakeAdmin()
    TopicAclSync(_flow(), source, target).run_once()
    assert target.bindings == [
        _acl("A.orders", AclOperation.READ),
        # DENY only takes rights away: MM2 copies it
        _acl("A.payments", AclOperation.WRITE, DENY, principal="User:intruder"),
    ]
    assert not any(b.operation == AclOperation.ALL for b in target.bindings)
    assert not any(
        b.operation == AclOperation.WRITE and b.permission_type == ALLOW for b in target.bindings
    )


def test_only_topics_the_flow_mirrors_and_literal_patterns() -> None:
    source = FakeAdmin(
        [
            _acl("orders", AclOperation.READ),
            _acl("secret", AclOperation.READ),
            _acl("ord", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        ]
    )
    target = FakeAdmin()
    TopicAclSync(_flow(**{"A->B.topics": "orders"}), source, target).run_once()
    assert target.bindings == [_acl("A.orders", AclOperation.READ)]


def test_bindings_the_target_holds_are_not_created_again() -> None:
    source = FakeAdmin([_acl("orders", AclOperation.READ), _acl("orders", AclOperation.DESCRIBE)])
    target = FakeAdmin([_acl("A.orders", AclOperation.READ)])
    sync = TopicAclSync(_flow(), source, target)
    assert sync.run_once() == [_acl("A.orders", AclOperation.DESCRIBE)]
    assert target.creates == [[_acl("A.orders", AclOperation.DESCRIBE)]]
    # the next rounds find everything in place: no CreateAcls at all
    with capture_logs() as logs:
        assert sync.run_once() == []
        assert sync.run_once() == []
    assert len(target.creates) == 1
    assert not any(e["event"] == "topic ACLs created on the target" for e in logs)


def test_a_target_that_refuses_describe_gets_each_binding_once_from_this_process() -> None:
    source = FakeAdmin([_acl("orders", AclOperation.READ)])
    target = FakeAdmin(describe_error=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    sync = TopicAclSync(_flow(), source, target)
    with capture_logs() as logs:
        assert sync.run_once() == [_acl("A.orders", AclOperation.READ)]
        assert sync.run_once() == []
    assert target.creates == [[_acl("A.orders", AclOperation.READ)]]
    (warning,) = _warnings(logs)
    assert "cluster B" in warning["event"] and "DESCRIBE on CLUSTER" in warning["event"]


def test_source_without_authorizer_warns_once_and_creates_nothing() -> None:
    source = FakeAdmin(describe_error=KafkaError.SECURITY_DISABLED)
    target = FakeAdmin()
    sync = TopicAclSync(_flow(), source, target)
    with capture_logs() as logs:
        for _ in range(3):
            assert sync.run_once() == []
    (warning,) = _warnings(logs)
    assert "cluster A has no ACL authorizer" in warning["event"]
    assert "A->B.sync.topic.acls.enabled = false" in warning["event"]
    assert warning["cluster"] == "A"
    # repeated at debug, not at warning
    assert sum(e["log_level"] == "debug" for e in logs) == 2
    assert target.describes == [] and target.creates == []
    assert sync.warnings == 1


def test_source_not_authorized_names_the_missing_right() -> None:
    source = FakeAdmin(describe_error=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    sync = TopicAclSync(_flow(), source, FakeAdmin())
    with capture_logs() as logs:
        sync.run_once()
        sync.run_once()
    (warning,) = _warnings(logs)
    assert "not authorized to list topic ACLs (DescribeAcls) on cluster A" in warning["event"]
    assert "DESCRIBE on CLUSTER" in warning["event"]


def test_source_not_authorized_as_librdkafka_answers_it_names_the_missing_right() -> None:
    """librdkafka drops DescribeAcls' error: a principal without DESCRIBE on CLUSTER gets
    an empty list. DescribeCluster's authorized operations tell the refusal apart."""
    source = FakeAdmin(cluster_ops=[])  # Apache Kafka lists none without DESCRIBE
    target = FakeAdmin()
    sync = TopicAclSync(_flow(), source, target)
    with capture_logs() as logs:
        assert sync.run_once() == []
        assert sync.run_once() == []
    (warning,) = _warnings(logs)
    assert warning["event"] == (
        "topic ACL sync: not authorized to list topic ACLs (DescribeAcls) on cluster A: "
        "grant the mirror's principal DESCRIBE on CLUSTER there, or set "
        "A->B.sync.topic.acls.enabled = false"
    )
    assert target.describes == [] and target.creates == []
    # granted: the empty answer is believed, nothing said
    source.cluster_ops = [AclOperation.DESCRIBE]
    with capture_logs() as logs:
        assert sync.run_once() == []
    assert _warnings(logs) == []


def test_an_empty_answer_of_a_broker_that_lists_no_cluster_operations_is_believed() -> None:
    """The embedded broker lists no cluster operation to anyone: nothing said."""
    source = FakeAdmin(cluster_ops=[])
    sync = TopicAclSync(_flow(), source, FakeAdmin(), profiles={"A": EMBEDDED})
    with capture_logs() as logs:
        assert sync.run_once() == []
    assert _warnings(logs) == []


def test_target_not_authorized_to_describe_as_librdkafka_answers_it() -> None:
    """The target's empty answer refused: each binding is created once by this process
    (as when DescribeAcls' error is seen), with the warning naming DESCRIBE on CLUSTER."""
    source = FakeAdmin([_acl("orders", AclOperation.READ)])
    target = FakeAdmin(cluster_ops=[AclOperation.ALTER])
    sync = TopicAclSync(_flow(), source, target)
    with capture_logs() as logs:
        assert sync.run_once() == [_acl("A.orders", AclOperation.READ)]
        target.bindings.clear()  # what the target would answer: nothing
        assert sync.run_once() == []
    assert target.creates == [[_acl("A.orders", AclOperation.READ)]]
    (warning,) = _warnings(logs)
    assert "not authorized to list topic ACLs (DescribeAcls) on cluster B" in warning["event"]


def test_target_not_authorized_to_create_names_alter_on_cluster() -> None:
    source = FakeAdmin([_acl("orders", AclOperation.READ), _acl("orders", AclOperation.DESCRIBE)])
    target = FakeAdmin(create_error=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    sync = TopicAclSync(_flow(), source, target)
    with capture_logs() as logs:
        assert sync.run_once() == []
        assert sync.run_once() == []  # tried again next round (rights may be granted)
    assert len(target.creates) == 2
    (warning,) = _warnings(logs)
    assert "not authorized to create ACLs (CreateAcls) on cluster B" in warning["event"]
    assert "ALTER on CLUSTER" in warning["event"]
    assert warning["acl"].endswith("on topic A.orders from host *")


def test_target_without_authorizer_warns_once() -> None:
    source = FakeAdmin([_acl("orders", AclOperation.READ)])
    target = FakeAdmin(
        describe_error=KafkaError.SECURITY_DISABLED, create_error=KafkaError.SECURITY_DISABLED
    )
    sync = TopicAclSync(_flow(), source, target)
    with capture_logs() as logs:
        sync.run_once()
        sync.run_once()
    events = [w["event"] for w in _warnings(logs)]
    # one per call refused (DescribeAcls, CreateAcls), each once
    assert len(events) == 2
    assert all("cluster B has no ACL authorizer" in e for e in events)


def test_nothing_to_copy_sends_no_request_to_the_target() -> None:
    # the embedded broker's answer: DescribeAcls lists nothing (its CreateAcls
    # response makes librdkafka abort, so an empty create must never be sent)
    target = FakeAdmin()
    assert TopicAclSync(_flow(), FakeAdmin([]), target).run_once() == []
    assert target.describes == [] and target.creates == []


class _Exploding(FakeAdmin):
    def describe_acls(self, acl_filter: AclBindingFilter, request_timeout: float) -> Future[Any]:
        raise RuntimeError("boom")


def test_thread_runs_every_interval_and_survives_errors() -> None:
    source = FakeAdmin([_acl("orders", AclOperation.READ)])
    target = FakeAdmin()
    good = TopicAclSync(_flow(), source, target)
    bad = TopicAclSync(_flow(), _Exploding(), FakeAdmin())
    with capture_logs() as logs:
        thread = AclSyncThread([(good, 0.05), (bad, 0.05)])
        thread.start()
        deadline = time.monotonic() + 5
        while len(source.describes) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        thread.close()
    assert not thread.is_alive()
    assert len(source.describes) >= 3  # rounds go on after the other sync's errors
    assert target.bindings == [_acl("A.orders", AclOperation.READ)]
    assert len(target.creates) == 1
    assert len(_warnings(logs)) == 1  # the exploding sync, once
    assert thread.rounds >= 3


def test_start_acl_sync_runs_only_enabled_flows_and_builds_one_admin_per_cluster() -> None:
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:9092",
        "B.bootstrap.servers": "b:9092",
        "A->B.enabled": "true",
    }
    cfg = build_config({**props, "sync.topic.acls.enabled": "false"})
    assert start_acl_sync(cfg, cfg.enabled_flows(), lambda alias: FakeAdmin()) is None

    cfg = build_config(props)
    admins: dict[str, FakeAdmin] = {}
    started = threading.Event()

    def admin(alias: str) -> FakeAdmin:
        admins[alias] = FakeAdmin([_acl("orders", AclOperation.READ)] if alias == "A" else [])
        started.set()
        return admins[alias]

    thread = start_acl_sync(cfg, cfg.enabled_flows(), admin)
    assert thread is not None
    deadline = time.monotonic() + 5
    while not admins.get("B", FakeAdmin()).creates and time.monotonic() < deadline:
        time.sleep(0.01)
    thread.close()
    assert sorted(admins) == ["A", "B"]
    assert admins["B"].bindings == [_acl("A.orders", AclOperation.READ)]
