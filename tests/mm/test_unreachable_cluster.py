"""A wrong bootstrap address: one line naming the cluster and the address, exit 1,
within the command's timeout, and none of librdkafka's ``%3|...|FAIL|`` lines.

The unit tests run each command in-process (nothing answers on port 1, so no
broker and no Spark is involved: the check refuses before either would start)
and capture file descriptor 2, where librdkafka writes when no logger is set.
The integration test runs every command as `mm` would be run, in parallel, with
the default timeouts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

from mm import cli, reach

UNUSED = "127.0.0.1:1"  # a privileged port nothing listens on: connection refused

# (command line after `mm`, whether it takes --timeout)
COMMANDS: list[tuple[list[str], bool]] = [
    (["mirror", "--once"], False),
    (["checkpoint", "--once"], False),
    (["heartbeat", "--once"], False),
    (["status"], True),
    (["verify"], True),
    (["backup", "--once"], True),
    (["restore", "--to", "A", "--dry-run"], True),
]


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "mm.properties"
    path.write_text(
        "\n".join(
            [
                "clusters = A, B",
                f"A.bootstrap.servers = {UNUSED}",
                f"B.bootstrap.servers = {UNUSED}",
                "A->B.enabled = true",
                "A->B.topics = orders",
                "backup.cluster = A",
                f"backup.path = {tmp_path / 'backup'}",
                f"mm.state.dir = {tmp_path / 'state'}",
            ]
        )
        + "\n"
    )
    return path


def _name(argv: list[str]) -> str:
    return " ".join(argv)


def _check_output(command: str, rc: int, stderr: str, timeout: float) -> None:
    assert rc == 1, f"exit {rc}\n{stderr[-3000:]}"
    assert "%3|" not in stderr and "|FAIL|" not in stderr, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    # JSON log lines (the command's own start-up events) aside, exactly one line
    lines = [line for line in stderr.splitlines() if line and not line.startswith("{")]
    assert len(lines) == 1, stderr[-3000:]
    # the alias and the address; A is the first cluster every one of them needs
    expected = f"cluster A ({UNUSED}) did not answer within {timeout:g}s: connection refused"
    assert lines[0].startswith(f"mm {command}: "), lines
    assert expected in lines[0], lines


@pytest.mark.unit
@pytest.mark.parametrize("argv,has_timeout", COMMANDS, ids=[_name(c) for c, _ in COMMANDS])
def test_unreachable_cluster_is_one_line_naming_it(
    argv: list[str],
    has_timeout: bool,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeout = 1.5
    monkeypatch.setattr(reach, "STARTUP_TIMEOUT", timeout)
    args = [argv[0], "-c", str(_config(tmp_path)), *argv[1:]]
    if has_timeout:
        args += ["--timeout", str(timeout)]
    started = time.monotonic()
    rc = cli.main(args)
    seconds = time.monotonic() - started
    out, err = capfd.readouterr()
    _check_output(argv[0], rc, err, timeout)
    assert out == ""
    # the wait is the timeout (a refused broker may be restarting), then no more
    assert timeout <= seconds < timeout + 5, seconds


@pytest.mark.unit
def test_every_unreachable_cluster_is_named_in_one_line(tmp_path: Path) -> None:
    from mm.config import load_config

    cfg = load_config(str(_config(tmp_path)))
    with pytest.raises(reach.ClusterUnreachableError) as caught:
        reach.require_reachable(cfg, ["B", "A", "A"], 1.0)
    text = str(caught.value)
    assert "\n" not in text
    assert text == (
        f"cluster A ({UNUSED}) did not answer within 1s: connection refused; "
        f"cluster B ({UNUSED}) did not answer within 1s: connection refused"
    )


class _Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # from the start of all of them to this one's exit


def _start_all(argvs: list[list[str]], cwd: Path) -> list[_Ran]:
    """Every ``mm <argv>`` started at once, as an operator's scripts would."""
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "mm", *argv],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for argv in argvs
    ]

    def wait(proc: subprocess.Popen[str]) -> _Ran:
        out, err = proc.communicate(timeout=90)
        return _Ran(proc.returncode, out, err, time.monotonic() - started)

    with ThreadPoolExecutor(len(procs)) as pool:
        return list(pool.map(wait, procs))


@pytest.mark.integration
def test_unreachable_cluster_with_the_default_timeouts(tmp_path: Path) -> None:
    """As an operator runs them: subprocesses, default timeouts, all at once. Each
    waits its timeout and no more: every command ends within the timeout plus 5 s
    after the slowest of the same commands' ``--help``, started with them, ended
    (what interpreter start and imports take on this host at that moment: on a loaded
    2-core host 8-15 s)."""
    config = _config(tmp_path)
    argvs = [
        # status alone defaults to 15 s: the others' 10 s is given to it
        [argv[0], "-c", str(config), *argv[1:], *(["--timeout", "10"] if has_timeout else [])]
        for argv, has_timeout in COMMANDS
    ]
    ran = _start_all(argvs + [[argv[0], "--help"] for argv, _ in COMMANDS], tmp_path)
    commands, helps = ran[: len(COMMANDS)], ran[len(COMMANDS) :]
    assert [h.returncode for h in helps] == [0] * len(COMMANDS), helps[0].stderr
    for done, (argv, _) in zip(commands, COMMANDS, strict=True):
        _check_output(argv[0], done.returncode, done.stderr, reach.STARTUP_TIMEOUT)
        assert done.stdout == ""
    start_up = max(h.seconds for h in helps)
    slowest = max(c.seconds for c in commands)
    print(f"start-up (--help) {start_up:.1f}s, the slowest command {slowest:.1f}s")
    assert slowest < start_up + reach.STARTUP_TIMEOUT + 5, (slowest, start_up)


@pytest.mark.unit
def test_status_reports_the_flows_of_a_silent_cluster_unavailable_naming_it(
    tmp_path: Path,
) -> None:
    """With some cluster answering, `mm status` still reports (the others' flows
    are what an operator needs in a disaster); the silent one's flows are
    unavailable, with the alias, the address and the reason, not waited for again."""
    from mm.config import load_config
    from mm.status.collect import collect

    cfg = load_config(str(_config(tmp_path)))
    why = f"cluster B ({UNUSED}) did not answer within 3s: connection refused"
    started = time.monotonic()
    report = collect(cfg, cfg.enabled_flows(), 3.0, down={"B": why})
    assert time.monotonic() - started < 1.0  # B is not asked again
    assert [f.error for f in report.flows] == [f"target {why}"]
    assert not report.ok
    assert [a.kind for a in report.alerts] == ["unavailable"]
    assert f"target {why}" in report.alerts[0].message
