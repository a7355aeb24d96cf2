"""A broker whose freshly picked port was taken before it bound starts again on new
ports: the embedded clusters' (``mm drill``, ``mm demo``) and the tests' own."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.apache_kafka import KRaftBroker

from mm.embedded import procs
from mm.embedded.kraft import KRaftCluster


@pytest.fixture
def taken_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A port another process holds, handed out as the next "free" port once."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind((procs.LOOPBACK, 0))
    holder.listen()
    port = int(holder.getsockname()[1])
    real = procs.free_port
    handed: list[int] = []

    def first_taken(host: str = procs.LOOPBACK) -> int:
        if not handed:
            handed.append(port)
            return port
        return real(host)

    monkeypatch.setattr(procs, "free_port", first_taken)
    try:
        yield port
    finally:
        holder.close()
    assert handed == [port]  # the race happened: the taken port was handed out


def test_embedded_cluster_starts_again_on_new_ports(taken_port: int, tmp_path: Path) -> None:
    cluster = KRaftCluster("ports", run_dir=tmp_path)
    try:
        info = cluster.start()
        assert cluster.port != taken_port
        assert info.bootstrap_servers == f"127.0.0.1:{cluster.port}"
        assert procs.port_open(procs.LOOPBACK, cluster.port)
    finally:
        cluster.stop()


def test_test_broker_starts_again_on_new_ports(taken_port: int, tmp_path: Path) -> None:
    broker = KRaftBroker(tmp_path / "kafka")
    try:
        assert broker.port != taken_port
        assert broker.bootstrap == f"127.0.0.1:{broker.port}"
        assert "Address already in use" not in broker.log_text()
    finally:
        broker.stop()
