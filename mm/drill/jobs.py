"""The drill's own processes: the mirror, checkpoint and heartbeat jobs, and one-shot
`mm` commands, run exactly as an operator runs them (``python -m mm ...``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mm.errors import MirrorError

STOP_GRACE_S = 20.0


def mm_env(*, overrides: bool = True) -> dict[str, str]:
    """The environment for an `mm` child: Spark's Python workers use this interpreter.

    ``overrides=False`` drops the ``MM_*`` config overrides: a config the drill derived
    already holds them, under its own aliases, and they must not apply twice.
    """
    from mm.config.env import ENV_PREFIX, RESERVED

    env = {
        k: v
        for k, v in os.environ.items()
        if overrides or not k.startswith(ENV_PREFIX) or k in RESERVED
    }
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("MM_LOG_FORMAT", "json")
    return env


class Job:
    """A long-running `mm <command> -c FILE`, its output in ``<log_dir>/<name>.log``."""

    def __init__(
        self, name: str, config: Path, log_dir: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mm", *args, "-c", str(config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=mm_env() if env is None else env,
            start_new_session=True,  # its Spark JVM and Python workers stop with it
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def why_it_ended(self) -> str:
        """What an ended job said: its error line, or its output's tail."""
        return ended_job_says(self.name, self.log_text(), self.log_path)

    def terminate(self) -> None:
        """SIGTERM to the job's process group (see :meth:`stop`)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)

    def kill(self) -> int | None:
        """SIGKILL to the job's process group: the job dies as its host would, mid-batch."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def stop(self, grace: float = STOP_GRACE_S) -> int | None:
        """SIGTERM to the job's process group, SIGKILL after ``grace`` seconds."""
        self.terminate()
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()
        return self.proc.returncode


@dataclass(frozen=True)
class CommandResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.stdout)
        except ValueError as exc:
            raise MirrorError(
                f"`{' '.join(self.argv[2:])}` printed no JSON (exit {self.returncode}): "
                f"{self.stderr.strip()[-2000:] or self.stdout[-2000:]}"
            ) from exc
        if not isinstance(doc, dict):
            raise MirrorError(f"`{' '.join(self.argv[2:])}` printed {type(doc).__name__}")
        return doc


def run_command(
    config: Path,
    log_dir: Path,
    *args: str,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> CommandResult:
    """`mm <args> -c config`, waited for; its output also kept in ``log_dir``."""
    argv = [sys.executable, "-m", "mm", *args, "-c", str(config)]
    started = time.monotonic()
    res = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=mm_env() if env is None else env,
        timeout=timeout,
        check=False,
    )
    name = args[0]
    (log_dir / f"{name}.out").write_text(res.stdout)
    (log_dir / f"{name}.err").write_text(res.stderr)
    return CommandResult(argv, res.returncode, res.stdout, res.stderr, time.monotonic() - started)


def ended_job_says(name: str, output: str, log_path: Path) -> str:
    """The last ``mm <name>: error:`` line of a job's ``output`` (its one-line reason,
    without the logs and Spark's start-up lines before it), or the output's tail; and
    where the whole output is."""
    prefix = f"mm {name}: error: "
    said = [line for line in output.splitlines() if line.startswith(prefix)]
    reason = said[-1].removeprefix(prefix) if said else output[-3000:]
    return f"{reason} (its output: {log_path})"
