"""Topic ACL sync (``sync.topic.acls.enabled``, MM2's default true), run by the mirror.

Every ``sync.topic.acls.interval.seconds`` (600) per flow: list the source's topic
ACL bindings (DescribeAcls), map them with MM2's rules (:mod:`mm.source.acls`),
and create on the target the ones it does not hold yet (CreateAcls), logging each
binding created. What the target holds is read with DescribeAcls too; when that
is refused, only bindings this process has not created yet are sent (CreateAcls
of an existing binding is a no-op on Apache Kafka, so at worst one is sent again).

A cluster without an authorizer (SECURITY_DISABLED), a principal without the
rights (DESCRIBE on CLUSTER on the source for DescribeAcls; DESCRIBE and ALTER on
CLUSTER on the target), or a broker that does not answer is one WARNING naming
the cluster, the call and what to grant; the same problem again is logged at
debug. librdkafka answers a refused DescribeAcls with an empty list, no error: an
empty answer is checked against the operations DescribeCluster says the principal
may do on the cluster. The sync never stops the mirror: it runs in a daemon
thread of the driver and every round catches its own errors.

No CreateAcls request is sent when there is nothing to create: a broker may
answer DescribeAcls with an empty list (the embedded one does, see
:mod:`mm.kafka.profile`), and librdkafka aborts on its CreateAcls response.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from mm.config import FlowConfig, MirrorConfig
from mm.kafka.profile import KAFKA, BrokerProfile
from mm.logs import get_logger
from mm.source.acls import target_acl_bindings

__all__ = ["AclSyncThread", "TopicAclSync", "describe_binding", "start_acl_sync"]

# None matches anything (the stubs say str; librdkafka takes NULL)
_ANY: Any = None
# MM2's ANY_TOPIC_ACL: every binding on a topic resource, any pattern type
_SOURCE_FILTER = AclBindingFilter(
    ResourceType.TOPIC,
    _ANY,
    ResourcePatternType.ANY,
    _ANY,
    _ANY,
    AclOperation.ANY,
    AclPermissionType.ANY,
)
# the bindings the sync creates are literal topic bindings
_TARGET_FILTER = AclBindingFilter(
    ResourceType.TOPIC,
    _ANY,
    ResourcePatternType.LITERAL,
    _ANY,
    _ANY,
    AclOperation.ANY,
    AclPermissionType.ANY,
)

_CALLS = {
    "describe": "list topic ACLs (DescribeAcls)",
    "create": "create ACLs (CreateAcls)",
}
# the right each call needs, for the warning (Kafka's authorizer: ACL APIs are CLUSTER-level)
_NEEDS = {
    "describe": "DESCRIBE on CLUSTER",
    "create": "ALTER on CLUSTER",
}


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


def describe_binding(b: AclBinding) -> str:
    """``User:app ALLOW READ on topic A.orders from host *`` (for logs)."""
    return (
        f"{b.principal} {_name(b.permission_type)} {_name(b.operation)} "
        f"on topic {b.name} from host {b.host}"
    )


def _error_code(exc: BaseException) -> int | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return int(exc.args[0].code())
    return None


class TopicAclSync:
    """One flow's sync: :meth:`run_once` is one round (never raises for Kafka errors)."""

    def __init__(
        self,
        flow: FlowConfig,
        source_admin: Any,
        target_admin: Any,
        *,
        timeout: float = 30.0,
        log: Any = None,
        profiles: Mapping[str, BrokerProfile] | None = None,
    ) -> None:
        self.flow = flow
        self._profiles = dict(profiles or {})  # by cluster alias; Apache Kafka if absent
        self._source, self._target = source_admin, target_admin
        self._timeout = timeout
        self._log = log if log is not None else get_logger("mm.mirror.acls", flow=flow.name)
        self._created: set[AclBinding] = set()  # by this process (target unreadable)
        self._warned: set[tuple[str, str, int | None]] = set()
        self.warnings = 0  # WARNING lines logged (tests, status)

    # --- one round -------------------------------------------------------------------

    def run_once(self) -> list[AclBinding]:
        """Copy what is missing; returns the bindings created in this round."""
        source_bindings = self._describe(self._source, self.flow.source, _SOURCE_FILTER)
        if source_bindings is None:
            return []
        wanted = target_acl_bindings(self.flow, source_bindings)
        missing: list[AclBinding] = []
        if wanted:  # else no request to the target at all (see the module docstring)
            held = self._describe(self._target, self.flow.target, _TARGET_FILTER)
            present = set(held) if held is not None else self._created
            missing = [b for b in wanted if b not in present]
        self._log.debug(
            "topic ACLs checked",
            source_acls=len(source_bindings),
            copied=len(wanted),
            missing=len(missing),
        )
        return self._create(missing) if missing else []

    def _describe(
        self, admin: Any, cluster: str, acl_filter: AclBindingFilter
    ) -> list[AclBinding] | None:
        try:
            result = admin.describe_acls(acl_filter, request_timeout=self._timeout)
            bindings = list(result.result(timeout=self._timeout))
        except Exception as exc:  # any failure ends the round, logged
            self._problem("describe", cluster, exc)
            return None
        if not bindings and not self._may_describe_acls(admin, cluster):
            return None
        return bindings

    def _may_describe_acls(self, admin: Any, cluster: str) -> bool:
        """Whether an empty DescribeAcls answer can be believed.

        librdkafka (2.16) drops DescribeAcls' error code: a principal without DESCRIBE
        on CLUSTER, and a cluster without an authorizer, both read as "no ACLs". The
        cluster's answer to DescribeCluster lists the operations the principal may do
        on it (all of them without an authorizer: nothing to sync, nothing to say;
        none without DESCRIBE): without DESCRIBE, the empty answer is the refusal it
        hides. A cluster that cannot say (its broker profile, an older broker, an
        error) is believed."""
        if not self._profiles.get(cluster, KAFKA).lists_cluster_operations:
            return True
        try:
            described = admin.describe_cluster(
                include_authorized_operations=True, request_timeout=self._timeout
            ).result(timeout=self._timeout)
            ops = described.authorized_operations
        except Exception:
            return True
        if {AclOperation.DESCRIBE, AclOperation.ALL} & set(ops or ()):
            return True
        refused = KafkaError(
            KafkaError.CLUSTER_AUTHORIZATION_FAILED,
            "DescribeAcls answered no ACL, and DescribeCluster lists no DESCRIBE on CLUSTER",
        )
        self._problem("describe", cluster, KafkaException(refused))
        return False

    def _create(self, bindings: Sequence[AclBinding]) -> list[AclBinding]:
        cluster = self.flow.target
        try:
            futures = self._target.create_acls(list(bindings), request_timeout=self._timeout)
        except Exception as exc:
            self._problem("create", cluster, exc)
            return []
        created: list[AclBinding] = []
        for binding, future in futures.items():
            try:
                future.result(timeout=self._timeout)
            except Exception as exc:
                self._problem("create", cluster, exc, binding)
                continue
            created.append(binding)
        if created:
            self._created.update(created)
            self._log.info(
                "topic ACLs created on the target",
                cluster=cluster,
                count=len(created),
                acls=[describe_binding(b) for b in created],
            )
        return created

    # --- errors ----------------------------------------------------------------------

    def _problem(
        self, call: str, cluster: str, exc: BaseException, binding: AclBinding | None = None
    ) -> None:
        code = _error_code(exc)
        key = (call, cluster, code if code is not None else hash(type(exc)))
        what = _CALLS.get(call, "sync topic ACLs")
        if code == KafkaError.SECURITY_DISABLED:
            message = (
                f"cluster {cluster} has no ACL authorizer: could not {what}, topic ACLs of "
                f"flow {self.flow.name} are not synced (set {self.flow.name}.sync.topic.acls."
                "enabled = false to turn the sync off)"
            )
        elif code in (
            KafkaError.CLUSTER_AUTHORIZATION_FAILED,
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
        ):
            message = (
                f"not authorized to {what} on cluster {cluster}: grant the mirror's "
                f"principal {_NEEDS.get(call, 'DESCRIBE and ALTER on CLUSTER')} there, or set "
                f"{self.flow.name}.sync.topic.acls.enabled = false"
            )
        else:
            message = f"could not {what} on cluster {cluster}; retrying every interval"
        fields: dict[str, Any] = {"cluster": cluster, "error": str(exc).splitlines()[0]}
        if binding is not None:
            fields["acl"] = describe_binding(binding)
        if key in self._warned:
            self._log.debug("topic ACL sync: " + message, **fields)
            return
        self._warned.add(key)
        self.warnings += 1
        self._log.warning("topic ACL sync: " + message, **fields)


class AclSyncThread(threading.Thread):
    """Runs each sync at once, then every ``interval`` seconds, until :meth:`close`."""

    def __init__(
        self,
        syncs: Sequence[tuple[TopicAclSync, float]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name="mm-topic-acl-sync", daemon=True)
        self._syncs = list(syncs)
        self._clock = clock
        self._closing = threading.Event()
        self.rounds = 0

    def run(self) -> None:
        due = [0.0] * len(self._syncs)
        while not self._closing.is_set():
            now = self._clock()
            for i, (sync, interval) in enumerate(self._syncs):
                if now >= due[i] and not self._closing.is_set():
                    try:
                        sync.run_once()
                    except Exception as exc:  # never stop the mirror
                        sync._problem("sync", sync.flow.target, exc)
                    due[i] = self._clock() + interval
                    self.rounds += 1
            wait = min(due) - self._clock()
            self._closing.wait(max(0.05, wait))

    def close(self, timeout: float = 5.0) -> None:
        self._closing.set()
        if self.is_alive():
            self.join(timeout)


def start_acl_sync(
    cfg: MirrorConfig,
    flows: Sequence[FlowConfig],
    admin: Callable[[str], Any],
) -> AclSyncThread | None:
    """Start the sync of every flow with ``sync.topic.acls.enabled`` (None: none has).

    ``admin(alias)`` builds the admin client of a cluster (with its security settings).
    """
    enabled = [f for f in flows if f.sync_topic_acls_enabled]
    if not enabled:
        return None
    clients: dict[str, Any] = {}

    def client(alias: str) -> Any:
        if alias not in clients:
            clients[alias] = admin(alias)
        return clients[alias]

    syncs = [
        (
            TopicAclSync(
                f,
                client(f.source),
                client(f.target),
                profiles={a: cfg.cluster(a).profile for a in (f.source, f.target)},
            ),
            float(f.sync_topic_acls_interval_seconds),
        )
        for f in enabled
    ]
    thread = AclSyncThread(syncs)
    thread.start()
    return thread
