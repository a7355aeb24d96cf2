"""New brokers of one process take their formatted storage from a template instead of
a `kafka-storage format` JVM each (mm.embedded.formatted): each is still a cluster of
its own (its own cluster id), serves records, and with SCRAM users authenticates them."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.apache_kafka import KRaftBroker

from mm.config.properties import load_properties
from mm.embedded import formatted

TOOL = "kafka.tools.StorageTool"


def _config(tmp_path: Path, name: str, log_dirs: str, node: int = 1) -> Path:
    path = tmp_path / f"{name}.properties"
    path.write_text(f"node.id = {node}\nlog.dirs = {log_dirs}\nprocess.roles = broker,controller\n")
    return path


class FakeTool:
    """Writes what `kafka-storage format` writes into each log directory of a config."""

    def __init__(self, config: Path) -> None:
        self.config, self.runs = config, 0

    def __call__(self, cluster_id: str) -> None:
        self.runs += 1
        props = load_properties(self.config)
        for d in props["log.dirs"].split(","):
            Path(d).mkdir(parents=True, exist_ok=True)
            (Path(d) / formatted.BOOTSTRAP).write_bytes(b"features+scram")
            (Path(d) / formatted.META).write_text(
                formatted.meta_properties(cluster_id, props["node.id"], f"dir-{self.runs}")
            )


@pytest.fixture(autouse=True)
def fresh_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formatted, "_templates", {})


@pytest.mark.unit
def test_the_second_format_copies_the_first_with_new_ids(tmp_path: Path) -> None:
    ids = iter(f"id{i}" for i in range(10))
    runs = 0
    for name, args in (("a", ("--add-scram", "x")), ("b", ("--add-scram", "x")), ("c", ())):
        config = _config(tmp_path, name, str(tmp_path / name / "data"))
        tool = FakeTool(config)
        formatted.format_from_template(config, args, f"cluster-{name}", lambda: next(ids), tool)
        runs += tool.runs
        meta = load_properties(tmp_path / name / "data" / formatted.META)
        assert meta["cluster.id"] == f"cluster-{name}" and meta["node.id"] == "1"
        assert (tmp_path / name / "data" / formatted.BOOTSTRAP).read_bytes() == b"features+scram"
    # a ran the tool, b (same arguments) was copied with a new directory id, c (other
    # arguments) ran the tool again
    assert runs == 2
    assert load_properties(tmp_path / "b" / "data" / formatted.META)["directory.id"] == "id0"


@pytest.mark.unit
@pytest.mark.parametrize("shape", ["two log dirs", "metadata dir", "used dir"])
def test_what_the_template_cannot_serve_runs_the_tool(tmp_path: Path, shape: str) -> None:
    for i in range(2):
        dirs = f"{tmp_path}/{i}/d1" + (f",{tmp_path}/{i}/d2" if shape == "two log dirs" else "")
        config = _config(tmp_path, f"n{i}", dirs)
        if shape == "metadata dir":
            config.write_text(config.read_text() + f"metadata.log.dir = {tmp_path}/{i}/meta\n")
        if shape == "used dir" and i == 1:  # a log of an earlier cluster in it
            (tmp_path / "1" / "d1").mkdir(parents=True)
            (tmp_path / "1" / "d1" / "00000000000000000000.log").write_text("")
        tool = FakeTool(config)
        formatted.format_from_template(config, (), f"c{i}", lambda: "dir", tool)
        assert tool.runs == 1, f"format {i} ({shape}) did not run the tool"


def _storage_tool_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    runs: list[list[str]] = []
    real = subprocess.run

    def counting(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        if TOOL in cmd:
            runs.append(list(cmd))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    return runs


def _serves(bootstrap: str, topic: str) -> str:
    """The cluster id of ``bootstrap``, once a record written there was read back."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic})
    consumer.assign([TopicPartition(topic, 0, 0)])
    msg = consumer.poll(30)
    consumer.close()
    assert msg is not None and msg.error() is None and msg.value() == b"v"
    cluster_id = admin.describe_cluster(request_timeout=30).result(60).cluster_id
    assert isinstance(cluster_id, str)
    return cluster_id


@pytest.mark.integration
def test_brokers_from_the_template_are_clusters_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _storage_tool_runs(monkeypatch)
    brokers = [KRaftBroker(tmp_path / f"k{i}", wait=False) for i in range(3)]
    try:
        for b in brokers:
            b.wait_ready()
        ids = [_serves(b.bootstrap, f"formatted-{i}") for i, b in enumerate(brokers)]
    finally:
        for b in brokers:
            b.stop()
    assert len(runs) == 1, f"the storage tool ran {len(runs)} times for 3 brokers"
    assert len(set(ids)) == 3, ids
    for i, b in enumerate(brokers):
        meta = load_properties(b.dir / "data" / formatted.META)
        assert meta["cluster.id"] == ids[i]
