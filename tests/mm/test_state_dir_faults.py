"""Fault 5: the state directory on a full disk or a read-only mount.

Unit tests make the atomic writer fail at each step (ENOSPC, EROFS): the previous
file stays as it was, no temporary file is left, and the error names the path
and what is needed. The mount tests use a real 64 KiB tmpfs (full, or remounted
read-only), made and unmounted by the fixture: `mm mirror --once` and
`mm checkpoint --once` stop with exit 1 and one line naming the directory,
before any cluster is asked (the clusters of the file do not exist).
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm import reach
from mm.checkpoint import snapshot
from mm.cli import main
from mm.state_dir import StateDirError, require_writable, write_atomically

EXPECTED = "expected a writable directory with free space (mm.state.dir)"


def _fail(code: int):  # type: ignore[no-untyped-def]
    def raise_it(*_a: object, **_k: object) -> None:
        raise OSError(code, os.strerror(code))

    return raise_it


@pytest.mark.unit
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
@pytest.mark.parametrize("step", ["os.fsync", "os.replace", "tempfile.mkstemp"])
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, step: str
) -> None:
    path = tmp_path / "checkpoint" / "A-B" / "store.json"
    write_atomically(path, '{"v": 1}')
    module, name = step.split(".")
    import mm.state_dir as sd

    monkeypatch.setattr(getattr(sd, module), name, _fail(code))
    with pytest.raises(StateDirError) as caught:
        write_atomically(path, '{"v": 2}')
    monkeypatch.undo()
    assert path.read_text() == '{"v": 1}'
    assert sorted(p.name for p in path.parent.iterdir()) == ["store.json"]
    message = str(caught.value)
    assert message.startswith(f"cannot write state in {path}: {os.strerror(code)} (")
    assert errno.errorcode[code] in message and message.endswith(EXPECTED)


@pytest.mark.unit
def test_the_checkpoint_snapshot_goes_through_the_atomic_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mm.state_dir as sd

    monkeypatch.setattr(sd.os, "fsync", _fail(errno.ENOSPC))
    report = snapshot.Report("A->B", 1, "t", "delete", 0, 0, {})
    with pytest.raises(StateDirError, match="No space left on device"):
        snapshot.save_report(tmp_path / "report.json", report)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_the_probe_names_the_directory_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mm.state_dir as sd

    require_writable(tmp_path / "state")
    assert list((tmp_path / "state").iterdir()) == []
    monkeypatch.setattr(sd.os, "fsync", _fail(errno.ENOSPC))
    with pytest.raises(StateDirError) as caught:
        require_writable(tmp_path / "state")
    assert str(caught.value) == (
        f"cannot write state in {tmp_path / 'state'}: No space left on device (ENOSPC); " + EXPECTED
    )
    assert list((tmp_path / "state").iterdir()) == []


# --- a real tmpfs: full, or read-only ------------------------------------------------------


def _mount(path: Path, *options: str) -> str | None:
    res = subprocess.run(
        ["mount", *options, str(path)], capture_output=True, text=True, check=False
    )
    return None if res.returncode == 0 else (res.stderr.strip() or f"exit {res.returncode}")


@pytest.fixture(params=["full", "read-only"])
def bad_state_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    why = _mount(mnt, "-t", "tmpfs", "-o", "size=64k", "tmpfs")
    if why is not None:
        pytest.skip(f"mounting a tmpfs is not permitted here ({why}); needs root or CAP_SYS_ADMIN")
    try:
        state = mnt / "state"
        (state / "checkpoint" / "A-B").mkdir(parents=True)
        (state / "checkpoint" / "A-B" / "store.json").write_text('{"kept": true}')
        if request.param == "full":
            fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
            try:
                while True:
                    os.write(fd, b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
            finally:
                os.close(fd)
        else:
            why = _mount(mnt, "-o", "remount,ro")
            assert why is None, why
        yield request.param, state
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.integration
@pytest.mark.parametrize("command", [["mirror", "--once"], ["checkpoint", "--once"]])
def test_a_full_or_read_only_state_dir_is_one_line(
    bad_state_dir: tuple[str, Path],
    command: list[str],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kind, state = bad_state_dir
    config = tmp_path / "mm.properties"
    config.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
        f"A->B.enabled = true\nmm.state.dir = {state}\n",
        encoding="utf-8",
    )

    def reached(*_a: object, **_k: object) -> None:
        raise AssertionError("a cluster was asked before the state dir was checked")

    monkeypatch.setattr(reach, "require_reachable", reached)
    before = sorted(p.relative_to(state) for p in state.rglob("*"))
    started = time.monotonic()
    rc = main([command[0], "-c", str(config), *command[1:]])
    seconds = time.monotonic() - started
    out, err = capfd.readouterr()
    assert rc == 1, err
    reason = (
        "No space left on device (ENOSPC)" if kind == "full" else "Read-only file system (EROFS)"
    )
    assert err.splitlines() == [
        f"mm {command[0]}: error: cannot write state in {state}: {reason}; {EXPECTED}"
    ]
    assert out == ""
    # nothing half-written: the old state file and no temporary file
    assert sorted(p.relative_to(state) for p in state.rglob("*")) == before
    assert (state / "checkpoint" / "A-B" / "store.json").read_text() == '{"kept": true}'
    assert seconds < 5, seconds
