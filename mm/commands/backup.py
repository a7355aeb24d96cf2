"""`mm backup`: copy a cluster's topics to Parquet segments (local or S3), list them.

``mm backup -c FILE --once``: one pass (:mod:`mm.backup.job`), a per-partition
table and totals; exit 0 when every partition was backed up, 1 when a task (or a
group's offsets) failed, 2 for bad configuration or usage. ``mm backup -c FILE``:
continuous, a pass every ``backup.interval.ms`` (:mod:`mm.backup.continuous`)
until SIGTERM/SIGINT, then one ``backup stopped`` line and exit 0. ``mm backup ls
-c FILE [--json]``: what the catalogs hold, per partition. ``mm backup verify`` (exit 1
when the store is not consistent) and ``mm backup rebuild-index``: see
:mod:`mm.backup.verify` and :mod:`mm.backup.reindex`.
``mm backup compact -c FILE [--level N] [--dry-run] [--json]``: merges runs of
level-N segments into level N+1 and applies ``backup.retention.ms``
(:mod:`mm.backup.compaction`); exit 1 when a partition failed.
"""

from __future__ import annotations

import argparse

from mm.errors import UsageError

_CONFIG_HELP = "connect-mirror-maker.properties with backup.* keys (MM2 format)"


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", metavar="FILE", default=None, help=_CONFIG_HELP)
    parser.add_argument(
        "--once",
        action="store_true",
        help="back up what the topics hold now, commit, exit (without it: a pass every "
        "backup.interval.ms until SIGTERM/SIGINT)",
    )
    parser.add_argument("--json", action="store_true", help="print the --once report as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds for each cluster operation, and a partition's longest wait for data "
        "(default 60)",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    ls = actions.add_parser(
        "ls",
        help="list what the backup holds per partition (from the catalogs only)",
        description="Per topic and partition: the visible segments' offset range, time "
        "range, records, bytes, levels and lost offsets, read from the catalogs only.",
    )
    # SUPPRESS: `mm backup -c FILE ls` keeps the -c given before the action
    ls.add_argument("-c", "--config", metavar="FILE", default=argparse.SUPPRESS, help=_CONFIG_HELP)
    ls.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the list as JSON"
    )
    compact = actions.add_parser(
        "compact",
        help="merge runs of small segments into the next level; delete expired segments",
        description="Merges runs of consecutive level-N segments of each partition into one "
        "level-N+1 segment (backup.compact.* keys), after deleting the segments "
        "backup.retention.ms expires. Runs on Spark, one task per partition with work.",
    )
    compact.add_argument(
        "-c", "--config", metavar="FILE", default=argparse.SUPPRESS, help=_CONFIG_HELP
    )
    compact.add_argument(
        "--level",
        type=int,
        default=0,
        metavar="N",
        help="merge level-N segments into level N+1 (default 0: what the backup wrote)",
    )
    compact.add_argument(
        "--dry-run", action="store_true", help="print what would be done; change nothing"
    )
    compact.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the report as JSON"
    )
    _add_verify_actions(actions)


def _add_verify_actions(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = actions.add_parser(
        "verify",
        help="read every visible segment back and check files, footers and catalogs agree",
        description="Per partition: the catalog loads, every visible segment file is read in "
        "full and agrees with its key, footer and catalog entry, and the index rebuilt from "
        "the files equals the catalog. Exit 0 when consistent, 1 when not.",
    )
    reindex = actions.add_parser(
        "rebuild-index",
        help="rebuild each partition's catalog from its segment files and commit it",
        description="Per partition: the catalog rebuilt from the segment files, committed as "
        "a new version; refused where a copy or delete is in flight unless --force.",
    )
    for p in (verify, reindex):
        p.add_argument(
            "-c", "--config", metavar="FILE", default=argparse.SUPPRESS, help=_CONFIG_HELP
        )
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
        p.add_argument(
            "--topics", metavar="RE", default=None, help="only topics this regex fully matches"
        )
    reindex.add_argument(
        "--dry-run", action="store_true", help="print what would change, commit nothing"
    )
    reindex.add_argument(
        "--force",
        action="store_true",
        help="rebuild also where a copy or delete is in flight (it is forgotten)",
    )


def _run_verify_action(args: argparse.Namespace) -> int:
    from mm.backup.inventory import topic_filter
    from mm.config import load_config

    topics = topic_filter(args.topics)
    cfg = load_config(args.config)
    if args.action == "verify":
        from mm.backup.verify import verify_backup
        from mm.backup.verify_render import render_verify, verify_json

        report = verify_backup(cfg, topics)
        print(verify_json(report) if args.json else render_verify(report))
        return 0 if report.ok else 1
    from mm.backup.reindex import rebuild_index
    from mm.backup.verify_render import reindex_json, render_reindex

    result = rebuild_index(cfg, topics, dry_run=args.dry_run, force=args.force)
    print(reindex_json(result) if args.json else render_reindex(result))
    return 0 if result.ok else 1


def run(args: argparse.Namespace) -> int:
    from mm.config import load_config

    if not args.config:
        raise UsageError("no configuration file: pass -c FILE")
    if args.action == "ls":
        from mm.backup.job import list_backup
        from mm.backup.render import ls_json, render_ls

        settings, listings = list_backup(load_config(args.config))
        out = ls_json if args.json else render_ls
        print(out(settings.region, settings.path, listings))
        return 0
    if args.action in ("verify", "rebuild-index"):
        return _run_verify_action(args)
    if args.action == "compact":
        return _compact(args)
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if not args.once:
        if args.json:
            raise UsageError(
                "--json goes with --once or ls: a continuous backup reports each pass in its log"
            )
        from mm.backup.continuous import run_backup_continuous

        totals = run_backup_continuous(load_config(args.config), timeout=args.timeout)
        print(totals.stopped_line())
        return 0
    from mm.backup.continuous import check_config
    from mm.backup.job import run_backup_once
    from mm.backup.render import once_json, render_once
    from mm.backup.settings import backup_settings
    from mm.reach import require_reachable

    cfg = load_config(args.config)
    check_config(cfg)  # configuration first (exit 2), then whether the cluster answers
    # a continuous backup retries an unreachable cluster instead (each pass)
    require_reachable(cfg, [backup_settings(cfg).cluster], args.timeout)
    report = run_backup_once(cfg, timeout=args.timeout)
    print(once_json(report) if args.json else render_once(report))
    return 0 if report.ok else 1


def _compact(args: argparse.Namespace) -> int:
    from mm.backup.layout import MAX_LEVEL

    if not 0 <= args.level < MAX_LEVEL:
        raise UsageError(f"--level {args.level}: expected 0 <= N < {MAX_LEVEL}")
    from mm.backup.compact_job import run_compact
    from mm.backup.compact_render import compact_json, render_compact
    from mm.config import load_config

    report = run_compact(load_config(args.config), level=args.level, dry_run=args.dry_run)
    print(compact_json(report) if args.json else render_compact(report))
    return 0 if report.ok else 1
