"""Group offsets saved with a run (JSON lines) and where a group resumes on the
restored topic (examples, and a property test against every restored record)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mm.backup.groups import (
    GroupOffset,
    OffsetRun,
    decode_group_offsets,
    encode_group_offsets,
    group_offsets_key,
    offset_runs,
    resume_offset,
)

pytestmark = pytest.mark.unit


def test_group_offsets_round_trip_sorted():
    rows = [
        GroupOffset("g2", "t", 0, 5, 1),
        GroupOffset("g1", "t.x", 3, 0, 2),
        GroupOffset("g1", "t", 1, 9, 2),
    ]
    data = encode_group_offsets(rows)
    assert (
        data.splitlines()[0] == b'{"group":"g1","topic":"t","partition":1,"offset":9,"time_ms":2}'
    )
    assert decode_group_offsets(data) == sorted(rows, key=lambda g: (g.group, g.topic, g.partition))
    assert decode_group_offsets(b"") == []


def test_bad_group_offsets_name_the_line():
    data = encode_group_offsets([GroupOffset("g", "t", 0, 1, 2)]) + b'{"group": "g"}\n'
    with pytest.raises(ValueError, match="line 2 is not a group offset"):
        decode_group_offsets(data)


def test_key():
    assert group_offsets_key("b/p/", "east", 17) == "b/p/_groups/east/00000000000000000017.jsonl"


def test_runs():
    # originals 10-12 restored at 0-2, 15 at 3 (gap in the source), 16 at 5 (a marker restored at 4)
    runs = offset_runs([(10, 0), (11, 1), (12, 2), (15, 3), (16, 5)])
    assert runs == (OffsetRun(10, 0, 3), OffsetRun(15, 3, 1), OffsetRun(16, 5, 1))
    with pytest.raises(ValueError, match="expected both offsets to increase"):
        offset_runs([(1, 1), (1, 2)])


@pytest.mark.parametrize(
    ("source", "restored"),
    [(0, 0), (10, 0), (11, 1), (12, 2), (13, 3), (14, 3), (15, 3), (16, 5), (17, 6), (99, 6)],
)
def test_resume(source, restored):
    runs = offset_runs([(10, 0), (11, 1), (12, 2), (15, 3), (16, 5)])
    assert resume_offset(runs, source, restored_end=6) == restored


def test_resume_on_an_empty_restore_and_a_bad_end():
    assert resume_offset((), 5, restored_end=0) == 0
    with pytest.raises(ValueError, match="expected it past the last restored offset 2"):
        resume_offset((OffsetRun(0, 0, 3),), 1, restored_end=2)


@st.composite
def restores(draw):
    originals = sorted(draw(st.sets(st.integers(0, 200), max_size=40)))
    restored, at = [], draw(st.integers(0, 5))
    for _ in originals:
        restored.append(at)
        at += 1 + draw(st.integers(0, 2))  # sometimes markers between
    end = at + draw(st.integers(0, 3))
    return list(zip(originals, restored, strict=True)), end


@given(restores(), st.integers(-3, 205))
def test_resume_never_skips_nor_rereads(restore, source):
    pairs, end = restore
    at = resume_offset(offset_runs(pairs), source, end)
    for o, r in pairs:
        # read after resuming exactly when the group had not read it on the source
        assert (r >= at) == (o >= source), (o, r, at)
    assert at <= end
