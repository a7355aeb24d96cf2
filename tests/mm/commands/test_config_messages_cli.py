"""Config messages of the commands, in-process: the unknown-key warning is on stderr
before the mirror starts; a missing or unreadable file is one line naming it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import mm.reach
import mm.source.job
from mm.cli import main

pytestmark = pytest.mark.unit


def test_mirror_warns_about_a_typo_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "A->B.enabled = true\nA->B.topcs = orders\n",
        encoding="utf-8",
    )
    for name in [n for n in os.environ if n.startswith("MM_")]:
        monkeypatch.delenv(name)
    started: list[tuple[str, Any]] = []

    def fake_run_mirror(cfg: Any, **kwargs: Any) -> dict[str, Any]:
        # what the user has seen on stderr when the mirror (Spark) starts
        started.append((capsys.readouterr().err, cfg.flow("A", "B").topics))
        return {}

    monkeypatch.setattr(mm.source.job, "run_mirror", fake_run_mirror)
    # the clusters a:1 and b:1 do not exist: skip the start-up reachability check
    monkeypatch.setattr(mm.reach, "require_reachable", lambda *a, **kw: None)
    assert main(["mirror", "-c", str(path), "--once"]) == 0
    assert started == [
        (
            "mm mirror: warning: unknown config key A->B.topcs (line 5); "
            "did you mean A->B.topics?\n",
            (".*",),
        )
    ]


EXPECTED_FILE = "expected a readable MirrorMaker 2 properties file (-c FILE or MM_CONFIG)"


@pytest.mark.parametrize(
    "args",
    [
        ["config", "check"],
        ["mirror"],
        ["checkpoint"],
        ["heartbeat"],
        ["status"],
        ["verify"],
        ["translate", "--group", "g"],
        ["failback"],
        ["switchover"],
        ["backup"],
        ["restore", "--to", "A"],
        ["drill"],
    ],
    ids=lambda a: a[0],
)
@pytest.mark.parametrize("problem", ["missing", "directory"])
def test_a_missing_or_unreadable_file_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], problem: str
) -> None:
    path = tmp_path / "nosuch.properties"
    if problem == "directory":
        path.mkdir()
    reason = "No such file or directory" if problem == "missing" else "Is a directory"
    assert main([*args, "-c", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [
        f"mm {args[0]}: cannot read the configuration file {str(path)!r}: {reason}; "
        + EXPECTED_FILE
    ]
