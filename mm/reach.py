"""Is every cluster a command needs answering? Checked once, before any work starts.

A wrong bootstrap address used to surface late and loud: hundreds of librdkafka
``%3|...|FAIL|`` lines, then an error that did not say which cluster, or a
Spark stack trace. :func:`require_reachable` asks each cluster for its metadata
(in parallel, each within ``timeout``) before Spark or any job starts, and
raises one :class:`ClusterUnreachableError` naming the alias, the address and
librdkafka's reason: ``cluster A (127.0.0.1:1) did not answer within 10s:
connection refused``. The CLI prints it as one line and exits 1 (an unreachable
cluster is a failure, not invalid configuration: the address may be right and
the cluster down).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from mm_client.connection import bootstrap_of
from mm_client.kafka.clients import new_admin

from mm.config import MirrorConfig
from mm.errors import MirrorError

__all__ = ["STARTUP_TIMEOUT", "ClusterUnreachableError", "require_reachable", "unreachable"]

# for the commands without a --timeout (mirror, checkpoint, heartbeat)
STARTUP_TIMEOUT = 10.0

# "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms
# in state CONNECT)" -> "Connection refused"
_FAILED = re.compile(r"failed: (?P<why>.+?)(?: \(after \d+ms in state \w+\))?$")
# errors that only summarise the ones before them
_SUMMARIES = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT})


class ClusterUnreachableError(MirrorError):
    """One or more clusters did not answer (exit code 1)."""


class _Reasons:
    """An ``error_cb`` keeping librdkafka's most telling error: the first connection
    failure, not the "1/1 brokers are down" that follows it."""

    def __init__(self) -> None:
        self.first: KafkaError | None = None
        self.summary: KafkaError | None = None

    def __call__(self, err: KafkaError) -> None:
        if err.code() in _SUMMARIES:
            self.summary = self.summary or err
        else:
            self.first = self.first or err

    def describe(self, exc: BaseException | None) -> str:
        err = self.first or self.summary
        if err is None:
            return str(exc.args[0].str() if exc and exc.args else "no response")
        text = err.str()
        m = _FAILED.search(text)
        why = m.group("why") if m else text
        return why[:1].lower() + why[1:]


def _probe(conf: dict[str, Any], timeout: float) -> str | None:
    """None when the cluster returned its metadata within ``timeout``; else why not."""
    reasons = _Reasons()
    conf = {**conf, "error_cb": reasons}
    # never longer than the check itself waits (librdkafka's default is 30 s)
    conf.setdefault("socket.connection.setup.timeout.ms", max(1000, int(timeout * 1000)))
    try:
        admin = new_admin(conf)
    except KafkaException as exc:  # a property librdkafka rejects: say so, not "unreachable"
        return str(exc)
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        # error_cb (and the log lines) are served by poll(), which list_topics
        # does not call: the connection failures are still queued
        admin.poll(0)
        return reasons.describe(exc)
    return None


def unreachable(cfg: MirrorConfig, aliases: Iterable[str], timeout: float) -> dict[str, str]:
    """``{alias: "cluster A (addr) did not answer within 10s: why"}`` for each alias
    whose cluster did not answer; probed in parallel, so the whole check takes at
    most about ``timeout``."""
    wanted = sorted(set(aliases))
    confs = {a: cfg.cluster(a).librdkafka("admin") for a in wanted}
    answers: dict[str, str | None] = {}

    def probe(alias: str) -> None:
        answers[alias] = _probe(confs[alias], timeout)

    threads = [threading.Thread(target=probe, args=(a,), daemon=True) for a in wanted]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)  # list_topics returns by its timeout; this is a safety net
    out: dict[str, str] = {}
    for alias in wanted:
        # a probe still running past the safety net counts as no answer
        why = answers.get(alias, "no response")
        if why is not None:
            out[alias] = (
                f"cluster {alias} ({bootstrap_of(confs[alias])}) did not answer "
                f"within {timeout:g}s: {why}"
            )
    return out


def require_reachable(cfg: MirrorConfig, aliases: Iterable[str], timeout: float) -> None:
    """Raise :class:`ClusterUnreachableError` (one line) unless every cluster answers."""
    failed = unreachable(cfg, aliases, timeout)
    if failed:
        raise ClusterUnreachableError("; ".join(failed.values()))
