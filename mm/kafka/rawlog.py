"""A raw log reader: a partition's batches as stored, and Kafka's read_committed rule.

Why a raw log reader
--------------------
A ``read_committed`` consumer relies on the broker to list the aborted
transactions of each fetched range (FetchResponse ``aborted_transactions``).
Apache Kafka does; some Kafka-compatible brokers never list them (the embedded
broker, see :mod:`mm.kafka.profile`): records of an aborted transaction that
reached the broker before the abort (an explicit abort after a flush, or the
implicit abort when ``init_transactions`` fences a killed producer) are served to
``read_committed`` consumers as if committed. Measured on the embedded broker:

    begin; produce x; flush; abort  ->  read_committed still returns x

So on such a broker the target seen through a consumer shows every record of
every transaction a killed mirror left open. :func:`read_log` fetches the partition
``read_uncommitted`` with its control batches (transaction markers) and
:func:`committed_view` applies Kafka's read_committed rule itself: a
transactional batch is visible when the next marker of its producer id is a
COMMIT. That is the partition as Apache Kafka would serve it, on any broker.

Reading
-------
Fetch v4 (non-flexible; kept by Apache Kafka 4.x, KIP-896 drops only v0-3) over a
plain TCP connection to the partition's leader, record batches parsed by
kafka-python. Fetches are paged (``page_bytes`` per request), so a large
partition is never requested at once. :func:`read_log` keeps every batch (small
partitions, tests); :func:`scan_committed` streams the committed records of an
offset range and holds only the batches of transactions still waiting for their
marker. Only PLAINTEXT listeners are supported (no TLS, no SASL).
"""

from __future__ import annotations

import socket
import struct
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mm.errors import KafkaOperationError

_FETCH = 1
_FETCH_VERSION = 4
_READ_UNCOMMITTED = 0
# Fetch error codes worth a sentence of their own
_OFFSET_OUT_OF_RANGE = 1
_UNKNOWN_TOPIC_OR_PARTITION = 3
_NOT_LEADER = 6

DEFAULT_PAGE_BYTES = 4 << 20

Headers = tuple[tuple[str, bytes | None], ...]


class RawLogError(KafkaOperationError):
    """A fetch failed or the log could not be read to the requested end (``code``:
    the Kafka error's name, when a Kafka error was the cause)."""


class LogRecord(NamedTuple):
    """One data record as stored: what a mirror must preserve, with its offset."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int = -1
    # as a consumer reports it: 1 = CreateTime, 2 = LogAppendTime (-1: not known)
    timestamp_type: int = -1


@dataclass(frozen=True)
class LogBatch:
    """One record batch as stored, control batches (markers) included."""

    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool
    # for a control batch: True = ABORT marker, False = COMMIT marker
    abort: bool
    records: tuple[LogRecord, ...]
    # the producer's epoch (-1: unknown); a marker ends only its epoch's transaction
    producer_epoch: int = -1


@dataclass
class PartitionLog:
    batches: list[LogBatch]
    high_watermark: int
    last_stable_offset: int
    # what the broker reported in FetchResponse.aborted_transactions (some: nothing)
    broker_aborted: list[tuple[int, int]]


class Connection:
    """One TCP connection to a broker speaking the Kafka protocol (request/response)."""

    def __init__(self, address: str, timeout: float, client_id: str = "mm-raw-log") -> None:
        host, _, port = address.split(",")[0].strip().rpartition(":")
        self.address = f"{host}:{port}"
        self.timeout = timeout
        try:
            # the timeout bounds every later send and receive too: a broker that
            # restarts or freezes mid-request never leaves a read waiting forever
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        except OSError as exc:
            raise RawLogError(f"{self.address}: could not connect: {_cause(exc)}") from None
        self.correlation = 0
        self.client_id = client_id.encode()

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        """Sends one request and returns its response (after the correlation id); a
        broker that does not answer within the connection's timeout, or drops it, is a
        RawLogError naming the broker and the request."""
        self.correlation += 1
        cid = self.client_id
        header = struct.pack(">hhih", api_key, version, self.correlation, len(cid)) + cid
        msg = header + body
        try:
            self.sock.sendall(struct.pack(">i", len(msg)) + msg)
            (size,) = struct.unpack(">i", self._read(4))
            data = self._read(size)
        except TimeoutError:
            raise RawLogError(
                f"{self.address}: no answer to request {api_key} (v{version}) within "
                f"{self.timeout:g}s: the broker is frozen, restarting or overloaded"
            ) from None
        except OSError as exc:
            raise RawLogError(
                f"{self.address}: request {api_key} (v{version}) failed: {_cause(exc)}"
            ) from None
        (corr,) = struct.unpack(">i", data[:4])
        if corr != self.correlation:
            raise RawLogError(
                f"{self.address}: response correlation id {corr}, expected {self.correlation}"
            )
        return data[4:]

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise RawLogError(f"{self.address}: broker closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _cause(exc: OSError) -> str:
    """An OSError as a short cause (``connection refused``, ``timed out``, ...)."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    return exc.strerror.lower() if exc.strerror else type(exc).__name__


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out[0] if len(out) == 1 else out

    def string(self) -> str:
        n = self.take(">h")
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def bytes_(self) -> bytes:
        n = self.take(">i")
        if n < 0:
            return b""
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b


class FetchResult(NamedTuple):
    error: int
    high_watermark: int
    last_stable_offset: int
    aborted: list[tuple[int, int]]
    records: bytes


def fetch(
    conn: Connection,
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int,
    wait_ms: int = 100,
) -> FetchResult:
    """One Fetch v4 (read_uncommitted) of ``topic[partition]`` from ``offset``.

    Returns error -1 when the broker answered with no topic at all (the embedded
    broker does that for ``max_wait_ms`` 0).
    """
    t = topic.encode()
    body = struct.pack(">iiiib", -1, wait_ms, 1, max_bytes, _READ_UNCOMMITTED)
    body += struct.pack(">ih", 1, len(t)) + t
    body += struct.pack(">iiqi", 1, partition, offset, max_bytes)
    r = _Reader(conn.request(_FETCH, _FETCH_VERSION, body))
    r.take(">i")  # throttle
    if r.take(">i") != 1:
        return FetchResult(-1, -1, -1, [], b"")
    r.string()
    parts = r.take(">i")
    if parts != 1:
        raise RawLogError(f"fetch {topic}[{partition}]: {parts} partitions in the answer")
    r.take(">i")  # partition
    error, hw, lso = r.take(">hqq")
    n_aborted = r.take(">i")
    aborted = [r.take(">qq") for _ in range(max(0, n_aborted))]
    return FetchResult(error, hw, lso, aborted, r.bytes_())


def _error_text(topic: str, partition: int, offset: int, error: int, address: str) -> str:
    what = {
        _OFFSET_OUT_OF_RANGE: "offset out of range (below the log start or past the end)",
        _UNKNOWN_TOPIC_OR_PARTITION: "unknown topic or partition",
        _NOT_LEADER: f"{address} is not the partition's leader",
    }.get(error, f"error code {error}")
    return f"fetch {topic}[{partition}]@{offset} from {address}: {what}"


def iter_batches(
    conn: Connection,
    topic: str,
    partition: int,
    start: int = 0,
    *,
    page_bytes: int = DEFAULT_PAGE_BYTES,
    timeout: float = 60.0,
    stats: dict[str, Any] | None = None,
    offsets_only: bool = False,
) -> Iterator[LogBatch]:
    """Every batch from the one holding ``start`` up to the high watermark, page by page.

    Records below ``start`` are left out of the first batch. ``stats`` (optional)
    receives the latest ``high_watermark``, ``last_stable_offset`` and the
    ``broker_aborted`` list. With ``offsets_only``, a data batch with no hole in its
    offsets (not compacted) is not decoded: its records carry their offset only (no
    key, value, headers nor timestamp), which is what a reader deciding *which*
    offsets are committed needs, at a fraction of the cost.
    """
    from kafka.record.memory_records import MemoryRecords

    deadline = time.monotonic() + timeout
    offset = start
    while True:
        res = fetch(conn, topic, partition, offset, page_bytes)
        if res.error:
            raise RawLogError(_error_text(topic, partition, offset, res.error, conn.address))
        if stats is not None:
            stats["high_watermark"] = res.high_watermark
            stats["last_stable_offset"] = res.last_stable_offset
            stats.setdefault("broker_aborted", []).extend(tuple(a) for a in res.aborted)
        records = MemoryRecords(res.records)
        progressed = False
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break
            if batch.last_offset < offset:
                continue
            control = bool(getattr(batch, "is_control_batch", False))
            abort = False
            recs: tuple[LogRecord, ...] = ()
            if control:
                # one control record: ABORT (type 0) or COMMIT (type 1)
                items = list(batch)
                abort = bool(items) and bool(items[0].abort)
            elif (
                offsets_only and getattr(batch, "records_count", -1) == batch.last_offset_delta + 1
            ):
                recs = tuple(
                    LogRecord(o, None, None, (), -1, -1)
                    for o in range(max(batch.base_offset, offset), batch.last_offset + 1)
                )
            else:
                items = list(batch)
                recs = tuple(
                    LogRecord(
                        r.offset,
                        r.key,
                        r.value,
                        tuple(getattr(r, "headers", None) or ()),
                        r.timestamp if r.timestamp is not None else -1,
                        # the batch attribute (0 = CreateTime) plus one, as consumers number it
                        int(getattr(batch, "timestamp_type", -2)) + 1,
                    )
                    for r in items
                    if r.offset >= offset
                )
            yield LogBatch(
                batch.base_offset,
                batch.last_offset,
                getattr(batch, "producer_id", -1),
                bool(getattr(batch, "is_transactional", False)),
                control,
                abort,
                recs,
                int(getattr(batch, "producer_epoch", -1)),
            )
            offset = batch.last_offset + 1
            progressed = True
            deadline = time.monotonic() + timeout
        if offset >= res.high_watermark:
            return
        if not progressed and time.monotonic() > deadline:
            raise RawLogError(
                f"{topic}[{partition}]: stuck at offset {offset} below high watermark "
                f"{res.high_watermark} for {timeout:.0f}s (a batch larger than "
                f"{page_bytes} bytes?)"
            )


def read_log(
    bootstrap: str,
    topic: str,
    partition: int,
    timeout: float = 60.0,
    *,
    page_bytes: int = 8 << 20,
) -> PartitionLog:
    """Every batch of ``topic[partition]`` up to the high watermark, markers included.

    ``bootstrap``: the partition leader's ``host:port`` (a one-broker cluster's
    bootstrap address will do).
    """
    stats: dict[str, Any] = {}
    with Connection(bootstrap, timeout) as conn:
        batches = list(
            iter_batches(
                conn, topic, partition, page_bytes=page_bytes, timeout=timeout, stats=stats
            )
        )
    return PartitionLog(
        batches,
        stats.get("high_watermark", 0),
        stats.get("last_stable_offset", 0),
        stats.get("broker_aborted", []),
    )


@dataclass
class CommittedView:
    """A partition as Kafka's read_committed isolation serves it, worked out from markers."""

    records: list[LogRecord]
    committed_txns: int = 0
    aborted_txns: int = 0
    aborted_records: int = 0
    # transactional records with no marker yet (an open transaction)
    open_records: int = 0
    # (first, last) offsets of every aborted transaction's data batches
    aborted_spans: list[tuple[int, int]] = field(default_factory=list)
    # transactions a later epoch of their producer id wrote past with no marker
    # between ("pid<id>e<epoch> <first>-<last>"): Apache Kafka aborts a fenced
    # epoch's transaction (and rejects its late batches) before the new epoch can
    # write, so only a non-conforming broker leaves these
    overtaken: list[str] = field(default_factory=list)


def committed_view(log: PartitionLog) -> CommittedView:
    """Apply read_committed to a raw log: keep non-transactional records and those of
    transactions whose marker is COMMIT; drop aborted and still-open ones."""
    view = CommittedView([])
    # producer id -> data batches waiting for their marker
    pending: dict[int, list[LogBatch]] = {}
    visible: list[LogBatch] = []

    def aborted(waiting: list[LogBatch]) -> None:
        if waiting:
            view.aborted_txns += 1
            view.aborted_spans.append((waiting[0].base_offset, waiting[-1].last_offset))
        view.aborted_records += sum(len(w.records) for w in waiting)

    for b in log.batches:
        if b.control:
            waiting, later = _ended_by(pending.pop(b.producer_id, []), b.producer_epoch)
            if later:
                pending[b.producer_id] = later
            if b.abort:
                aborted(waiting)
            else:
                if waiting:
                    view.committed_txns += 1
                visible += waiting
        elif b.transactional:
            fenced, kept = _fenced_by(pending.pop(b.producer_id, []), b.producer_epoch)
            aborted(fenced)
            if fenced:
                view.overtaken.append(
                    f"pid{b.producer_id}e{fenced[0].producer_epoch} "
                    f"{fenced[0].base_offset}-{fenced[-1].last_offset}"
                )
            pending[b.producer_id] = [*kept, b]
        else:
            visible.append(b)
    view.open_records = sum(len(w.records) for ws in pending.values() for w in ws)
    visible.sort(key=lambda b: b.base_offset)
    view.records = [r for b in visible for r in b.records]
    return view


def _ended_by(waiting: list[Any], marker_epoch: int) -> tuple[list[Any], list[Any]]:
    """(batches a marker of ``marker_epoch`` ends, batches of a later epoch it does not).

    ``waiting``: a producer id's data batches (or ``[batch, state]`` slots) with no
    marker yet. Epoch -1 (unknown) ends them all, as before epochs were read.
    """
    if marker_epoch < 0:
        return waiting, []
    ends = [w for w in waiting if _epoch(w) <= marker_epoch]
    return ends, [w for w in waiting if _epoch(w) > marker_epoch]


def _fenced_by(waiting: list[Any], epoch: int) -> tuple[list[Any], list[Any]]:
    """(batches a data batch of a newer ``epoch`` proves abandoned, the others).

    A transactional producer's epoch grows when ``init_transactions`` fences the
    previous holder of its ``transactional.id``: the old epoch's open transaction
    can never be committed. Apache Kafka's coordinator writes an ABORT marker for it;
    brokers that leave it out (the embedded one) would otherwise let the new epoch's
    COMMIT count the fenced writer's records too.
    """
    if epoch < 0:
        return [], waiting
    older = [w for w in waiting if 0 <= _epoch(w) < epoch]
    return older, [w for w in waiting if not 0 <= _epoch(w) < epoch]


def _epoch(w: Any) -> int:
    batch = w[0] if isinstance(w, list) else w
    return int(batch.producer_epoch)


@dataclass
class ScanStats:
    """What :func:`scan_committed` saw besides the committed records it yielded."""

    committed_txns: int = 0
    aborted_txns: int = 0
    aborted_records: int = 0
    open_records: int = 0
    # how far the scan read (past ``end`` when a transaction's marker lay beyond it)
    read_to: int = 0
    high_watermark: int = -1
    broker_aborted: list[tuple[int, int]] = field(default_factory=list)
    # a read_committed consumer's view (mm.kafka.committed), which sees no marker:
    # offsets of the range with no committed record (markers, aborted records), and
    # offsets past the last stable offset (an open transaction holds them)
    gap_offsets: int = 0
    open_offsets: int = 0


def _resolve(slots: list[list[Any]], abort: bool, stats: ScanStats, end: int) -> None:
    """Mark the slots of one transaction visible (committed) or not (aborted)."""
    if slots:
        if abort:
            stats.aborted_txns += 1
            stats.aborted_records += sum(len(_slot_records(s[0], end)) for s in slots)
        else:
            stats.committed_txns += 1
    for s in slots:
        s[1] = not abort


def _slot_records(batch: LogBatch, end: int) -> list[LogRecord]:
    return [r for r in batch.records if r.offset < end]


def scan_committed(
    conn: Connection,
    topic: str,
    partition: int,
    start: int,
    end: int,
    stats: ScanStats,
    *,
    page_bytes: int = DEFAULT_PAGE_BYTES,
    timeout: float = 60.0,
    offsets_only: bool = False,
) -> Iterator[LogRecord]:
    """The committed records of ``topic[partition]`` with ``start <= offset < end``, in
    offset order, by the same rule as :func:`committed_view` (with ``offsets_only``,
    most records carry their offset only: see :func:`iter_batches`).

    Streams: only batches of the range whose transaction has no marker yet are
    held. Reads past ``end`` only as far as needed to find those markers; records
    whose transaction has no marker up to the high watermark are open (not
    visible, counted in ``stats.open_records``).
    """
    # batches of the range in offset order: [batch, state] with state
    # None = waiting for its marker, True = visible, False = aborted
    queue: deque[list[Any]] = deque()
    waiting: dict[int, list[list[Any]]] = {}
    fetched: dict[str, Any] = {}

    def drain() -> Iterator[LogRecord]:
        while queue and queue[0][1] is not None:
            batch, visible = queue.popleft()
            if visible:
                yield from _slot_records(batch, end)

    for b in iter_batches(
        conn,
        topic,
        partition,
        start,
        page_bytes=page_bytes,
        timeout=timeout,
        stats=fetched,
        offsets_only=offsets_only,
    ):
        stats.read_to = b.last_offset + 1
        if b.control:
            slots, later = _ended_by(waiting.pop(b.producer_id, []), b.producer_epoch)
            if later:
                waiting[b.producer_id] = later
            _resolve(slots, b.abort, stats, end)
            yield from drain()
        else:
            if b.transactional and b.producer_id in waiting:
                # also past ``end``: a newer epoch's data proves older ones abandoned
                fenced, kept = _fenced_by(waiting.pop(b.producer_id), b.producer_epoch)
                _resolve(fenced, True, stats, end)
                if kept:
                    waiting[b.producer_id] = kept
            if b.base_offset < end:
                slot: list[Any] = [b, None if b.transactional else True]
                queue.append(slot)
                if b.transactional:
                    waiting.setdefault(b.producer_id, []).append(slot)
            yield from drain()
        if b.last_offset + 1 >= end and not waiting:
            break
    stats.high_watermark = fetched.get("high_watermark", -1)
    stats.broker_aborted = list(fetched.get("broker_aborted", []))
    # no marker up to the high watermark: an open transaction, invisible to read_committed
    for slots in waiting.values():
        for s in slots:
            stats.open_records += len(_slot_records(s[0], end))
            s[1] = False
    yield from drain()
