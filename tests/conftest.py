"""Shared fixtures: Kafka clusters A/B/C, durable (restartable) clusters, unique names.

Clusters come from MMTEST_<NAME>_BOOTSTRAP, else Docker (Apache Kafka), else
embedded Tansu brokers; see tests/support/clusters.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator, Mapping

import pytest
from hypothesis import HealthCheck, settings

# `support` first: importing it makes sure `mm` is the real package (see its docstring).
from support.apache_kafka import KRaftBroker
from support.clusters import KafkaCluster, KafkaFactory, use_embedded_profile
from support.names import unique_name

from mm.embedded import EmbeddedCluster

# Property tests run the same generated examples on every CI run, so a red run is
# reproducible and a green one repeatable; HYPOTHESIS_PROFILE=explore draws new
# ones (run it when changing the copy loop or translation, with a larger
# --hypothesis-seed range), and examples it finds are pinned with @example.
# Generation speed is not checked: on a 2-core host running four test workers and
# their brokers a single draw can wait a second for the CPU (a failback property
# test failed that way: 7 inputs in 1.1 s, one draw 1.06 s), which says nothing
# about the property.
_LOADED_HOST = {"suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, print_blob=True, **_LOADED_HOST)
settings.register_profile("explore", derandomize=False, print_blob=True, **_LOADED_HOST)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def kafka_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaFactory]:
    """Clusters by name (``.cluster("A")``), the same object for the whole session."""
    # Broker logs under pytest's temp dir, which keeps the last few sessions.
    factory = KafkaFactory(tmp_path_factory.mktemp("brokers"))
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="session")
def cluster_a(kafka_factory: KafkaFactory) -> KafkaCluster:
    return kafka_factory.cluster("A")


@pytest.fixture(scope="session")
def cluster_b(kafka_factory: KafkaFactory) -> KafkaCluster:
    return kafka_factory.cluster("B")


@pytest.fixture(scope="session")
def cluster_c(kafka_factory: KafkaFactory) -> KafkaCluster:
    return kafka_factory.cluster("C")


@pytest.fixture
def durable_cluster(
    kafka_factory: KafkaFactory,
    unique_group: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[], EmbeddedCluster]]:
    """Factory of fresh durable embedded clusters (``.restart()`` keeps data).

    Each call starts a new cluster; all are stopped when the test ends.
    """
    created: list[str] = []

    def make() -> EmbeddedCluster:
        reason = kafka_factory.durable_unavailable_reason()
        if reason:
            pytest.skip(reason)
        name = unique_group("D")  # the group-name rules also suit cluster ids
        created.append(name)
        use_embedded_profile(monkeypatch)
        return kafka_factory.durable(name)

    yield make
    for name in created:
        kafka_factory.remove(name)


@pytest.fixture
def own_kafka(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., KRaftBroker]]:
    """Factory of one-node Apache Kafka clusters of the test's own (to kill, restart, or
    keep apart from other tests' topics); each is stopped when the test ends, its logs
    kept under pytest's temp dir."""
    made: list[KRaftBroker] = []

    def make(wait: bool = True, extra: Mapping[str, object] | None = None) -> KRaftBroker:
        """``wait=False``: call ``.wait_ready()`` (several brokers start at once that way);
        ``extra``: server properties added or overridden."""
        made.append(KRaftBroker(tmp_path_factory.mktemp("kafka"), wait=wait, extra=extra))
        return made[-1]

    yield make
    for broker in made:
        broker.stop()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[..., str]:
    """``unique_topic("orders")`` -> ``orders-<test name>-<8 hex>``."""
    return lambda prefix="topic": unique_name(prefix, request.node.name)


@pytest.fixture
def unique_group(request: pytest.FixtureRequest) -> Callable[..., str]:
    """``unique_group("mirror")`` -> ``mirror-<test name>-<8 hex>``."""
    return lambda prefix="group": unique_name(prefix, request.node.name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On failure, say where the brokers and their logs are."""
    report = yield
    factory = getattr(item, "funcargs", {}).get("kafka_factory")
    if report.failed and isinstance(factory, KafkaFactory):
        report.sections.append(("Kafka clusters (broker logs)", factory.describe()))
    return report
