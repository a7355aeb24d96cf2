"""Run `mm verify` in a subprocess, as a user would, and read its report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class VerifyRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict[str, Any]:
        try:
            out: dict[str, Any] = json.loads(self.stdout)
        except ValueError:
            raise AssertionError(f"not JSON:\n{self.describe()}") from None
        return out

    def describe(self) -> str:
        return (
            f"exit {self.returncode} after {self.seconds:.1f}s\n--- stdout\n{self.stdout[-6000:]}"
            f"\n--- stderr\n{self.stderr[-6000:]}"
        )


def run_verify(config: Path, *args: str) -> VerifyRun:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "mm", "verify", "-c", str(config), *args],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        },
    )
    run = VerifyRun(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)
    # visible with -s: how long a whole `mm verify` takes here
    print(
        f"mm verify {' '.join(args)}: exit {run.returncode} in {run.seconds:.1f}s", file=sys.stderr
    )
    return run
