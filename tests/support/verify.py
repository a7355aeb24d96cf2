"""Run `mm verify` as a user would (support.cli) and read its report."""

from __future__ import annotations

import sys
from pathlib import Path

from support.cli import CommandRun, run_command

VerifyRun = CommandRun  # a finished `mm` command (support.cli)


def run_verify(config: Path, *args: str) -> VerifyRun:
    run = run_command(["verify", "-c", str(config), *args], cwd=config.parent, timeout=300)
    # visible with -s: how long a whole `mm verify` takes here
    print(
        f"mm verify {' '.join(args)}: exit {run.returncode} in {run.seconds:.1f}s", file=sys.stderr
    )
    return run
