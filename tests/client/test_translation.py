"""Exact offset translation (mm_client.translation): a group at source offset U gets the
target offset of the first mirrored record at or after U (docs/offset-syncs.md).

For a committed upstream offset U the exact translation is the smallest
downstream offset d of a mirrored record with u >= U, or, if none, one past the
last mirrored record with u < U. The hand-written table checks concrete layouts;
the simulation mirrors random source layouts (offset gaps from transaction
markers, aborted records, compaction) in random batches (one transaction each on
the target), collects the syncs RunTracker chooses, and checks every U.

One case admits an equivalent answer: U in a source gap between two runs whose
upstream and downstream distances happen to be equal (typically: a source
transaction marker between two batches, mirrored with a target marker between
them). translate_offset then lands on a target offset that holds no record (the
marker), and a consumer starting there reads exactly what it would read from the
exact offset. There the test checks that contract instead of equality.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from mm_client.translation import translate_offset

from mm.source.runs import RunTracker

pytestmark = pytest.mark.unit

Sync = tuple[int, int]

SEEDS = range(300)


def _translate(syncs: Sequence[Sync], upstream: int) -> int | None:
    """Syncs of one mm writer whose transaction boundaries are not told (the pairs alone)."""
    return translate_offset(
        [u for u, _ in syncs], [d for _, d in syncs], upstream, writers=["t"] * len(syncs)
    )


def _mm2_reader(syncs: Sequence[Sync], upstream: int) -> int | None:
    """MM2's rule: latest sync s with s.upstream <= U; s.downstream if equal, else +1."""
    i = bisect_right([u for u, _ in syncs], upstream) - 1
    if i < 0:
        return None
    su, sd = syncs[i]
    return sd if su == upstream else sd + 1


# ---------------------------------------------------------------------------
# Hand-written table. Layouts (u = upstream offset, d = downstream offset):
#
# ONE_RUN    one batch, u 10..19 -> d 100..109
# GAP_IN_BATCH   one batch, u 10,11,12 | aborted 13..15 | 16,17 -> d 100..104
# MARKERS    batch u 0..4 -> d 0..4, source marker u 5, target marker d 5,
#            batch u 6..9 -> d 6..9  (equal distances: the equivalent case at U=5)
# NO_SRC_GAP batch u 0..4 -> d 0..4, target marker d 5, batch u 5..9 -> d 6..10
# NO_TGT_MARKER  batch u 0..4 -> d 0..4, source gap u 5,6, no stored target
#            marker, batch u 7..9 -> d 5..7
# SINGLES    batch u 3 | gap 4..7 | 8, 9 -> d 50, 51, 52
# LONG_GAPS  batch u 0..2 -> d 0..2, source aborted txn u 3..12 + marker 13,
#            target marker d 3, batch u 14..15 -> d 4..5, source marker 16,
#            no records at d 6, 7 (marker, aborted attempt), batch u 17 -> d 8
# ---------------------------------------------------------------------------
ONE_RUN = [(10, 100), (19, 109)]
GAP_IN_BATCH = [(10, 100), (12, 102), (16, 103), (17, 104)]
MARKERS = [(0, 0), (4, 4), (6, 6), (9, 9)]
NO_SRC_GAP = [(0, 0), (4, 4), (5, 6), (9, 10)]
NO_TGT_MARKER = [(0, 0), (4, 4), (7, 5), (9, 7)]
SINGLES = [(3, 50), (8, 51), (9, 52)]
LONG_GAPS = [(0, 0), (2, 2), (14, 4), (15, 5), (17, 8)]

# (name, syncs, U, expected translation)
TABLE: list[tuple[str, list[Sync], int, int | None]] = [
    ("no syncs", [], 0, None),
    ("no syncs, any U", [], 1000, None),
    ("one sync, below", [(5, 7)], 4, None),
    ("one sync, at", [(5, 7)], 5, 7),
    ("one sync, one past", [(5, 7)], 6, 8),
    ("one sync, far past", [(5, 7)], 100, 8),
    ("one run, below oldest sync", ONE_RUN, 9, None),
    ("one run, first record", ONE_RUN, 10, 100),
    ("one run, inside", ONE_RUN, 15, 105),
    ("one run, last record", ONE_RUN, 19, 109),
    ("one run, one past the end", ONE_RUN, 20, 110),
    ("one run, beyond what is mirrored", ONE_RUN, 25, 110),
    ("gap in batch, inside first run", GAP_IN_BATCH, 11, 101),
    ("gap in batch, end of first run", GAP_IN_BATCH, 12, 102),
    ("gap in batch, first aborted offset", GAP_IN_BATCH, 13, 103),
    ("gap in batch, last aborted offset", GAP_IN_BATCH, 15, 103),
    ("gap in batch, first record after gap", GAP_IN_BATCH, 16, 103),
    ("gap in batch, last record", GAP_IN_BATCH, 17, 104),
    ("gap in batch, one past the end", GAP_IN_BATCH, 18, 105),
    ("markers, end of first batch", MARKERS, 4, 4),
    # exact is 6; 5 is the target marker, a consumer from 5 reads 6.. as from 6
    ("markers, U on the source marker (equivalent)", MARKERS, 5, 5),
    ("markers, start of second batch", MARKERS, 6, 6),
    ("markers, inside second batch", MARKERS, 8, 8),
    ("markers, one past the end", MARKERS, 10, 10),
    ("no source gap, end of first batch", NO_SRC_GAP, 4, 4),
    ("no source gap, skips the target marker", NO_SRC_GAP, 5, 6),
    ("no source gap, inside second batch", NO_SRC_GAP, 7, 8),
    ("no source gap, one past the end", NO_SRC_GAP, 10, 11),
    ("no target marker, source gap start", NO_TGT_MARKER, 5, 5),
    ("no target marker, source gap end", NO_TGT_MARKER, 6, 5),
    ("no target marker, second batch start", NO_TGT_MARKER, 7, 5),
    ("no target marker, inside second batch", NO_TGT_MARKER, 8, 6),
    ("no target marker, one past the end", NO_TGT_MARKER, 10, 8),
    ("singles, one-record run", SINGLES, 3, 50),
    ("singles, gap after one-record run", SINGLES, 4, 51),
    ("singles, end of gap", SINGLES, 7, 51),
    ("singles, run after gap", SINGLES, 8, 51),
    ("singles, last record", SINGLES, 9, 52),
    ("singles, one past the end", SINGLES, 10, 53),
    ("long gaps, aborted transaction", LONG_GAPS, 3, 4),
    ("long gaps, source marker after aborted", LONG_GAPS, 13, 4),
    ("long gaps, inside second batch", LONG_GAPS, 15, 5),
    ("long gaps, source marker, target jump", LONG_GAPS, 16, 8),
    ("long gaps, last record", LONG_GAPS, 17, 8),
    ("long gaps, one past the end", LONG_GAPS, 18, 9),
]


@pytest.mark.parametrize(
    ("syncs", "upstream", "expected"),
    [pytest.param(s, u, e, id=name) for name, s, u, e in TABLE],
)
def test_translation_table(syncs: list[Sync], upstream: int, expected: int | None) -> None:
    assert _translate(syncs, upstream) == expected


# Equal-width source and target gaps at a transaction boundary: source offset 1 is
# a transaction marker, target offset 1 the mirror's commit marker. The pairs alone
# look like one run 0..2; the flag on (2, 2) says it starts a transaction.
EQUAL_WIDTH = [(0, 0), (2, 2)]


@pytest.mark.parametrize(
    ("firsts", "upstream", "expected"),
    [
        pytest.param([True, True], 1, 2, id="next sync starts a transaction: a gap"),
        pytest.param([True, False], 1, 1, id="same transaction: one run"),
        pytest.param(None, 1, 1, id="no flags: one run"),
        pytest.param([True, True], 0, 0, id="at the first sync"),
        pytest.param([True, True], 2, 2, id="at the flagged sync"),
        pytest.param([True, True], 3, 3, id="one past the end"),
    ],
)
def test_transaction_first_flag_disambiguates_equal_widths(
    firsts: list[bool] | None, upstream: int, expected: int
) -> None:
    ups, downs = [u for u, _ in EQUAL_WIDTH], [d for _, d in EQUAL_WIDTH]
    assert translate_offset(ups, downs, upstream, firsts, ["t", "t"]) == expected


def test_transaction_first_flag_in_a_batch_with_a_gap() -> None:
    # one transaction u 10,11 | marker 12 | 13,14 -> d 100..103, next transaction
    # u 16.. -> d 105.. (source marker 15, target marker 104): widths 2 and 2
    syncs = [(10, 100), (11, 101), (13, 102), (14, 103), (16, 105), (18, 107)]
    firsts = [True, False, False, False, True, False]
    one = ["t"] * 6
    ups, downs = [u for u, _ in syncs], [d for _, d in syncs]
    assert translate_offset(ups, downs, 12, firsts, one) == 102  # gap inside the transaction
    assert translate_offset(ups, downs, 15, firsts, one) == 105  # exact, not the marker 104
    assert translate_offset(ups, downs, 15, None, one) == 104  # no flags: the equivalent answer
    assert translate_offset(ups, downs, 17, firsts, one) == 106
    # the transaction ids alone tell the boundary too
    two = ["t1"] * 4 + ["t2"] * 2
    assert translate_offset(ups, downs, 15, None, two) == 105


def test_translation_accepts_any_sequences() -> None:
    assert translate_offset((10, 19), (100, 109), 15, writers=("t", "t")) == 105
    assert translate_offset(range(10, 20), range(100, 110), 15, writers=["t"] * 10) == 105


# Syncs mm did not write (MirrorMaker 2's, an older mirror's: no mm.sync header) are
# read by MM2's rule: exact at a sync, its downstream + 1 past it. Both cases went
# ahead when such syncs were read by mm's run rule.
@pytest.mark.parametrize(
    ("ups", "downs", "writers", "upstream", "expected", "exact"),
    [
        # MM2 mirrored 0..9, a source marker at 10, then 11 -> 10: one sync per skip
        pytest.param([0, 11], [0, 10], None, 5, 1, 5, id="MM2 syncs around a skip"),
        pytest.param([0, 11], [0, 10], [None, None], 11, 10, 10, id="MM2, at a sync"),
        # MM2 mirrored up to 1099 with a sync at 1000; mm took over at 1100
        pytest.param(
            [1000, 1100], [1000, 1100], [None, "b1"], 1050, 1001, 1050, id="takeover from MM2"
        ),
        # mm mirrored up to 1000; MM2 took over, its first sync lost, the next at 1100
        pytest.param([1000, 1100], [1000, 1110], ["b1", None], 1050, 1001, 1055, id="MM2 after mm"),
        pytest.param([5], [7], [None], 100, 8, 60, id="past another writer's last sync"),
        # a hole (compaction) between two mm syncs of one transaction
        pytest.param([0, 50], [0, 50], ["b", "b"], 20, 20, 20, id="mm, complete"),
    ],
)
def test_syncs_of_other_writers_are_read_conservatively(
    ups: list[int],
    downs: list[int],
    writers: list[str | None] | None,
    upstream: int,
    expected: int,
    exact: int,
) -> None:
    got = translate_offset(ups, downs, upstream, writers=writers)
    assert got == expected
    assert got is not None and got <= exact


def test_an_interval_with_syncs_missing_is_read_conservatively() -> None:
    # one mm transaction 0..99 with a gap at 40..59 on the source; the syncs of the
    # run ends at 39 and 60 were compacted away: (0, 0), (99, 79) look like a gap
    ups, downs, writers = [0, 99], [0, 79], ["b", "b"]
    assert translate_offset(ups, downs, 20, writers=writers) == 79  # the run rule: ahead
    assert translate_offset(ups, downs, 20, writers=writers, complete=[True, False]) == 1


# MM2's rule on the same layouts: never past the exact answer (here: re-reads one).
MM2_TABLE: list[tuple[str, list[Sync], int, int | None]] = [
    ("one run, inside (re-reads 4)", ONE_RUN, 15, 101),
    ("one run, at a sync", ONE_RUN, 19, 109),
    ("gap in batch, in the gap", GAP_IN_BATCH, 14, 103),
    ("no source gap, inside second batch (re-reads 1)", NO_SRC_GAP, 7, 7),
    ("no target marker, source gap", NO_TGT_MARKER, 6, 5),
    ("below oldest sync", ONE_RUN, 9, None),
]


@pytest.mark.parametrize(
    ("syncs", "upstream", "expected"),
    [pytest.param(s, u, e, id=name) for name, s, u, e in MM2_TABLE],
)
def test_mm2_reader_table(syncs: list[Sync], upstream: int, expected: int | None) -> None:
    assert _mm2_reader(syncs, upstream) == expected


# ---------------------------------------------------------------------------
# Simulation
# ---------------------------------------------------------------------------


@dataclass
class Mirrored:
    """One source partition and its mirror on the target."""

    log_start: int
    source_end: int  # one past the last source offset (records and gaps)
    us: list[int] = field(default_factory=list)  # upstream offsets of mirrored records
    ds: list[int] = field(default_factory=list)  # their downstream offsets
    batches: list[int] = field(default_factory=list)  # their batch numbers
    syncs: list[Sync] = field(default_factory=list)  # everything RunTracker emitted
    # per sync: the first sync of its batch (the mirror's mm.txn.first header)
    firsts: list[bool] = field(default_factory=list)
    # per sync: its batch's transaction id (the mirror's mm.sync header)
    writers: list[str | None] = field(default_factory=list)

    def exact(self, upstream: int) -> int:
        """Exact: smallest d with u >= U, else one past the last record with u < U."""
        i = bisect_left(self.us, upstream)
        return self.ds[i] if i < len(self.ds) else self.ds[-1] + 1

    def first_read(self, downstream: int) -> int:
        """Index of the first mirrored record a consumer starting at ``downstream`` reads."""
        return bisect_left(self.ds, downstream)

    def first_unread(self, upstream: int) -> int:
        """Index of the first mirrored record a group committed at ``upstream`` has not read."""
        return bisect_left(self.us, upstream)

    def ambiguous(self, upstream: int) -> bool:
        """U in a source gap between two runs with equal upstream and downstream distance."""
        i = bisect_left(self.us, upstream)
        if i == 0 or i == len(self.us) or self.us[i] == upstream:
            return False
        return self.us[i] - self.us[i - 1] == self.ds[i] - self.ds[i - 1]


def _source_offsets(rng: random.Random) -> tuple[int, list[int], int]:
    """A source partition: (log start, offsets that hold records, end offset)."""
    log_start = rng.choice([0, 0, rng.randrange(1, 100_000)])
    gap_rate = rng.choice([0.0, 0.1, 0.3, 0.6, 0.9])
    seg_lens = rng.choice([[1], [1, 2, 3], [1, 5, 20], [10, 50]])
    offset = log_start
    if rng.random() < 0.2:
        offset += rng.randint(1, 4)  # log starts with a marker or aborted records
    records: list[int] = []
    wanted = rng.randint(1, 150)
    while len(records) < wanted:
        n = rng.choice(seg_lens)
        records.extend(range(offset, offset + n))
        offset += n
        if rng.random() < gap_rate:
            # a transaction marker, an aborted transaction plus its marker, or a
            # compacted stretch
            offset += rng.choice([1, 1, 1, 2, 3, rng.randint(4, 40)])
    return log_start, records, offset + rng.choice([0, 0, 1, 5])


def _mirror(rng: random.Random, mirror_from_start: bool = True) -> Mirrored:
    log_start, records, source_end = _source_offsets(rng)
    # the mirror has caught up fully, or lags; it may have started mid-log
    start = 0 if mirror_from_start or rng.random() < 0.5 else rng.randrange(len(records))
    stop = len(records) if rng.random() < 0.6 else rng.randint(start + 1, len(records))
    todo = records[start:stop]

    max_batch = rng.choice([1, 2, 3, 8, 64, 1000])
    align = rng.random() < 0.3  # batches tend to end where the source has a gap
    step_weights = rng.choice([(1, 0, 0), (0, 1, 0), (8, 1, 1), (5, 3, 2), (1, 1, 1)])
    feed_mode = rng.choice(["add", "contiguous", "mixed"])

    m = Mirrored(log_start=log_start, source_end=source_end)
    downstream = rng.choice([0, 0, rng.randrange(1, 100_000)])
    i = 0
    batch_no = 0
    while i < len(todo):
        size = rng.randint(1, max_batch)
        if align:
            # extend or cut the batch to end at the next source gap
            j = i + 1
            while j < len(todo) and todo[j] == todo[j - 1] + 1:
                j += 1
            size = j - i
        batch = todo[i : i + size]
        i += len(batch)
        if batch_no:
            # between batches the target holds the previous transaction's marker
            # (+1); some brokers store none (+0); sometimes more (an aborted
            # attempt, another marker)
            kind = rng.choices(["marker", "none", "jump"], weights=step_weights)[0]
            downstream += {"marker": 1, "none": 0, "jump": rng.randint(2, 6)}[kind]
        batch_no += 1

        tracker = RunTracker()
        _feed(rng, tracker, batch, feed_mode)
        pairs = tracker.syncs(downstream)
        m.syncs.extend(pairs)
        m.firsts.extend(k == 0 for k in range(len(pairs)))
        m.writers.extend([f"b{batch_no}"] * len(pairs))
        for u in batch:
            m.us.append(u)
            m.ds.append(downstream)
            m.batches.append(batch_no - 1)
            downstream += 1
    return m


def _feed(rng: random.Random, tracker: RunTracker, batch: list[int], mode: str) -> None:
    k = 0
    while k < len(batch):
        if mode == "add" or (mode == "mixed" and rng.random() < 0.5):
            tracker.add(batch[k])
            k += 1
            continue
        j = k + 1
        while j < len(batch) and batch[j] == batch[j - 1] + 1:
            j += 1
        n = j - k if mode == "contiguous" else rng.randint(1, j - k)
        tracker.add_contiguous(batch[k], n)
        k += n


def _check_exact(m: Mirrored, syncs: Sequence[Sync], upstream: int, where: str) -> bool:
    """Check translate_offset at ``upstream``; True when the answer is the equivalent one."""
    got = _translate(syncs, upstream)
    if upstream < syncs[0][0]:
        assert got is None, where
        return False
    assert got is not None, where
    exact = m.exact(upstream)
    if not m.ambiguous(upstream):
        assert got == exact, where
        return False
    # the precise contract: never past the exact offset, and a consumer starting
    # at ``got`` reads exactly the mirrored records with u >= U (no target
    # record lies in [got, exact))
    assert got <= exact, where
    assert m.first_read(got) == m.first_unread(upstream), where
    return got != exact


def _upstreams_to_check(m: Mirrored) -> range:
    # from log start to one past the last mirrored record, and on to the source end
    return range(m.log_start, max(m.us[-1] + 2, m.source_end + 1))


def test_simulated_mirroring_translates_exactly() -> None:
    stats = {"layouts": 0, "checked": 0, "in_gap": 0, "ambiguous": 0, "equivalent": 0}
    for seed in SEEDS:
        rng = random.Random(seed)
        m = _mirror(rng)
        stats["layouts"] += 1
        assert m.syncs == sorted(m.syncs), seed
        assert m.syncs[0] == (m.us[0], m.ds[0]), seed
        assert m.syncs[-1] == (m.us[-1], m.ds[-1]), seed
        mirrored = set(m.us)
        for upstream in _upstreams_to_check(m):
            where = f"seed={seed} U={upstream} syncs={m.syncs}"
            stats["checked"] += 1
            if m.us[0] < upstream < m.us[-1] and upstream not in mirrored:
                stats["in_gap"] += 1
            stats["ambiguous"] += m.ambiguous(upstream)
            stats["equivalent"] += _check_exact(m, m.syncs, upstream, where)
    print(
        f"\ntranslation: {stats['layouts']} layouts, {stats['checked']} offsets checked, "
        f"{stats['in_gap']} in source gaps between mirrored records, "
        f"{stats['ambiguous']} ambiguous, {stats['equivalent']} equivalent-but-not-equal"
    )
    # the simulation must exercise the equivalent branch, and it is the only
    # place where the answer differs from the exact offset
    assert stats["equivalent"] > 0
    assert stats["equivalent"] == stats["ambiguous"]


def test_simulated_mirroring_with_transaction_flags_is_exact() -> None:
    """With the mirror's per-transaction flag every offset translates exactly,
    the equal-width boundary cases included."""
    ambiguous = 0
    for seed in SEEDS:
        m = _mirror(random.Random(seed))
        ups, downs = [u for u, _ in m.syncs], [d for _, d in m.syncs]
        for upstream in _upstreams_to_check(m):
            got = translate_offset(ups, downs, upstream, m.firsts, m.writers)
            # the transaction ids alone tell every boundary (newer mirrors write both)
            alone = translate_offset(ups, downs, upstream, None, m.writers)
            if upstream < ups[0]:
                assert got is None and alone is None
                continue
            ambiguous += m.ambiguous(upstream)
            assert got == m.exact(upstream), f"seed={seed} U={upstream} syncs={m.syncs}"
            assert alone == got, f"seed={seed} U={upstream} syncs={m.syncs}"
    assert ambiguous > 0  # the simulation reaches the case the flag is for


def test_simulated_mirroring_read_as_another_writers_is_never_ahead() -> None:
    """The same syncs without the mm.sync header (an older mirror's, or MM2's when it
    happens to sync every run end) are never ahead, and exact at every sync."""
    for seed in SEEDS:
        m = _mirror(random.Random(seed))
        ups, downs = [u for u, _ in m.syncs], [d for _, d in m.syncs]
        for upstream in _upstreams_to_check(m):
            got = translate_offset(ups, downs, upstream, m.firsts)
            if upstream < ups[0]:
                assert got is None
                continue
            assert got is not None and got <= m.exact(upstream), f"seed={seed} U={upstream}"
            if upstream in ups:
                assert got == m.exact(upstream)


def test_simulated_syncs_are_run_endpoints() -> None:
    """Every sync is a mirrored record; both sides of every run boundary (source
    gap or batch boundary) have one, and no record strictly inside a run has one."""
    for seed in SEEDS:
        m = _mirror(random.Random(seed))
        pairs = set(zip(m.us, m.ds, strict=True))
        assert set(m.syncs) <= pairs, seed
        synced = {u for u, _ in m.syncs}
        boundary = {0, len(m.us) - 1}
        for k in range(1, len(m.us)):
            same_run = m.us[k] - m.us[k - 1] == 1 and m.batches[k] == m.batches[k - 1]
            if same_run:
                assert m.ds[k] - m.ds[k - 1] == 1, (seed, k)
            else:
                boundary |= {k - 1, k}
        assert synced == {m.us[k] for k in boundary}, seed


def test_partial_syncs() -> None:
    """Only a suffix of the syncs is known (older ones compacted/expired, or the
    mirror started mid-log): None below the oldest sync, exact from it on."""
    equivalent = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        m = _mirror(rng, mirror_from_start=rng.random() < 0.5)
        suffix = m.syncs[rng.randrange(len(m.syncs)) :]
        oldest = suffix[0][0]
        for upstream in _upstreams_to_check(m):
            where = f"seed={seed} U={upstream} suffix={suffix}"
            if upstream < oldest:
                assert _translate(suffix, upstream) is None, where
                continue
            # same answer as with the full history, and exact (or equivalent)
            assert _translate(suffix, upstream) == _translate(m.syncs, upstream), where
            equivalent += _check_exact(m, suffix, upstream, where)
    print(f"\npartial syncs: {equivalent} equivalent-but-not-equal")


def test_mm2_reader_rule_never_skips() -> None:
    """MM2's readers on our syncs (all of them, or any subset, as MM2 keeps only
    some) re-read at worst, never skip: answer <= exact."""
    reread = 0
    checked = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        m = _mirror(rng)
        keep = rng.choice([1.0, 1.0, 0.5, 0.1])
        subset = [s for s in m.syncs if rng.random() < keep] or m.syncs[-1:]
        for syncs in (m.syncs, subset):
            for upstream in _upstreams_to_check(m):
                got = _mm2_reader(syncs, upstream)
                where = f"seed={seed} U={upstream} syncs={syncs}"
                if upstream < syncs[0][0]:
                    assert got is None, where
                    continue
                assert got is not None, where
                assert got <= m.exact(upstream), where
                # it reads every record the group had not read (and maybe some twice)
                assert m.first_read(got) <= m.first_unread(upstream), where
                checked += 1
                reread += m.first_unread(upstream) - m.first_read(got)
    print(f"\nMM2 rule: {checked} offsets, {reread} records re-read in total, none skipped")
