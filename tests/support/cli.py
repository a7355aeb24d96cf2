"""Run the `mm` command line in subprocesses, as a user would."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

MM = [sys.executable, "-m", "mm"]


def run_mm(*args: str, cwd: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MM, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


class MMProcess:
    """A long-running `mm` subprocess whose stdout lines can be awaited."""

    def __init__(self, *args: str, cwd: Path, stderr_path: Path) -> None:
        self._stderr = open(stderr_path, "w")  # a file: a full pipe would block the child
        self.proc = subprocess.Popen(
            [*MM, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(self, match: Callable[[str], bool], timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching line from mm; got {self.lines}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise EOFError(f"mm exited ({self.proc.poll()}) without it; got {self.lines}")
            self.lines.append(line)
            if match(line):
                return line

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._stderr.close()
