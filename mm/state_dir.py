"""The state directory (``mm.state.dir``) must take writes: checked before a job
starts, and every state write that fails is one error naming the path.

A full disk or a read-only mount found mid-run must not leave half a state file:
writers write a temporary file in the same directory, fsync it and rename it over
the old one (see :func:`write_atomically`); a failed write removes the temporary
file and leaves the previous state as it was.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from mm.errors import MirrorError

__all__ = ["StateDirError", "require_writable", "state_error", "write_atomically"]

EXPECTED = "expected a writable directory with free space (mm.state.dir)"
_PROBE_BYTES = 4096  # one page: a full file system refuses it


class StateDirError(MirrorError):
    """The state directory refused a write (exit 1): names the path and what is needed."""


def state_error(path: Path | str, exc: OSError) -> StateDirError:
    reason = exc.strerror or exc.__class__.__name__
    code = errno.errorcode.get(exc.errno or 0)
    shown = f"{reason} ({code})" if code else reason
    return StateDirError(f"cannot write state in {path}: {shown}; {EXPECTED}")


def require_writable(state_dir: Path) -> None:
    """Create ``state_dir`` if needed and write (then remove) a probe file in it;
    StateDirError naming the directory when the file system refuses."""
    tmp = None
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".write-probe-", dir=state_dir)
        with os.fdopen(fd, "wb") as f:
            f.write(b"\0" * _PROBE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise state_error(state_dir, exc) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_atomically(path: Path, data: str) -> None:
    """``path`` holds ``data`` or, when the write fails, what it held before: no
    temporary file is left behind. A failure is a StateDirError naming the path."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise state_error(path, exc) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
