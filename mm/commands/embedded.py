"""`mm embedded up|down|status|fetch-kafka`: local clusters for demos and tests, on
Apache Kafka where its jars are present (`fetch-kafka` gets them), else on the
embedded broker (Tansu)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import threading
from pathlib import Path
from typing import Any

from mm.embedded import probe, procs
from mm.embedded.clusters import BROKERS, EmbeddedClusters
from mm.embedded.kafka_jars import KAFKA_VERSION, cache_dir, fetch_jars
from mm.embedded.state import ClusterState, Proc, State, state_path
from mm.errors import MirrorError, UsageError
from mm.logs import get_logger
from mm.signals import stop_on_signals


def _log() -> Any:
    # Looked up per call: mm.logs.get_logger binds eagerly, and these modules are
    # imported before the CLI configures logging.
    return get_logger("mm.commands.embedded")


# Names become MM_<NAME>__BOOTSTRAP_SERVERS, so they must be shell-variable safe.
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# `down` gives a foreground `up` this long to stop its own brokers.
OWNER_GRACE = 15.0


def add_parser(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start the clusters and print their addresses")
    up.add_argument(
        "--clusters", default="A,B", help="comma-separated cluster names (default: A,B)"
    )
    up.add_argument(
        "--durable",
        action="store_true",
        help="clusters that survive a broker restart (Apache Kafka's always do; the "
        "embedded broker keeps data on a local S3 (moto) server)",
    )
    add_broker_option(up)
    up.add_argument(
        "--detach", action="store_true", help="leave the brokers running in the background"
    )
    fetch = actions.add_parser(
        "fetch-kafka",
        help=f"copy Apache Kafka {KAFKA_VERSION}'s jars from Maven Central into the user "
        "cache (once; needs Maven), and print the directory",
    )
    fetch.add_argument("--dir", default=None, help=f"another directory (default: {cache_dir()})")
    down = actions.add_parser("down", help="stop the clusters of the state file")
    status = actions.add_parser("status", help="show whether each cluster answers (exit 1 if not)")
    for sp in (up, down, status):
        sp.add_argument(
            "--state-file",
            default=None,
            help="state file (default: $MM_EMBEDDED_STATE or .mm-embedded/state.json)",
        )


def add_broker_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default="auto",
        help="the clusters' broker: Apache Kafka (its jars from `mm embedded fetch-kafka`), "
        "the embedded broker (Tansu), or auto (default): Apache Kafka when its jars are there",
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "fetch-kafka":
        print(fetch_jars(Path(args.dir) if args.dir else None), flush=True)
        return 0
    path = state_path(args.state_file)
    if args.action == "up":
        return _up(
            _parse_names(args.clusters),
            path,
            durable=args.durable,
            detach=args.detach,
            broker=args.broker,
        )
    if args.action == "down":
        return _down(path)
    return _status(path)


def _parse_names(raw: str) -> list[str]:
    names = [n.strip() for n in raw.split(",") if n.strip()]
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if not names or bad:
        raise UsageError(
            f"--clusters {raw!r}: expected comma-separated names of letters, digits and _"
        )
    if len(set(names)) != len(names):
        raise UsageError(f"--clusters {raw!r}: duplicate name")
    return names


def _up(names: list[str], path: Path, *, durable: bool, detach: bool, broker: str) -> int:
    old = State.read(path)
    if old is not None and old.any_alive():
        raise MirrorError(
            f"embedded clusters are already running (state file {path});"
            " stop them with `mm embedded down`"
        )
    stop = threading.Event()
    if not detach:
        stop_on_signals(stop, signals=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    # PDEATHSIG only in the foreground: detached brokers must outlive this process.
    clusters = EmbeddedClusters(path.parent, broker=broker, die_with_parent=not detach)
    try:
        clusters.start(names, durable=durable)
        state = _state_of(clusters, detached=detach)
        state.write(path)
    except BaseException:
        clusters.stop()
        raise
    _print_addresses(state)
    if detach:
        clusters.release()
        print(f"state: {path}; stop with `mm embedded down`", flush=True)
        return 0
    print("running; stop with Ctrl-C or `mm embedded down`", flush=True)
    try:
        return _wait(clusters, stop)
    finally:
        clusters.stop()
        # `down` may already have removed it, or another `up` replaced it.
        current = _read_quietly(path)
        if current is not None and current.owner and current.owner.pid == os.getpid():
            path.unlink(missing_ok=True)


def _wait(clusters: EmbeddedClusters, stop: threading.Event) -> int:
    while not stop.wait(0.5):
        dead = [c.name for c in clusters.clusters.values() if not c.is_running()]
        if dead:
            _log().error("embedded broker exited", clusters=dead, run_dir=str(clusters.run_dir))
            return 1
    _log().info("stopping embedded clusters")
    return 0


def _state_of(clusters: EmbeddedClusters, *, detached: bool) -> State:
    infos = clusters.infos().values()
    if any(i.pid is None for i in infos):
        raise MirrorError("an embedded broker is not running")
    moto_pid = clusters.moto.pid if clusters.moto else None
    return State(
        run_dir=str(clusters.run_dir),
        detached=detached,
        clusters=[
            ClusterState(
                i.name,
                i.bootstrap_servers,
                str(i.log_path),
                i.storage_engine,
                Proc.of(i.pid or 0),
                i.profile,
            )
            for i in infos
        ],
        moto=Proc.of(moto_pid) if moto_pid else None,
        owner=None if detached else Proc.of(os.getpid()),
    )


def _print_addresses(state: State) -> None:
    width = max(len(c.name) for c in state.clusters)
    for c in state.clusters:
        print(f"{c.name:<{width}}  {c.bootstrap_servers}")
    print()
    for c in state.clusters:
        print(f"export MM_{c.name}__BOOTSTRAP_SERVERS={c.bootstrap_servers}")
        # the broker's profile (mm.kafka.profile): where brokers differ
        print(f"export MM_{c.name}__MM_BROKER_PROFILE={c.profile}")
    print(f"# broker logs: {state.run_dir}", flush=True)


def _read_quietly(path: Path) -> State | None:
    try:
        return State.read(path)
    except MirrorError:
        return None


def _down(path: Path) -> int:
    state = State.read(path)
    if state is None:
        print(f"no embedded clusters (no state file {path})")
        return 0
    owner = state.owner
    if owner is not None and owner.alive():
        # Ask the foreground `up` to stop its brokers itself; kill it if it won't.
        os.kill(owner.pid, signal.SIGTERM)
        if not procs.wait_gone(owner.alive, OWNER_GRACE) and owner.alive():
            os.kill(owner.pid, signal.SIGKILL)
    gone = procs.stop_pids([(p.pid, p.start_time) for p in state.processes()])
    if not gone:
        left = [p.pid for p in state.processes() if p.alive()]
        print(f"could not stop embedded processes {left}; state file kept at {path}")
        return 1
    path.unlink(missing_ok=True)
    print(f"stopped {', '.join(c.name for c in state.clusters)}")
    return 0


def _status(path: Path) -> int:
    state = State.read(path)
    if state is None:
        print(f"no embedded clusters (no state file {path})")
        return 1
    width = max((len(c.name) for c in state.clusters), default=1)
    all_up = True
    for c in state.clusters:
        if c.profile == "embedded":  # the embedded broker reports the name as cluster id
            up = c.proc.alive() and probe.cluster_id(c.bootstrap_servers, timeout=2.0) == c.name
        else:
            up = c.proc.alive() and probe.answers_metadata(c.bootstrap_servers, timeout=2.0)
        all_up = all_up and up
        word = "up" if up else "DOWN"
        print(f"{c.name:<{width}}  {c.bootstrap_servers}  {word}  (log {c.log_path})")
    return 0 if all_up else 1
