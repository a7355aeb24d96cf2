"""Child-process plumbing for the embedded brokers: free ports, spawn, liveness, kill.

Every child runs in its own session (so its process group id equals its pid and
the whole group can be signalled) with stdout/stderr sent to a log file. In the
foreground/test usage the child also gets PR_SET_PDEATHSIG, so a parent killed
with SIGKILL still takes its brokers with it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


def free_port(host: str = LOOPBACK) -> int:
    """A port that was free a moment ago; callers retry if they lose the race."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@functools.cache
def _prctl() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl


def _die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """preexec_fn asking Linux to SIGKILL the child when its parent dies.

    Caveat of PDEATHSIG: it fires when the *thread* that forked exits, so spawn
    from a thread that lives as long as the brokers should (the main thread).
    """
    if not sys.platform.startswith("linux"):
        return None
    # Resolved before fork: the child of a threaded parent should do as little as possible.
    prctl = _prctl()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        # The parent may have died before prctl ran: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def spawn(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    die_with_parent: bool = True,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session, output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()) if die_with_parent else None,
        )


def start_time(pid: int) -> int | None:
    """Process start time (clock ticks since boot) on Linux, else None.

    Stored next to pids in state files so a recycled pid is never mistaken for
    (and killed as) one of our brokers.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; fields after ')' are fixed.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def pid_alive(pid: int, started: int | None = None) -> bool:
    """True if ``pid`` runs (not a zombie) and, if given, started at ``started``."""
    if pid <= 0:  # 0 and negatives address process groups, never one process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if _is_zombie(pid):
        return False
    if started is not None:
        current = start_time(pid)
        if current is not None and current != started:
            return False
    return True


def _signal_group(pid: int, sig: int) -> None:
    """Signal the process group led by ``pid`` (falls back to the pid alone)."""
    if pid <= 0:
        raise ValueError(f"refusing to signal pid {pid}")
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    except PermissionError:
        pass  # not ours to signal; callers see it still alive


def wait_gone(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_children(children: Sequence[subprocess.Popen[bytes]], grace: float = 2.0) -> None:
    """SIGTERM our children's process groups, SIGKILL after ``grace`` s, and reap them.

    All are signalled first, so stopping N brokers takes one grace period, not N.
    """
    live = [proc for proc in children if proc.poll() is None]
    for proc in live:
        _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in live:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        # Kill the group even if the leader exited, in case it left children behind.
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def stop_child(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    stop_children([proc], grace)


def stop_pids(pids: Sequence[tuple[int, int | None]], grace: float = 5.0) -> bool:
    """Stop processes that are not our children (found in a state file).

    ``pids`` holds (pid, start time or None). SIGTERM to each group, SIGKILL after
    ``grace`` s. Returns True once all are gone.
    """
    live = [(pid, started) for pid, started in pids if pid_alive(pid, started)]

    def any_alive() -> bool:
        return any(pid_alive(pid, started) for pid, started in live)

    for pid, _ in live:
        _signal_group(pid, signal.SIGTERM)
    if wait_gone(any_alive, grace):
        return True
    for pid, started in live:
        if pid_alive(pid, started):  # re-checked: never signal a recycled pid
            _signal_group(pid, signal.SIGKILL)
    return wait_gone(any_alive, 5.0)


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "<no log>"
    return "\n".join(text.splitlines()[-lines:]) or "<empty log>"
