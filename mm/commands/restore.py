"""`mm restore`: write a backup back into a cluster, exactly once, with group offsets.

``mm restore -c FILE --to CLUSTER [--topics RE] [--until TIME] [--groups RE]
[--topic-prefix P] [--dry-run] [--json]`` (:mod:`mm.restore.job`). Exit 0 when
every partition was restored and every selected group moved, 1 when a partition
failed or a group was refused, 2 for bad configuration or usage.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from mm.commands.flows import groups_pattern
from mm.errors import UsageError

_CONFIG_HELP = "connect-mirror-maker.properties with backup.* keys (MM2 format)"


def parse_until(raw: str) -> int:
    """``TIME``: milliseconds since the epoch, or an ISO 8601 date-time (UTC when it
    names no zone). Raises UsageError naming the forms."""
    text = raw.strip()
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--until {raw!r}: expected milliseconds since the epoch or an ISO 8601 "
            "date-time such as 2026-11-26T03:00:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", metavar="FILE", default=None, help=_CONFIG_HELP)
    parser.add_argument(
        "--to", metavar="CLUSTER", required=True, help="alias of the cluster to restore into"
    )
    parser.add_argument(
        "--topics", metavar="RE", default=None, help="backed-up topics to restore (full match)"
    )
    parser.add_argument(
        "--until",
        metavar="TIME",
        default=None,
        help="restore each partition up to its first record after TIME (epoch ms or ISO 8601); "
        "groups get the offsets of the last backup run at or before it",
    )
    parser.add_argument(
        "--groups", metavar="RE", default=None, help="consumer groups to restore (full match)"
    )
    parser.add_argument(
        "--topic-prefix",
        metavar="P",
        default="",
        help="restore topic T as P+T (default: the same name)",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="of topics the restore creates (default: the cluster's default)",
    )
    parser.add_argument(
        "--transaction-records",
        type=int,
        default=50_000,
        metavar="N",
        help="records per restore transaction at most (default 50000)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="report what would be restored; write nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds for each cluster operation (default 60)",
    )


def run(args: argparse.Namespace) -> int:
    from mm.config import load_config
    from mm.restore.plan import check_topic_prefix

    if not args.config:
        raise UsageError("no configuration file: pass -c FILE")
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.transaction_records < 1:
        raise UsageError(f"--transaction-records {args.transaction_records}: expected at least 1")
    if args.replication_factor == 0 or args.replication_factor < -1:
        raise UsageError(
            f"--replication-factor {args.replication_factor}: expected -1 (the cluster's "
            "default) or a positive number of replicas"
        )
    for flag, value in (("--topics", args.topics), ("--groups", args.groups)):
        if value is not None:
            groups_pattern(value, flag)  # a bad regex is refused before any cluster is asked
    try:
        prefix = check_topic_prefix(args.topic_prefix)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from mm.restore.job import RestoreOptions, run_restore
    from mm.restore.render import render_restore, restore_json

    options = RestoreOptions(
        to=args.to,
        topics=args.topics,
        until_ms=parse_until(args.until) if args.until is not None else None,
        groups=args.groups,
        topic_prefix=prefix,
        dry_run=args.dry_run,
        timeout=args.timeout,
        replication_factor=args.replication_factor,
        transaction_records=args.transaction_records,
    )
    cfg = load_config(args.config)
    if args.to in cfg.clusters:  # else run_restore says which clusters there are
        from mm.reach import require_reachable

        require_reachable(cfg, [args.to], args.timeout)
    report = run_restore(cfg, options)
    print(restore_json(report) if args.json else render_restore(report))
    return 0 if report.ok else 1
