"""Per-record digests and compact digest sequences (pure; no I/O).

A record's digest covers what a mirror must preserve: key, value, headers (in
order, duplicates kept, null and empty values told apart) and timestamp. Each
field is length-prefixed, so no two different records share an encoding.
Digests are computed where the records are read (a Spark Python task), and only
``(offset, digest)`` pairs travel: 8 + 16 bytes per record.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from hashlib import blake2b

DIGEST_SIZE = 16

_NULL = struct.pack(">i", -1)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

Header = tuple[str, bytes | None]


def _nullable(data: bytes | None) -> bytes:
    return _NULL if data is None else _I32.pack(len(data)) + data


def record_digest(
    key: bytes | None, value: bytes | None, headers: Sequence[Header], timestamp: int
) -> bytes:
    """The 16-byte digest of one record's key, value, headers and timestamp."""
    h = blake2b(digest_size=DIGEST_SIZE)
    h.update(_nullable(key))
    h.update(_nullable(value))
    h.update(_I32.pack(len(headers)))
    for name, hv in headers:
        h.update(_nullable(name.encode()))
        h.update(_nullable(hv))
    h.update(_I64.pack(timestamp))
    return h.digest()


def differing_fields(
    a: tuple[bytes | None, bytes | None, Sequence[Header], int],
    b: tuple[bytes | None, bytes | None, Sequence[Header], int],
) -> list[str]:
    """Which of key, value, headers, timestamp differ between two records."""
    names = ("key", "value", "headers", "timestamp")
    return [n for n, x, y in zip(names, a, b, strict=True) if list_or(x) != list_or(y)]


def list_or(x: object) -> object:
    # headers may come as a tuple or a list of pairs: compare them as lists
    return list(x) if isinstance(x, tuple | list) else x


@dataclass
class DigestSeq:
    """Records of one partition (or range) in offset order: offsets and digests.

    Offsets are kept in an ``array('q')`` and digests concatenated in one bytes
    object, so a million records take 24 MB, not a million Python objects.
    """

    offsets: array[int] = field(default_factory=lambda: array("q"))
    digests: bytearray = field(default_factory=bytearray)

    @classmethod
    def of(cls, records: Iterable[tuple[int, bytes]]) -> DigestSeq:
        seq = cls()
        for offset, digest in records:
            seq.append(offset, digest)
        return seq

    def append(self, offset: int, digest: bytes) -> None:
        if len(digest) != DIGEST_SIZE:
            raise ValueError(f"a digest is {DIGEST_SIZE} bytes, got {len(digest)}")
        if self.offsets and offset <= self.offsets[-1]:
            raise ValueError(f"offsets must increase: {offset} after {self.offsets[-1]}")
        self.offsets.append(offset)
        self.digests += digest

    def extend(self, other: DigestSeq) -> None:
        if other.offsets and self.offsets and other.offsets[0] <= self.offsets[-1]:
            raise ValueError(f"offsets must increase: {other.offsets[0]} after {self.offsets[-1]}")
        self.offsets.extend(other.offsets)
        self.digests += other.digests

    def __len__(self) -> int:
        return len(self.offsets)

    def offset(self, i: int) -> int:
        return self.offsets[i]

    def digest(self, i: int) -> bytes:
        return bytes(self.digests[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE])

    def index_of(self, offset: int) -> int | None:
        """Index of the record at ``offset``, None when there is none."""
        i = bisect_left(self.offsets, offset)
        return i if i < len(self.offsets) and self.offsets[i] == offset else None

    def first_at_or_after(self, offset: int) -> int:
        """Index of the first record at or after ``offset`` (``len`` when none)."""
        return bisect_left(self.offsets, offset)

    def slice(self, start: int, stop: int | None = None) -> DigestSeq:
        stop = len(self) if stop is None else stop
        return DigestSeq(
            self.offsets[start:stop],
            self.digests[start * DIGEST_SIZE : stop * DIGEST_SIZE],
        )

    def find(self, digest: bytes, start: int = 0) -> int | None:
        """Index of the first record at or after ``start`` with ``digest``."""
        pos = start * DIGEST_SIZE
        while True:
            pos = self.digests.find(digest, pos)
            if pos < 0:
                return None
            if pos % DIGEST_SIZE == 0:
                return pos // DIGEST_SIZE
            pos += 1  # a match across two digests: keep looking


def split_ranges(start: int, end: int, size: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into consecutive ranges of at most ``size`` offsets."""
    if size <= 0:
        raise ValueError(f"range size must be positive, got {size}")
    return [(s, min(s + size, end)) for s in range(start, end, size)]
