"""Building Kafka clients: the one place they are constructed, and the one reader conf.

:func:`new_consumer`, :func:`new_producer` and :func:`new_admin` are the only
calls of ``Consumer(``, ``Producer(`` and ``AdminClient(`` in the toolkit. They
only construct; what every client should get (an ``error_cb``, a logger) is
added here once, not at each caller. Tests inject fakes in their place through
the callers' factory parameters.

:func:`reader_conf` is the one definition of an *assign-only reader*: a
consumer that is given partitions with ``assign()``, reads or lists offsets,
and is closed. It never joins its group and never commits, so its
``group.id`` only has to satisfy librdkafka (which wants one) and must never be
a real application's group.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "closing_consumer",
    "new_admin",
    "new_consumer",
    "new_producer",
    "reader_conf",
    "throwaway_group",
]

Isolation = Literal["read_committed", "read_uncommitted"]

# librdkafka's own log lines (``%3|...|FAIL|...`` for every refused connection)
# go to this stdlib logger rather than straight to stderr, where they buried the
# one line saying what was wrong (errors name the cause instead: ErrorTrail).
# Applications decide where it goes (``mm`` sends it to its structured log at
# debug level); unconfigured it is quiet: the NullHandler keeps Python's
# last-resort handler from printing every refused connection on stderr, and a
# configured root logger still receives the lines.
LIBRDKAFKA_LOGGER = logging.getLogger("mm_client.librdkafka")
LIBRDKAFKA_LOGGER.addHandler(logging.NullHandler())


def throwaway_group(prefix: str, digits: int = 8) -> str:
    """``<prefix>-<random hex>``: a ``group.id`` no other client uses.

    The prefix is kept stable per kind of reader: operators recognise such
    groups in listings, and a prefixed ACL can grant them all.
    """
    return f"{prefix}-{uuid.uuid4().hex[:digits]}"


def reader_conf(
    base: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    group: str,
    isolation: Isolation | None = "read_committed",
    eof: bool = True,
    drop: Iterable[str] = (),
) -> dict[str, Any]:
    """The configuration of an assign-only reader built on ``base`` (a cluster's
    consumer properties).

    Merged in this order, each step winning over the previous one:

    1. ``base``, without the keys in ``drop`` (e.g. ``group.instance.id``, which
       names a member of the caller's real group);
    2. the reader settings:

       * ``group.id = group``: required by librdkafka even though the reader never
         joins; a :func:`throwaway_group`, or a group the caller owns whose
         committed offsets the reader must not touch;
       * ``enable.auto.commit = False`` and ``enable.auto.offset.store = False``:
         the reader never commits and never stores an offset to commit;
       * ``isolation.level = isolation``: ``read_committed`` by default, so aborted
         records are skipped and ends are the last stable offset; ``None`` keeps
         whatever ``base`` says (librdkafka's default is ``read_committed``);
       * ``enable.partition.eof = eof``: True by default, so a read learns it
         reached the end of a partition instead of waiting for more;

    3. ``overrides``: any other property, e.g.
       ``{"auto.offset.reset": "earliest", "fetch.wait.max.ms": 10}``.
    """
    dropped = frozenset(drop)
    conf = {k: v for k, v in base.items() if k not in dropped}
    conf.update(
        {
            "group.id": group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )
    if isolation is not None:
        conf["isolation.level"] = isolation
    conf["enable.partition.eof"] = eof
    if overrides:
        conf.update(overrides)
    return conf


def _with_logger(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` copied, with :data:`LIBRDKAFKA_LOGGER` unless it names a logger."""
    out = dict(conf)
    out.setdefault("logger", LIBRDKAFKA_LOGGER)
    return out


def new_consumer(conf: Mapping[str, Any]) -> Consumer:
    """A confluent-kafka Consumer built from ``conf`` (copied), logging to
    :data:`LIBRDKAFKA_LOGGER` unless ``conf`` names a ``logger``."""
    return Consumer(_with_logger(conf))


def new_producer(conf: Mapping[str, Any]) -> Producer:
    """A confluent-kafka Producer built from ``conf`` (copied), logging to
    :data:`LIBRDKAFKA_LOGGER` unless ``conf`` names a ``logger``."""
    return Producer(_with_logger(conf))


def latest_wins_producer_conf(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` for a producer of records read newest-first, where a duplicate changes
    nothing (published ends, checkpoints, heartbeats, status, failover points):
    every write acknowledged by all in-sync replicas, one request in flight (a retry
    never puts an older record after a newer one), and no idempotence. librdkafka
    asks for an idempotent producer's id on a 500 ms timer once the client is up,
    so a short-lived publisher's first delivery waited ~0.5 s for it (every mirror
    start flushed one); without it, a retry can at worst write a record twice."""
    out = dict(conf)
    out.pop("transactional.id", None)
    out.update(
        {
            "acks": "all",
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
        }
    )
    return out


def new_admin(conf: Mapping[str, Any]) -> AdminClient:
    """A confluent-kafka AdminClient built from ``conf`` (copied), logging to
    :data:`LIBRDKAFKA_LOGGER` unless ``conf`` names a ``logger``."""
    return AdminClient(_with_logger(conf))


@contextmanager
def closing_consumer(conf: Mapping[str, Any]) -> Iterator[Consumer]:
    """``with closing_consumer(conf) as consumer:`` a new consumer, closed when the block ends."""
    consumer = new_consumer(conf)
    try:
        yield consumer
    finally:
        consumer.close()
