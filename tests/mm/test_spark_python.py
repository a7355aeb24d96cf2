"""The ``mm-spark-python`` launcher: same interpreter, PySpark imported byte-compiled."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mm.spark_python import installed_pyspark_zip, without_zip
from mm.spark_session import spark_python

LAUNCHER = Path(sys.executable).parent / "mm-spark-python"
SHOW = (
    "import json, os, sys, pyspark\n"
    "print(json.dumps({'pyspark': pyspark.__file__, 'argv': sys.argv, 'name': __name__,\n"
    "  'path0': sys.path[0], 'env': os.environ.get('PYTHONPATH', ''),\n"
    "  'pid': os.getpid(), 'pgid': os.getpgid(0)}))\n"
)


def _site(tmp: Path, name: str) -> tuple[Path, Path]:
    site = tmp / name
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (lib / "pyspark.zip").write_bytes(b"")
    return site, lib / "pyspark.zip"


@pytest.mark.unit
def test_only_the_installed_pysparks_own_zip_is_dropped(tmp_path: Path) -> None:
    site, own = _site(tmp_path, "site")
    _other_site, foreign = _site(tmp_path, "spark-home")
    path = [str(tmp_path), str(own), str(foreign), "/x/py4j-src.zip", str(site)]
    found = installed_pyspark_zip(path)
    assert found == os.path.realpath(own)
    assert without_zip(path, found) == [str(tmp_path), str(foreign), "/x/py4j-src.zip", str(site)]
    # no installed PySpark on the path: nothing is dropped
    assert installed_pyspark_zip([str(own), str(tmp_path)]) is None
    assert without_zip(path, None) == path


@pytest.mark.unit
def test_spark_python_prefers_the_launcher_for_this_interpreter() -> None:
    assert spark_python("/opt/other/python3") == "/opt/other/python3"
    expected = str(LAUNCHER) if os.access(LAUNCHER, os.X_OK) else sys.executable
    assert spark_python(None) == expected
    assert spark_python(sys.executable) == expected


def _run_launcher(tmp_path: Path, pythonpath: list[str]) -> dict[str, object]:
    (tmp_path / "showpath.py").write_text(SHOW)
    import mm

    # this checkout's mm last (the launcher imports mm.spark_python from the path)
    root = str(Path(mm.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*pythonpath, str(tmp_path), root])}
    out = subprocess.run(
        [str(LAUNCHER), "-m", "showpath", "a", "b"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.unit
def test_launcher_runs_the_module_with_the_installed_pyspark(tmp_path: Path) -> None:
    if not os.access(LAUNCHER, os.X_OK):
        pytest.fail(f"{LAUNCHER} is not installed: reinstall the project (pip install -e .)")
    import pyspark

    pkg = Path(pyspark.__file__).parent
    own_zip = pkg / "python" / "lib" / "pyspark.zip"
    assert own_zip.is_file(), own_zip
    got = _run_launcher(tmp_path, [str(own_zip)])
    assert got["pyspark"] == pyspark.__file__  # byte-compiled package, not the zip
    assert got["argv"] == [str(tmp_path / "showpath.py"), "a", "b"]
    assert got["name"] == "__main__"
    assert got["path0"] == str(tmp_path)  # like `python -m`: the working directory first
    assert str(own_zip) not in str(got["env"])
    # out of the caller's process group: a terminal's Ctrl-C reaches the driver only
    assert got["pgid"] == got["pid"] != os.getpgid(0)

    # a zip that is not the installed PySpark's own copy is kept and wins, as with python -m
    foreign = tmp_path / "spark-home" / "pyspark.zip"
    foreign.parent.mkdir()
    shutil.copy(own_zip, foreign)
    got = _run_launcher(tmp_path, [str(foreign)])
    assert str(got["pyspark"]).startswith(str(foreign)), got


@pytest.mark.unit
def test_a_worker_the_jvm_hung_up_on_ends_quietly() -> None:
    """The daemon's worker, wrapped: a reset or broken connection (the JVM ended the
    task) is the failure code the daemon gives a worker it must not reuse, not a
    traceback; every other outcome is the worker's own."""
    from mm.spark_daemon import quiet_when_hung_up

    def hung_up(error: type[OSError]) -> Any:
        def worker(sock: object, authenticated: bool) -> int:
            raise error(104, "Connection reset by peer")

        return worker

    assert quiet_when_hung_up(hung_up(ConnectionResetError))(None, True) == 1
    assert quiet_when_hung_up(hung_up(BrokenPipeError))(None, True) == 1
    assert quiet_when_hung_up(lambda sock, authenticated: 0)(None, True) == 0
    with pytest.raises(PermissionError):
        quiet_when_hung_up(hung_up(PermissionError))(None, True)


@pytest.mark.unit
def test_an_accumulator_update_the_jvm_hung_up_on_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The driver's accumulator server: an update cut off by Spark stopping (EOFError,
    a reset) prints no traceback; any other error is printed as socketserver does."""
    import socketserver

    from mm.spark_daemon import quiet_accumulator_server

    server = socketserver.BaseServer(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    quiet_accumulator_server(server)
    for error in (EOFError(), ConnectionResetError(104, "reset"), ValueError("bad update")):
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 4242))
    err = capsys.readouterr().err
    assert err.count("Traceback") == 1 and "ValueError: bad update" in err, err
    assert "EOFError" not in err and "ConnectionResetError" not in err, err
    quiet_accumulator_server(None)  # a context without one: nothing to do


def test_spark_workers_run_under_the_quiet_daemon() -> None:
    """A session from build_spark forks its Python workers from mm.spark_daemon, and
    its accumulator server is the quiet one."""
    from mm.spark_session import build_spark

    spark = build_spark("daemon-test", {"spark.master": "local[1]"})
    server = spark.sparkContext._accumulatorServer
    assert "quiet_accumulator_server" in server.handle_error.__qualname__
    try:
        names = (
            spark.sparkContext.parallelize([0], 1)
            .map(lambda _: sys.modules["__main__"].__spec__.name)
            .collect()
        )
    finally:
        spark.stop()
    assert names == ["mm.spark_daemon"]


HANGS_UP = (
    "import socket, sys\n"
    "ours, jvm = socket.socketpair()\n"
    "sock_file = ours.makefile('rwb', 65536)\n"
    "jvm.close()  # the JVM stopped the query and closed the socket\n"
    "try:\n"
    "    if not sock_file.read(4):\n"
    "        raise EOFError\n"
    "except EOFError:\n"
    "    sock_file.write(b'x' * 8)  # the runner sends its error back\n"
    "    sock_file.flush()\n"
)


def _launch_module(tmp_path: Path, name: str, body: str) -> subprocess.CompletedProcess[str]:
    """``mm-spark-python -m <name>`` for a module of ``body``, as Spark starts one."""
    if not os.access(LAUNCHER, os.X_OK):
        pytest.fail(f"{LAUNCHER} is not installed: reinstall the project (pip install -e .)")
    (tmp_path / f"{name}.py").write_text(body)
    import mm

    root = str(Path(mm.__file__).resolve().parent.parent)
    return subprocess.run(
        [str(LAUNCHER), "-m", name],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), root])},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    "body, quiet",
    [
        (HANGS_UP, True),
        ("raise EOFError\n", True),
        ("raise ValueError('a real failure')\n", False),
    ],
)
def test_a_spark_process_the_jvm_hung_up_on_ends_quietly(
    tmp_path: Path, body: str, quiet: bool
) -> None:
    """A Spark Python process (the streaming source's planner, seen: `mm mirror` stopped
    by SIGTERM) whose JVM closed the socket ends with code 1 and no traceback; any
    other exception reaching the top is printed as Python prints it."""
    out = _launch_module(tmp_path, "hangup", body)
    assert out.returncode == 1, out
    if quiet:
        assert out.stderr == "", out.stderr
    else:
        assert "Traceback" in out.stderr and "ValueError: a real failure" in out.stderr, out


# a Spark planner process started after its JVM stopped waiting: the JVM's socket
# listens (here: nobody accepts in time), the authentication gets no answer
LATE = (
    "import os, socket\n"
    "from pyspark.util import local_connect_and_auth\n"
    "jvm = socket.create_server(('127.0.0.1', 0))\n"
    "os.environ['SPARK_AUTH_SOCKET_TIMEOUT'] = '1'\n"
    "local_connect_and_auth(jvm.getsockname()[1], 'secret')\n"
)


@pytest.mark.unit
def test_a_spark_process_its_jvm_stopped_waiting_for_ends_in_one_line(tmp_path: Path) -> None:
    """On a starved host a Spark Python process can start after its JVM's 10 s wait
    ended (seen: `mm run` under a loaded test suite, PySpark's CANNOT_OPEN_SOCKET
    traceback on the driver's stderr while the job restarted the query): code 1 and
    one line naming the module, no traceback."""
    out = _launch_module(tmp_path, "late", LATE)
    assert out.returncode == 1, out
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("mm-spark-python: late started too late for its Spark JVM")
    assert "CANNOT_OPEN_SOCKET" in lines[0]


def _hang_up_on_a_daemon(tmp_path: Path, module: str, reset: bool) -> str:
    """Starts ``mm-spark-python -m <module>`` as Spark starts a worker daemon, asks it
    for a worker the way the JVM does, and hangs up before authenticating (a job
    stopping while Spark asked for a planner worker); the daemon's stderr."""
    import socket
    import struct

    if not os.access(LAUNCHER, os.X_OK):
        pytest.fail(f"{LAUNCHER} is not installed: reinstall the project (pip install -e .)")
    import mm

    root = str(Path(mm.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root, "PYTHON_WORKER_FACTORY_SECRET": "s3cret"}
    env.pop("PYTHON_UNIX_DOMAIN_ENABLED", None)
    err_path = tmp_path / "daemon.err"
    with err_path.open("w") as err:
        daemon = subprocess.Popen(
            [str(LAUNCHER), "-m", module, "pyspark.sql.worker.create_data_source"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    try:
        assert daemon.stdout is not None and daemon.stdin is not None
        (port,) = struct.unpack("!i", daemon.stdout.read(4))
        with socket.create_connection(("127.0.0.1", port), timeout=30) as jvm:
            pid_bytes = b""
            while len(pid_bytes) < 4:  # the forked worker says it is there
                chunk = jvm.recv(4 - len(pid_bytes))
                assert chunk, "the daemon closed the connection before its worker answered"
                pid_bytes += chunk
            if reset:  # a close with unread data pending: the worker reads a reset
                jvm.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        (worker_pid,) = struct.unpack("!i", pid_bytes)
        deadline = time.monotonic() + 30
        while _alive(worker_pid):
            assert time.monotonic() < deadline, f"worker {worker_pid} still running"
            time.sleep(0.05)
        daemon.stdin.close()  # the JVM's end: the daemon shuts down
        daemon.wait(30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    return err_path.read_text()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.unit
@pytest.mark.parametrize("reset", [True, False], ids=["reset", "closed"])
def test_a_planner_worker_hung_up_on_during_its_handshake_prints_nothing(
    tmp_path: Path, reset: bool
) -> None:
    """Spark starts a Python data source's planner workers from PySpark's own daemon
    (``spark.python.daemon.module`` names only the task workers'). Seen: `mm
    checkpoint` stopped by Ctrl-C, a planner worker read a reset connection while
    reading the JVM's secret and the daemon printed its traceback. The launcher runs
    that daemon as the quiet one: the worker ends, nothing is printed."""
    err = _hang_up_on_a_daemon(tmp_path, "pyspark.daemon", reset)
    assert err == "", err
