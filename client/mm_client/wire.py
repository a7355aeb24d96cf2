"""Kafka protocol primitives (big-endian) used by MirrorMaker 2's internal records.

Only what the MM2 record formats need: ``INT16``, ``INT32``, ``INT64`` and the
non-nullable ``STRING`` (INT16 length, then that many UTF-8 bytes).

Invariants:

* encoders never produce bytes a decoder here would reject; out-of-range input
  raises :class:`ValueError` (never :class:`struct.error`);
* :class:`WireReader` never reads past its buffer and never returns partial
  values: any truncation, negative/null string length or invalid UTF-8 raises
  :class:`~mm_client.errors.RecordDecodeError` naming what was being decoded;
* :meth:`WireReader.expect_end` turns leftover bytes into the same error, so a
  caller that calls it accepts exactly one encoding per value.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from mm_client.errors import RecordDecodeError

__all__ = [
    "INT16",
    "INT16_MAX",
    "INT16_MIN",
    "INT32",
    "INT32_MAX",
    "INT32_MIN",
    "INT64",
    "INT64_MAX",
    "INT64_MIN",
    "STRING_MAX_BYTES",
    "Buffer",
    "WireReader",
    "encode_int16",
    "encode_int32",
    "encode_int64",
    "encode_string",
]

# bytes-like inputs a reader accepts (collections.abc.Buffer needs Python 3.12).
Buffer = bytes | bytearray | memoryview

# Precompiled once: struct.Struct avoids re-parsing the format on every call.
INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")

INT16_MIN: Final = -(2**15)
INT16_MAX: Final = 2**15 - 1
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

# The STRING length prefix is a signed INT16, so this is the longest encodable body.
STRING_MAX_BYTES: Final = INT16_MAX


def _pack(codec: struct.Struct, value: int, kind: str) -> bytes:
    try:
        return codec.pack(value)
    except struct.error as exc:
        raise ValueError(f"{value!r} does not fit in {kind}") from exc


def encode_int16(value: int) -> bytes:
    """Two bytes, big-endian two's complement; ValueError if out of range."""
    return _pack(INT16, value, "INT16")


def encode_int32(value: int) -> bytes:
    """Four bytes, big-endian two's complement; ValueError if out of range."""
    return _pack(INT32, value, "INT32")


def encode_int64(value: int) -> bytes:
    """Eight bytes, big-endian two's complement; ValueError if out of range."""
    return _pack(INT64, value, "INT64")


def encode_string(value: str) -> bytes:
    """INT16 byte length, then the UTF-8 bytes.

    Raises ValueError if the text is not encodable as UTF-8 (lone surrogates) or
    its encoding is longer than :data:`STRING_MAX_BYTES`. Null is not representable.
    """
    body = value.encode("utf-8")
    if len(body) > STRING_MAX_BYTES:
        raise ValueError(
            f"string of {len(body)} UTF-8 bytes exceeds the STRING limit of {STRING_MAX_BYTES}"
        )
    return INT16.pack(len(body)) + body


class WireReader:
    """Sequential big-endian reader over one record key or value.

    ``what`` (e.g. ``"Checkpoint value"``) prefixes every error message so a reader
    of logs knows which record type and which half of it was malformed. The reader
    keeps a zero-copy memoryview; it does not copy the input except for string
    bodies, which are decoded straight from the view.
    """

    __slots__ = ("_end", "_pos", "_view", "what")

    def __init__(self, data: Buffer, what: str) -> None:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            # struct and str() want flat unsigned bytes; cast handles e.g. 'b' or 'c' views
            view = view.cast("B")
        self._view = view
        self._pos = 0
        self._end = len(view)
        self.what = what

    @property
    def position(self) -> int:
        """Number of bytes consumed so far."""
        return self._pos

    @property
    def remaining(self) -> int:
        """Number of bytes not yet consumed."""
        return self._end - self._pos

    def _need(self, size: int, field: str) -> int:
        pos = self._pos
        if self._end - pos < size:
            raise RecordDecodeError(
                f"{self.what}: truncated reading {field} at byte {pos}: "
                f"need {size} bytes, {self._end - pos} left"
            )
        self._pos = pos + size
        return pos

    def read_struct(self, codec: struct.Struct, field: str = "fields") -> tuple[Any, ...]:
        """Read one fixed-size struct (several fields at once, for speed)."""
        return codec.unpack_from(self._view, self._need(codec.size, field))

    def read_int16(self, field: str = "INT16") -> int:
        value: int = INT16.unpack_from(self._view, self._need(2, field))[0]
        return value

    def read_int32(self, field: str = "INT32") -> int:
        value: int = INT32.unpack_from(self._view, self._need(4, field))[0]
        return value

    def read_int64(self, field: str = "INT64") -> int:
        value: int = INT64.unpack_from(self._view, self._need(8, field))[0]
        return value

    def read_string(self, field: str = "STRING") -> str:
        """Read a non-nullable STRING; negative length (incl. -1 = null) is an error."""
        start = self._pos
        length = self.read_int16(f"{field} length")
        if length < 0:
            raise RecordDecodeError(
                f"{self.what}: {field} has negative length {length} at byte {start}"
                + (" (null is not allowed)" if length == -1 else "")
            )
        body_at = self._need(length, field)
        try:
            return str(self._view[body_at : body_at + length], "utf-8")
        except UnicodeDecodeError as exc:
            raise RecordDecodeError(
                f"{self.what}: {field} is not valid UTF-8 (string body at byte {body_at}: "
                f"{exc.reason} at +{exc.start})"
            ) from exc

    def skip_rest(self) -> None:
        """Consume everything left (used for fields a newer schema version appended)."""
        self._pos = self._end

    def expect_end(self) -> None:
        """Raise if any byte is left: MM2 records have no padding or framing."""
        extra = self._end - self._pos
        if extra:
            raise RecordDecodeError(
                f"{self.what}: {extra} trailing byte(s) after the last field (at byte {self._pos})"
            )
