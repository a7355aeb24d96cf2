"""Helpers of the heartbeat/status tests: properties files, `mm` runs, metrics scrapes.

Imported by the test modules of this directory (pytest puts it on sys.path).
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from prometheus_client.parser import text_string_to_metric_families
from support.cli import CommandRun, run_mm
from support.mirror import mm_env


def write_properties(
    path: Path,
    clusters: Mapping[str, str],
    flows: Mapping[str, str],
    *,
    state_dir: Path,
    extra: Mapping[str, str] | None = None,
) -> Path:
    """``clusters``: alias -> bootstrap; ``flows``: "X->Y" -> its ``topics`` value."""
    lines = [f"clusters = {', '.join(clusters)}"]
    lines += [f"{a}.bootstrap.servers = {b}" for a, b in clusters.items()]
    for flow, topics in flows.items():
        lines += [f"{flow}.enabled = true", f"{flow}.topics = {topics}"]
    lines += [f"mm.state.dir = {state_dir}", "spark.master = local[2]"]
    lines += [f"{k} = {v}" for k, v in (extra or {}).items()]
    path.write_text("\n".join(lines) + "\n")
    return path


Run = CommandRun  # a finished `mm` command (tests.support.cli)


def status(config: Path, *args: str, timeout: float = 120.0) -> Run:
    return run_mm("status", "-c", str(config), *args, cwd=config.parent, timeout=timeout)


def status_until(
    config: Path,
    accept: Callable[[Run], bool],
    *,
    timeout: float,
    interval: float = 0.5,
    args: tuple[str, ...] = ("--json",),
) -> tuple[Run, float]:
    """Run `mm status` until ``accept(run)``; returns the run and when it started."""
    deadline = time.monotonic() + timeout
    runs: list[Run] = []
    while True:
        started = time.monotonic()
        run = status(config, *args)
        runs.append(run)
        if accept(run):
            return run, started
        if time.monotonic() > deadline:
            raise AssertionError(
                f"`mm status` never accepted within {timeout:.0f}s ({len(runs)} runs); last:\n"
                + run.describe()
            )
        time.sleep(interval)


def flow_of(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    for f in doc["flows"]:
        if f["flow"] == name:
            return dict(f)
    raise AssertionError(f"flow {name} not in the status: {[f['flow'] for f in doc['flows']]}")


def partition_of(flow: Mapping[str, Any], topic: str, partition: int) -> dict[str, Any]:
    for p in flow["partitions"]:
        if p["topic"] == topic and p["partition"] == partition:
            return dict(p)
    raise AssertionError(f"{topic}[{partition}] not in the status of {flow['flow']}")


class Background:
    """A long-running `mm` command in its own session, output to files."""

    def __init__(self, log_dir: Path, name: str, *args: str, cwd: Path) -> None:
        self.stdout_path = log_dir / f"{name}.stdout"
        self.stderr_path = log_dir / f"{name}.stderr"
        self._out = open(self.stdout_path, "w")
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mm", *args],
            cwd=cwd,
            env=mm_env(),
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,
        )

    def output(self) -> str:
        self._out.flush()
        self._err.flush()
        return self.stdout_path.read_text() + self.stderr_path.read_text()

    def terminate(self, timeout: float = 30.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(30)
        self._out.close()
        self._err.close()


Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(url: str, timeout: float = 10.0) -> Samples:
    """Sample name -> [(labels, value)] of a Prometheus text-format endpoint."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        assert resp.status == 200
        assert resp.headers.get("Content-Type", "").startswith("text/plain")
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def scrape_until(
    url: str, accept: Callable[[Samples], bool], timeout: float, log: Callable[[], str]
) -> Samples:
    deadline = time.monotonic() + timeout
    last: Samples | str = "no answer"
    while time.monotonic() < deadline:
        try:
            got = scrape(url)
        except (OSError, http.client.HTTPException) as exc:
            # not answering yet, or not (yet) the job's server: the port was chosen free
            # before the job bound it (seen once: another process's bytes, BadStatusLine)
            last = repr(exc)
        else:
            last = got
            if accept(got):
                return got
        time.sleep(0.5)
    raise AssertionError(f"{url}: never accepted within {timeout:.0f}s; last {last}\n{log()}")


def value(samples: Samples, name: str, **labels: str) -> float | None:
    for got, v in samples.get(name, []):
        if all(got.get(k) == want for k, want in labels.items()):
            return v
    return None


def read_raw(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[bytes, bytes, int]]:
    """(key, value, timestamp) of every committed record of ``topic[partition]``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"mm-test-raw-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    out: list[tuple[bytes, bytes, int]] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in consumer.consume(10_000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return out
                    raise AssertionError(f"reading {topic}: {err}")
                out.append((m.key() or b"", m.value() or b"", m.timestamp()[1]))
        raise AssertionError(f"no end of {topic}[{partition}] within 60s")
    finally:
        consumer.close()
