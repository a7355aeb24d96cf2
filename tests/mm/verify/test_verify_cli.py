"""`mm verify`'s command line without brokers: config and usage errors (exit 2), and
the text table."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_mm

from mm.verify.compare import CheckpointIn, PartitionInput, Sync, compare_partition
from mm.verify.digest import DigestSeq, record_digest
from mm.verify.job import FlowReport, VerifyReport
from mm.verify.render import render

pytestmark = pytest.mark.unit

GOOD = """\
clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
"""


def _props(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm.properties"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        # TLS on a cluster read raw (the embedded broker's profile); Apache Kafka reads it
        (
            GOOD + "A.security.protocol = SSL\nA.mm.broker.profile = embedded\n",
            [],
            "invalid config A.security.protocol='SSL'",
        ),
        (GOOD, ["--flow", "B->A"], "invalid config --flow='B->A'"),
        (GOOD, ["--topics", "("], "--topics '(' is not a valid regex"),
        (GOOD, ["--range-records", "0"], "--range-records must be a positive number"),
        (GOOD.replace("A->B.enabled = true", "A->B.enabled = maybe"), [], "A->B.enabled"),
    ],
)
def test_bad_config_or_usage_exits_2_with_one_line(
    tmp_path: Path, text: str, args: list[str], message: str
) -> None:
    res = run_mm("verify", "-c", str(_props(tmp_path, text)), *args, cwd=tmp_path)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mm verify: "), res.stderr
    assert message in lines[0]


def test_text_table_names_partition_offsets_and_counts() -> None:
    def seq(values: str) -> DigestSeq:
        return DigestSeq.of(
            (i, record_digest(None, v.encode(), (), 0)) for i, v in enumerate(values)
        )

    syncs = [Sync(0, 0, True), Sync(3, 3)]
    good = compare_partition(
        PartitionInput(
            "orders",
            0,
            "A.orders",
            seq("abcd"),
            seq("abcd"),
            0,
            4,
            0,
            4,
            4,
            syncs,
            [CheckpointIn("g", 2, 2), CheckpointIn("h", 3, 1)],
        )
    )
    bad = compare_partition(
        PartitionInput("orders", 1, "A.orders", seq("abcd"), seq("abxcd"), 0, 4, 0, 5, 4, syncs)
    )
    flow = FlowReport("A->B", "mm2-offset-syncs.B.internal on A", "A.checkpoints.internal")
    flow.partitions = [good, bad]
    text = render(VerifyReport([flow], seconds=1.5, spark_tasks=4))
    rows = {line.split()[1]: line for line in text.splitlines() if line.startswith("  orders ")}
    assert "4/4" in rows["0"] and "1/1/0" in rows["0"] and rows["0"].rstrip().endswith("ok")
    assert "2 -> 2: extra on target" in rows["1"] and rows["1"].rstrip().endswith("DIFFERS")
    assert "  orders[1]: extra on target at source offset 2, target offset 2" in text
    assert "  orders[1]: 0 records missing on target, 1 extra on target in all" in text
    assert "2 (1 false)" in rows["1"]  # the sync (3, 3) now points at another record
    assert text.splitlines()[-2].startswith("NOT VERIFIED")
