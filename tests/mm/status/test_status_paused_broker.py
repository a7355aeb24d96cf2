"""`mm status` must outlive a broker that stops answering and comes back.

librdkafka 2.16 aborts the whole process (assertion `eonce->refcnt > 0`) when a client
whose group-offsets request timed out is still alive when the broker answers again.
The status reads keep no such client: the one that failed is destroyed at once, not
when the cyclic garbage collector frees the error's frames (found by fault 1: `mm
status --serve` died after the target was resumed).

The reads run in a subprocess (an abort would take pytest with it), with the cyclic
collector off and the errors kept, as a long-running `mm status --serve` may keep
them; the broker is paused past the request timeout, then resumed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from support.clusters import KafkaFactory, use_embedded_profile
from support.mirror import mm_env

pytestmark = pytest.mark.integration

READS = """
import gc, sys
from mm.status.reads import group_offsets
bootstrap = sys.argv[1]
gc.disable()
kept = []
for i in range(3):
    try:
        group_offsets({"bootstrap.servers": bootstrap}, ["g"], "B", 2.0)
    except Exception as exc:
        kept.append(exc)
print(f"failed {len(kept)}", flush=True)
sys.stdin.readline()  # the test resumes the broker, then lets it wait a while
import time
time.sleep(8)
print("alive", flush=True)
"""


@pytest.mark.timeout(180)
def test_group_offsets_timed_out_on_a_paused_broker_do_not_abort_after_it_resumes(
    kafka_factory: KafkaFactory,
    unique_group: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_embedded_profile(monkeypatch)
    cluster = kafka_factory.embedded.add(unique_group("P"))
    assert cluster.pid is not None
    proc: subprocess.Popen[str] | None = None
    try:
        os.kill(cluster.pid, signal.SIGSTOP)
        proc = subprocess.Popen(
            [sys.executable, "-c", READS, cluster.bootstrap_servers],
            env=mm_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line.strip() == "failed 3", (line, proc.stderr.read() if proc.stderr else "")
        time.sleep(2)
        os.kill(cluster.pid, signal.SIGCONT)
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out.strip() == "alive", (
            f"exit {proc.returncode}: {out!r}\n{err[-3000:]}"
        )
    finally:
        os.kill(cluster.pid, signal.SIGCONT)
        if proc is not None and proc.poll() is None:
            proc.kill()
        kafka_factory.remove(cluster.name)
