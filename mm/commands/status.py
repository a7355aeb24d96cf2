"""`mm status`: replication latency, record lag, checkpoint age and truncation per flow.

Exit codes: 0 no threshold breached, 1 an alert (a breached ``mm.alert.*``
threshold, detected truncation, an unreachable cluster), 2 invalid configuration.
``--watch`` refreshes in place until Ctrl-C (exit code of the last refresh);
``--serve PORT`` exposes the numbers as Prometheus metrics, refreshed every
``--interval`` seconds, until SIGTERM/SIGINT (exit 0). In both, each round's source
end offsets are published to the target for `mm failover` (:mod:`mm.status.publish`).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from typing import Any

from mm.commands.flows import add_config_option
from mm.config import MirrorConfig, load_config
from mm.signals import StopBound, cluster_probe, off_the_main_thread, stop_on_signals

THRESHOLDS_HELP = """\
Alert thresholds (mm.* keys of the properties file; a value above one is an alert):
  mm.alert.replication.latency.ms   newest heartbeat's age on the target (default 30000)
  mm.alert.record.lag               records behind, per partition (default 100000)
  mm.alert.checkpoint.age.seconds   age of a group's newest checkpoint while the group
                                    has moved since (default 300)
Source records deleted before they were mirrored, and an unreachable cluster, are
always alerts. See docs/metrics.md.
"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.epilog = THRESHOLDS_HELP + "\n" + (parser.epilog or "")
    add_config_option(parser)
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.add_argument(
        "--watch", action="store_true", help="refresh in place every --interval seconds"
    )
    parser.add_argument(
        "--serve",
        type=int,
        metavar="PORT",
        default=None,
        help="serve Prometheus metrics on PORT (http://HOST:PORT/metrics), refreshed every "
        "--interval seconds",
    )
    parser.add_argument(
        "--bind",
        default="0.0.0.0",
        metavar="ADDRESS",
        help="address --serve listens on (default 0.0.0.0)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="refresh period of --watch and --serve (default 5)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="give up on a cluster that does not answer within this (default 15)",
    )
    parser.add_argument(
        "--flow",
        action="append",
        metavar="SRC->TGT",
        help="only these flows (default: every enabled flow)",
    )


def run(args: argparse.Namespace) -> int:
    from mm.commands.flows import select_flows
    from mm.errors import ConfigError, UsageError
    from mm.status.collect import collect

    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.interval <= 0:
        raise UsageError("--interval must be a positive number of seconds")
    if args.serve is not None and not 0 <= args.serve <= 65535:
        raise UsageError("--serve PORT must be 0-65535")
    cfg = load_config(args.config)
    flows = select_flows(cfg, args.flow)
    if not flows:
        raise ConfigError(
            "clusters",
            ",".join(cfg.clusters),
            "at least one enabled flow (e.g. A->B.enabled = true)",
        )

    from mm.reach import ClusterUnreachableError, unreachable

    aliases = {f.source for f in flows} | {f.target for f in flows}
    one_shot = not args.watch and args.serve is None

    def once() -> Any:
        # clusters that do not answer are named once (alias, address, reason),
        # and their flows reported unavailable without a second wait
        down = unreachable(cfg, aliases, args.timeout)
        if one_shot and set(down) == aliases:
            # nothing answered: no report to show, one line (--watch and --serve
            # keep running and show the flows unavailable)
            raise ClusterUnreachableError("; ".join(down.values()))
        return collect(cfg, flows, args.timeout, down=down)

    if one_shot:
        report = once()
        _print(report, as_json=args.json)
        return 0 if report.ok else 1
    return _loop(args, once, cfg)


def _print(report: Any, *, as_json: bool, compact: bool = False) -> None:
    from mm.status.render import make_console, render, to_json

    if as_json:
        if compact:
            import json

            print(json.dumps(report.to_json()), flush=True)
        else:
            print(to_json(report), flush=True)
    else:
        make_console().print(render(report))


def _loop(args: argparse.Namespace, once: Callable[[], Any], cfg: MirrorConfig) -> int:
    from mm.logs import get_logger

    log = get_logger("mm.status")
    stop = threading.Event()
    # a round blocked on a frozen cluster (30 s timeouts, one after another) would
    # hold the stop: bounded as every long-running job's (mm.signals.StopBound)
    bound = StopBound("status", log, cluster_probe(cfg, cfg.enabled_flows()))
    restore = stop_on_signals(stop, log, bound=bound)
    collector = server = None
    from mm.status.publish import StatusEnds

    # what each round saw of the sources, for `mm failover` when the mirror is down
    ends = StatusEnds(cfg, log.warning)
    if args.serve is not None:
        from mm.metrics import serve_status

        collector, server = serve_status(args.serve, args.bind)
        log.info("serving status metrics", port=server.port, address=args.bind)
    live = None
    report = None
    try:
        if args.watch and not args.json:
            from rich.live import Live

            from mm.status.render import make_console

            live = Live(console=make_console(), auto_refresh=False, transient=False)
            live.start()
        while not stop.is_set():
            started = time.monotonic()
            report = off_the_main_thread(once)  # the stop is heard while a round waits
            ends.publish(report)
            if collector is not None:
                collector.update(report)
            if live is not None:
                from mm.status.render import render

                live.update(render(report), refresh=True)
            elif args.watch or args.json:
                _print(report, as_json=args.json, compact=True)
            else:
                log.info(
                    "status collected",
                    alerts=[f"{a.flow}: {a.message}" for a in report.alerts],
                    seconds=round(time.monotonic() - started, 3),
                )
            stop.wait(max(0.0, args.interval - (time.monotonic() - started)))
    finally:
        if live is not None:
            live.stop()
        if server is not None:
            server.close()
        ends.close()
        restore()
        if stop.is_set():
            bound.finished()  # in time: else the bound's line is the last
            log.info("status stopped on request")
    if args.serve is not None or report is None:
        return 0
    return 0 if report.ok else 1
