"""MM2 record formats against hand-written golden bytes, round trips and malformed input.

Every golden byte string below was written from MM2's formats (docs/formats.md) by hand (not
produced by the code under test): STRING = INT16 length + UTF-8, INTn big-endian.
"""

from __future__ import annotations

import pytest
from mm_client.errors import RecordDecodeError
from mm_client.records import Checkpoint, Heartbeat, OffsetSync

pytestmark = pytest.mark.unit

Record = OffsetSync | Checkpoint | Heartbeat
RecordType = type[OffsetSync] | type[Checkpoint] | type[Heartbeat]

# Reused literals (each a hand-encoded big-endian integer).
I32_0 = b"\x00\x00\x00\x00"
I32_3 = b"\x00\x00\x00\x03"
I32_MAX = b"\x7f\xff\xff\xff"
I64_0 = b"\x00\x00\x00\x00\x00\x00\x00\x00"
I64_42 = b"\x00\x00\x00\x00\x00\x00\x00\x2a"
I64_100 = b"\x00\x00\x00\x00\x00\x00\x00\x64"
I64_1203 = b"\x00\x00\x00\x00\x00\x00\x04\xb3"
I64_1500 = b"\x00\x00\x00\x00\x00\x00\x05\xdc"
I64_MAX = b"\x7f\xff\xff\xff\xff\xff\xff\xff"
I64_MINUS_1 = b"\xff\xff\xff\xff\xff\xff\xff\xff"
V0 = b"\x00\x00"
V1 = b"\x00\x01"

# ---------------------------------------------------------------------------
# golden bytes
# ---------------------------------------------------------------------------

GOLDEN: list[tuple[str, Record, bytes, bytes]] = [
    (
        "offset-sync",
        OffsetSync("orders", 3, 100, 42),
        b"\x00\x06orders\x00\x00\x00\x03",
        b"\x00\x00\x00\x00\x00\x00\x00\x64\x00\x00\x00\x00\x00\x00\x00\x2a",
    ),
    (
        "offset-sync-zero",
        OffsetSync("t", 0, 0, 0),
        b"\x00\x01t" + I32_0,
        I64_0 + I64_0,
    ),
    (
        "offset-sync-max",
        OffsetSync("A.orders", 2**31 - 1, 2**63 - 1, 2**63 - 1),
        b"\x00\x08A.orders" + I32_MAX,
        I64_MAX + I64_MAX,
    ),
    (
        "offset-sync-utf8-topic",
        # "é" is U+00E9 -> C3 A9: 3 characters, 4 bytes
        OffsetSync("ébc", 3, 100, 42),
        b"\x00\x04\xc3\xa9bc" + I32_3,
        I64_100 + I64_42,
    ),
    (
        "checkpoint-empty-metadata",
        Checkpoint("my-group", "A.orders", 0, 1500, 1203, ""),
        b"\x00\x08my-group\x00\x08A.orders\x00\x00\x00\x00",
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x05\xdc\x00\x00\x00\x00\x00\x00\x04\xb3\x00\x00",
    ),
    (
        "checkpoint-metadata",
        Checkpoint("g", "A.orders", 3, 100, 42, "meta"),
        b"\x00\x01g\x00\x08A.orders" + I32_3,
        V0 + I64_100 + I64_42 + b"\x00\x04meta",
    ),
    (
        "checkpoint-utf8-metadata",
        # "€" is U+20AC -> E2 82 AC
        Checkpoint("g", "t", 0, 0, 0, "€"),
        b"\x00\x01g\x00\x01t" + I32_0,
        V0 + I64_0 + I64_0 + b"\x00\x03\xe2\x82\xac",
    ),
    (
        "heartbeat",
        Heartbeat("A", "B", 1_700_000_000_000),
        b"\x00\x01A\x00\x01B",
        # 1_700_000_000_000 = 0x018BCFE5_6800
        b"\x00\x00" + b"\x00\x00\x01\x8b\xcf\xe5\x68\x00",
    ),
    (
        "heartbeat-long-aliases",
        Heartbeat("us-west", "us-east", 0),
        b"\x00\x07us-west\x00\x07us-east",
        V0 + I64_0,
    ),
    (
        "heartbeat-negative-timestamp",
        Heartbeat("A", "B", -1),
        b"\x00\x01A\x00\x01B",
        V0 + I64_MINUS_1,
    ),
]
GOLDEN_IDS = [case[0] for case in GOLDEN]


@pytest.mark.parametrize(("name", "record", "key", "value"), GOLDEN, ids=GOLDEN_IDS)
def test_encodes_to_golden_bytes(name: str, record: Record, key: bytes, value: bytes) -> None:
    assert record.key_bytes() == key
    assert record.value_bytes() == value


@pytest.mark.parametrize(("name", "record", "key", "value"), GOLDEN, ids=GOLDEN_IDS)
@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview], ids=lambda w: w.__name__)
def test_decodes_golden_bytes(
    name: str,
    record: Record,
    key: bytes,
    value: bytes,
    wrap: type,
) -> None:
    assert type(record).from_bytes(wrap(key), wrap(value)) == record


def test_decodes_memoryview_slice_of_larger_buffer() -> None:
    # A reader may hand us views into one big fetch buffer; offsets must be relative.
    buf = b"junk" + b"\x00\x06orders\x00\x00\x00\x03" + I64_100 + I64_42 + b"tail"
    view = memoryview(buf)
    got = OffsetSync.from_bytes(view[4:16], view[16:32])
    assert got == OffsetSync("orders", 3, 100, 42)


# ---------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------

ROUND_TRIP = [
    OffsetSync("orders", 0, 0, 0),
    OffsetSync("a" * 32767, 7, 1, 2),
    OffsetSync("日本語.トピック", 12, 10**12, 10**12 - 5),
    OffsetSync("B.A.orders", 2**31 - 1, 2**63 - 1, 0),
    Checkpoint("g", "t", 0, 0, 0),
    Checkpoint("console-x", "A.orders", 5, 1234, 1200, "x" * 32767),
    Checkpoint("grüppe", "A.bestellungen", 1, 2**63 - 1, 2**63 - 1, "ünïcode 🚀"),
    Heartbeat("A", "B", 0),
    Heartbeat("us-west-1", "eu-central-1", 2**63 - 1),
    Heartbeat("src", "tgt", -(2**63)),
]


@pytest.mark.parametrize("record", ROUND_TRIP, ids=lambda r: type(r).__name__)
def test_round_trip(record: Record) -> None:
    again = type(record).from_bytes(record.key_bytes(), record.value_bytes())
    assert again == record
    assert again.key_bytes() == record.key_bytes()
    assert again.value_bytes() == record.value_bytes()


def test_records_are_frozen_hashable_and_slotted() -> None:
    sync = OffsetSync("orders", 3, 100, 42)
    with pytest.raises(AttributeError):
        sync.partition = 4  # type: ignore[misc]
    assert not hasattr(sync, "__dict__")
    assert len({sync, OffsetSync("orders", 3, 100, 42)}) == 1


def test_checkpoint_metadata_defaults_to_empty() -> None:
    assert Checkpoint("g", "t", 0, 1, 1).metadata == ""


def test_heartbeat_now_uses_wall_clock_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.time_ns", lambda: 1_700_000_000_123_456_789)
    assert Heartbeat.now("A", "B") == Heartbeat("A", "B", 1_700_000_000_123)


# ---------------------------------------------------------------------------
# versioned values: forward compatibility
# ---------------------------------------------------------------------------


def test_checkpoint_newer_version_reads_v0_prefix_and_ignores_appended_fields() -> None:
    key = b"\x00\x01g\x00\x01t" + I32_0
    value = V1 + I64_100 + I64_42 + b"\x00\x02md" + b"\x00\x00\x00\x07new-field"
    assert Checkpoint.from_bytes(key, value) == Checkpoint("g", "t", 0, 100, 42, "md")


def test_checkpoint_newer_version_without_extra_fields() -> None:
    key = b"\x00\x01g\x00\x01t" + I32_0
    value = b"\x7f\xff" + I64_100 + I64_42 + b"\x00\x00"
    assert Checkpoint.from_bytes(key, value) == Checkpoint("g", "t", 0, 100, 42, "")


def test_heartbeat_newer_version_ignores_appended_fields() -> None:
    assert Heartbeat.from_bytes(b"\x00\x01A\x00\x01B", V1 + I64_42 + b"\x01\x02\x03") == (
        Heartbeat("A", "B", 42)
    )


def test_reencoding_a_newer_version_writes_v0() -> None:
    key = b"\x00\x01A\x00\x01B"
    decoded = Heartbeat.from_bytes(key, V1 + I64_42 + b"\xff")
    assert decoded.value_bytes() == V0 + I64_42


# ---------------------------------------------------------------------------
# malformed input -> RecordDecodeError naming the record type
# ---------------------------------------------------------------------------

SYNC_KEY = b"\x00\x06orders" + I32_3
SYNC_VALUE = I64_100 + I64_42
CKPT_KEY = b"\x00\x01g\x00\x08A.orders" + I32_3
CKPT_VALUE = V0 + I64_100 + I64_42 + b"\x00\x04meta"
HB_KEY = b"\x00\x01A\x00\x01B"
HB_VALUE = V0 + I64_42

MALFORMED: list[tuple[str, RecordType, bytes | None, bytes | None, str]] = [
    # --- OffsetSync key
    ("sync-null-key", OffsetSync, None, SYNC_VALUE, r"OffsetSync key is null"),
    ("sync-empty-key", OffsetSync, b"", SYNC_VALUE, r"OffsetSync key: truncated"),
    ("sync-half-length", OffsetSync, b"\x00", SYNC_VALUE, r"OffsetSync key: truncated.*topic"),
    (
        "sync-short-topic",
        OffsetSync,
        b"\x00\x06orde",
        SYNC_VALUE,
        r"OffsetSync key: truncated.*topic.*need 6 bytes, 4 left",
    ),
    (
        "sync-no-partition",
        OffsetSync,
        b"\x00\x06orders",
        SYNC_VALUE,
        r"OffsetSync key: truncated.*partition",
    ),
    (
        "sync-short-partition",
        OffsetSync,
        b"\x00\x06orders\x00\x00\x03",
        SYNC_VALUE,
        r"OffsetSync key: truncated.*partition",
    ),
    (
        "sync-key-trailing",
        OffsetSync,
        SYNC_KEY + b"\x00",
        SYNC_VALUE,
        r"OffsetSync key: 1 trailing",
    ),
    (
        "sync-null-string",
        OffsetSync,
        b"\xff\xff" + I32_3,
        SYNC_VALUE,
        r"OffsetSync key: topic has negative length -1.*null",
    ),
    (
        "sync-negative-length",
        OffsetSync,
        b"\x80\x00" + I32_3,
        SYNC_VALUE,
        r"OffsetSync key: topic has negative length -32768",
    ),
    (
        "sync-invalid-utf8",
        OffsetSync,
        b"\x00\x02\xff\xfe" + I32_3,
        SYNC_VALUE,
        r"OffsetSync key: topic is not valid UTF-8",
    ),
    (
        "sync-encoded-surrogate",
        OffsetSync,
        # CESU-style encoded surrogate U+D800 is not valid UTF-8
        b"\x00\x03\xed\xa0\x80" + I32_3,
        SYNC_VALUE,
        r"OffsetSync key: topic is not valid UTF-8",
    ),
    (
        "sync-empty-topic",
        OffsetSync,
        b"\x00\x00" + I32_3,
        SYNC_VALUE,
        r"OffsetSync: .*topic.*empty",
    ),
    (
        "sync-negative-partition",
        OffsetSync,
        b"\x00\x06orders\xff\xff\xff\xff",
        SYNC_VALUE,
        r"OffsetSync: .*partition.*-1",
    ),
    # --- OffsetSync value
    ("sync-null-value", OffsetSync, SYNC_KEY, None, r"OffsetSync value is null"),
    ("sync-empty-value", OffsetSync, SYNC_KEY, b"", r"OffsetSync value: truncated"),
    ("sync-value-15", OffsetSync, SYNC_KEY, SYNC_VALUE[:15], r"OffsetSync value: truncated"),
    ("sync-value-8", OffsetSync, SYNC_KEY, I64_100, r"OffsetSync value: truncated"),
    ("sync-value-17", OffsetSync, SYNC_KEY, SYNC_VALUE + b"\x00", r"OffsetSync value: 1 trailing"),
    (
        "sync-versioned-value",
        # someone wrote a version header into an offset sync: 18 bytes, not 16
        OffsetSync,
        SYNC_KEY,
        V0 + SYNC_VALUE,
        r"OffsetSync value: 2 trailing",
    ),
    (
        "sync-negative-upstream",
        OffsetSync,
        SYNC_KEY,
        I64_MINUS_1 + I64_42,
        r"OffsetSync: .*upstream_offset.*-1",
    ),
    (
        "sync-negative-downstream",
        OffsetSync,
        SYNC_KEY,
        I64_100 + I64_MINUS_1,
        r"OffsetSync: .*downstream_offset.*-1",
    ),
    # --- Checkpoint key
    ("ckpt-null-key", Checkpoint, None, CKPT_VALUE, r"Checkpoint key is null"),
    ("ckpt-empty-key", Checkpoint, b"", CKPT_VALUE, r"Checkpoint key: truncated.*consumer group"),
    (
        "ckpt-no-topic",
        Checkpoint,
        b"\x00\x01g",
        CKPT_VALUE,
        r"Checkpoint key: truncated.*topic length",
    ),
    (
        "ckpt-short-topic",
        Checkpoint,
        b"\x00\x01g\x00\x08A.or",
        CKPT_VALUE,
        r"Checkpoint key: truncated.*topic",
    ),
    (
        "ckpt-no-partition",
        Checkpoint,
        b"\x00\x01g\x00\x08A.orders",
        CKPT_VALUE,
        r"Checkpoint key: truncated.*partition",
    ),
    (
        "ckpt-key-trailing",
        Checkpoint,
        CKPT_KEY + b"\x00\x00",
        CKPT_VALUE,
        r"Checkpoint key: 2 trail",
    ),
    (
        "ckpt-group-null",
        Checkpoint,
        b"\xff\xff\x00\x01t" + I32_0,
        CKPT_VALUE,
        r"Checkpoint key: consumer group has negative length -1",
    ),
    (
        "ckpt-group-invalid-utf8",
        Checkpoint,
        b"\x00\x01\x80\x00\x01t" + I32_0,
        CKPT_VALUE,
        r"Checkpoint key: consumer group is not valid UTF-8",
    ),
    (
        "ckpt-empty-group",
        Checkpoint,
        b"\x00\x00\x00\x01t" + I32_0,
        CKPT_VALUE,
        r"Checkpoint: .*consumer_group.*empty",
    ),
    (
        "ckpt-empty-topic",
        Checkpoint,
        b"\x00\x01g\x00\x00" + I32_0,
        CKPT_VALUE,
        r"Checkpoint: .*topic.*empty",
    ),
    (
        "ckpt-negative-partition",
        Checkpoint,
        b"\x00\x01g\x00\x01t\x80\x00\x00\x00",
        CKPT_VALUE,
        r"Checkpoint: .*partition",
    ),
    # --- Checkpoint value
    ("ckpt-null-value", Checkpoint, CKPT_KEY, None, r"Checkpoint value is null"),
    ("ckpt-empty-value", Checkpoint, CKPT_KEY, b"", r"Checkpoint value: truncated.*version"),
    ("ckpt-half-version", Checkpoint, CKPT_KEY, b"\x00", r"Checkpoint value: truncated.*version"),
    (
        "ckpt-negative-version",
        Checkpoint,
        CKPT_KEY,
        b"\xff\xff" + CKPT_VALUE[2:],
        r"Checkpoint value: invalid negative version -1",
    ),
    (
        "ckpt-only-version",
        Checkpoint,
        CKPT_KEY,
        V0,
        r"Checkpoint value: truncated.*offsets",
    ),
    (
        "ckpt-short-offsets",
        Checkpoint,
        CKPT_KEY,
        V0 + I64_100 + I64_42[:7],
        r"Checkpoint value: truncated.*offsets",
    ),
    (
        "ckpt-no-metadata",
        Checkpoint,
        CKPT_KEY,
        V0 + I64_100 + I64_42,
        r"Checkpoint value: truncated.*metadata length",
    ),
    (
        "ckpt-short-metadata",
        Checkpoint,
        CKPT_KEY,
        V0 + I64_100 + I64_42 + b"\x00\x04me",
        r"Checkpoint value: truncated.*metadata",
    ),
    (
        "ckpt-v0-trailing",
        Checkpoint,
        CKPT_KEY,
        CKPT_VALUE + b"\x00",
        r"Checkpoint value: 1 trailing",
    ),
    (
        "ckpt-null-metadata",
        Checkpoint,
        CKPT_KEY,
        V0 + I64_100 + I64_42 + b"\xff\xff",
        r"Checkpoint value: metadata has negative length -1",
    ),
    (
        "ckpt-metadata-invalid-utf8",
        Checkpoint,
        CKPT_KEY,
        V0 + I64_100 + I64_42 + b"\x00\x01\xc3",
        r"Checkpoint value: metadata is not valid UTF-8",
    ),
    (
        "ckpt-v1-truncated",
        # a newer version still needs all v0 fields
        Checkpoint,
        CKPT_KEY,
        V1 + I64_100 + I64_42,
        r"Checkpoint value: truncated.*metadata",
    ),
    (
        "ckpt-negative-upstream",
        Checkpoint,
        CKPT_KEY,
        V0 + I64_MINUS_1 + I64_42 + b"\x00\x00",
        r"Checkpoint: .*upstream_offset",
    ),
    (
        "ckpt-negative-downstream",
        Checkpoint,
        CKPT_KEY,
        V0 + I64_100 + I64_MINUS_1 + b"\x00\x00",
        r"Checkpoint: .*downstream_offset",
    ),
    # --- Heartbeat key
    ("hb-null-key", Heartbeat, None, HB_VALUE, r"Heartbeat key is null"),
    ("hb-empty-key", Heartbeat, b"", HB_VALUE, r"Heartbeat key: truncated.*source cluster alias"),
    ("hb-no-target", Heartbeat, b"\x00\x01A", HB_VALUE, r"Heartbeat key: truncated.*target"),
    ("hb-short-target", Heartbeat, b"\x00\x01A\x00\x02B", HB_VALUE, r"Heartbeat key: truncated"),
    ("hb-key-trailing", Heartbeat, HB_KEY + b"C", HB_VALUE, r"Heartbeat key: 1 trailing"),
    (
        "hb-null-target",
        Heartbeat,
        b"\x00\x01A\xff\xff",
        HB_VALUE,
        r"Heartbeat key: target cluster alias has negative length -1",
    ),
    (
        "hb-invalid-utf8",
        Heartbeat,
        b"\x00\x01\xfe\x00\x01B",
        HB_VALUE,
        r"Heartbeat key: source cluster alias is not valid UTF-8",
    ),
    ("hb-empty-source", Heartbeat, b"\x00\x00\x00\x01B", HB_VALUE, r"Heartbeat: .*source.*empty"),
    ("hb-empty-target", Heartbeat, b"\x00\x01A\x00\x00", HB_VALUE, r"Heartbeat: .*target.*empty"),
    # --- Heartbeat value
    ("hb-null-value", Heartbeat, HB_KEY, None, r"Heartbeat value is null"),
    ("hb-empty-value", Heartbeat, HB_KEY, b"", r"Heartbeat value: truncated.*version"),
    ("hb-no-timestamp", Heartbeat, HB_KEY, V0, r"Heartbeat value: truncated.*timestamp"),
    ("hb-short-ts", Heartbeat, HB_KEY, V0 + I64_42[:4], r"Heartbeat value: truncated.*timestamp"),
    ("hb-v0-trailing", Heartbeat, HB_KEY, HB_VALUE + b"\x00", r"Heartbeat value: 1 trailing"),
    (
        "hb-negative-version",
        Heartbeat,
        HB_KEY,
        b"\x80\x00" + I64_42,
        r"Heartbeat value: invalid negative version -32768",
    ),
]


@pytest.mark.parametrize(
    ("name", "record_type", "key", "value", "message"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_input_raises_record_decode_error(
    name: str, record_type: RecordType, key: bytes | None, value: bytes | None, message: str
) -> None:
    with pytest.raises(RecordDecodeError, match=message) as info:
        record_type.from_bytes(key, value)
    assert str(info.value).startswith(record_type.__name__)


@pytest.mark.parametrize("record_type", [OffsetSync, Checkpoint, Heartbeat])
def test_every_truncation_of_a_valid_record_is_rejected(record_type: RecordType) -> None:
    samples: dict[RecordType, tuple[bytes, bytes]] = {
        OffsetSync: (SYNC_KEY, SYNC_VALUE),
        Checkpoint: (CKPT_KEY, CKPT_VALUE),
        Heartbeat: (HB_KEY, HB_VALUE),
    }
    key, value = samples[record_type]
    record_type.from_bytes(key, value)  # sanity: the full record decodes
    for cut in range(len(key)):
        with pytest.raises(RecordDecodeError):
            record_type.from_bytes(key[:cut], value)
    for cut in range(len(value)):
        with pytest.raises(RecordDecodeError):
            record_type.from_bytes(key, value[:cut])


# ---------------------------------------------------------------------------
# construction-time validation
# ---------------------------------------------------------------------------

INVALID_CONSTRUCTION: list[tuple[str, object, type[Exception]]] = [
    ("sync-empty-topic", lambda: OffsetSync("", 0, 0, 0), ValueError),
    ("sync-negative-partition", lambda: OffsetSync("t", -1, 0, 0), ValueError),
    ("sync-partition-too-big", lambda: OffsetSync("t", 2**31, 0, 0), ValueError),
    ("sync-negative-upstream", lambda: OffsetSync("t", 0, -1, 0), ValueError),
    ("sync-negative-downstream", lambda: OffsetSync("t", 0, 0, -1), ValueError),
    ("sync-offset-too-big", lambda: OffsetSync("t", 0, 2**63, 0), ValueError),
    ("sync-topic-too-long", lambda: OffsetSync("a" * 32768, 0, 0, 0), ValueError),
    # 16384 two-byte characters = 32768 UTF-8 bytes, one over the limit
    ("sync-topic-too-long-utf8", lambda: OffsetSync("é" * 16384, 0, 0, 0), ValueError),
    ("sync-lone-surrogate", lambda: OffsetSync("\ud800", 0, 0, 0), ValueError),
    ("sync-topic-not-str", lambda: OffsetSync(b"t", 0, 0, 0), TypeError),  # type: ignore[arg-type]
    ("sync-partition-bool", lambda: OffsetSync("t", True, 0, 0), TypeError),
    ("sync-offset-float", lambda: OffsetSync("t", 0, 1.0, 0), TypeError),  # type: ignore[arg-type]
    ("ckpt-empty-group", lambda: Checkpoint("", "t", 0, 0, 0), ValueError),
    ("ckpt-empty-topic", lambda: Checkpoint("g", "", 0, 0, 0), ValueError),
    ("ckpt-negative-partition", lambda: Checkpoint("g", "t", -1, 0, 0), ValueError),
    ("ckpt-negative-upstream", lambda: Checkpoint("g", "t", 0, -1, 0), ValueError),
    ("ckpt-negative-downstream", lambda: Checkpoint("g", "t", 0, 0, -1), ValueError),
    ("ckpt-metadata-too-long", lambda: Checkpoint("g", "t", 0, 0, 0, "m" * 32768), ValueError),
    ("ckpt-metadata-none", lambda: Checkpoint("g", "t", 0, 0, 0, None), TypeError),  # type: ignore[arg-type]
    ("hb-empty-source", lambda: Heartbeat("", "B", 0), ValueError),
    ("hb-empty-target", lambda: Heartbeat("A", "", 0), ValueError),
    ("hb-timestamp-too-big", lambda: Heartbeat("A", "B", 2**63), ValueError),
    ("hb-timestamp-too-small", lambda: Heartbeat("A", "B", -(2**63) - 1), ValueError),
]


@pytest.mark.parametrize(
    ("name", "build", "error"), INVALID_CONSTRUCTION, ids=[c[0] for c in INVALID_CONSTRUCTION]
)
def test_invalid_construction_is_rejected(name: str, build: object, error: type[Exception]) -> None:
    assert callable(build)
    with pytest.raises(error):
        build()
