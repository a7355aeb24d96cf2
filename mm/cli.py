"""The `mm` command line: one subcommand per job or tool.

Each subcommand lives in ``mm.commands.<name>`` and exposes ``add_parser`` and
``run``; modules are imported lazily so `mm --help` stays fast and never starts
a JVM.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from mm import __version__
from mm.errors import ConfigError, MirrorError, UsageError

# (name, module, one-line help). Later issues add their commands here.
COMMANDS: list[tuple[str, str, str]] = [
    (
        "embedded",
        "mm.commands.embedded",
        "local clusters: Apache Kafka, or the embedded broker",
    ),
    ("demo", "mm.commands.demo", "mirror a demo topic between two embedded clusters, then verify"),
    (
        "drill",
        "mm.commands.drill",
        "a disaster-recovery drill on embedded clusters: switchover, failover, failback, figures",
    ),
    (
        "run",
        "mm.commands.run",
        "mirror, checkpoint and heartbeat of every enabled flow in one process, restarted on "
        "failure",
    ),
    ("mirror", "mm.commands.mirror", "mirror every enabled flow X->Y on Spark (exactly once)"),
    (
        "position",
        "mm.commands.position",
        "show or set the mirror's positions (next source offset) for a source topic",
    ),
    (
        "config",
        "mm.commands.config",
        "validate a connect-mirror-maker.properties file and show the effective settings",
    ),
    (
        "checkpoint",
        "mm.commands.checkpoint",
        "translate consumer-group offsets into MM2 checkpoints on the target (exact)",
    ),
    ("translate", "mm.commands.translate", "print a group's translated offsets on the target"),
    ("failover", "mm.commands.failover", "move idle consumer groups to their translated offsets"),
    (
        "failback",
        "mm.commands.failback",
        "with the old primary back: report and quarantine what it holds past the failover point",
    ),
    (
        "switchover",
        "mm.commands.switchover",
        "planned move of consumer groups to the target, with proof of 0 lost / 0 duplicated",
    ),
    (
        "heartbeat",
        "mm.commands.heartbeat",
        "emit MM2 heartbeats into each flow's source cluster (replication latency)",
    ),
    (
        "status",
        "mm.commands.status",
        "replication latency, record lag, checkpoint age and truncation per flow; alerts",
    ),
    (
        "backup",
        "mm.commands.backup",
        "back up a cluster's topics and group offsets to Parquet segments (local or S3); list them",
    ),
    (
        "restore",
        "mm.commands.restore",
        "restore a backup into a cluster, exactly once, with consumer group offsets",
    ),
    (
        "verify",
        "mm.commands.verify",
        "prove a mirror complete and exact: records, position, offset syncs, translations, "
        "checkpoints",
    ),
]

DEFAULT_STATE_DIR_HELP = "./mm-state"

EPILOG = f"""\
Configuration is MirrorMaker 2's connect-mirror-maker.properties, read unchanged.
MM_-prefixed environment variables override it (MM_A__BOOTSTRAP_SERVERS overrides
A.bootstrap.servers). Jobs keep Spark checkpoints and state under mm.state.dir
(default: {DEFAULT_STATE_DIR_HELP} under the working directory).
Exit codes: 0 ok (also a long-running job stopped by SIGTERM or Ctrl-C), 1 failure
or refused operation (a cluster that does not answer too), 2 invalid configuration
or usage.
"""
# commands that read no configuration file (they start or use embedded clusters)
NO_CONFIG = {"embedded", "demo"}
EPILOG_NO_CONFIG = (
    "Exit codes: 0 ok, 1 failure or refused operation, 2 invalid configuration or usage.\n"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mm",
        description="Kafka disaster recovery on Apache Spark: mirror A to B with exact "
        "offset translation, checkpoints, heartbeats and failover.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mm {__version__}")
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO (default), WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name, help_text in COMMANDS:
        module = importlib.import_module(module_name)
        sp = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=EPILOG_NO_CONFIG if name in NO_CONFIG else EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_parser(sp)
        sp.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    from mm.logs import configure_logging, set_program

    configure_logging(args.log_level)
    set_program(f"mm {args.command}")
    from confluent_kafka import KafkaException
    from mm_client.kafka.errors import wrap

    try:
        return int(args._run(args) or 0)
    except ConfigError as exc:
        for line in str(exc).splitlines():  # several for unknown keys in strict mode
            print(f"mm {args.command}: {line}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"mm {args.command}: {exc}", file=sys.stderr)
        return 2
    except MirrorError as exc:
        print(f"mm {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KafkaException as exc:
        # librdkafka refusing to build a client (an unreadable CA or keystore, an
        # unsupported SASL mechanism) raises at construction, outside every wrap():
        # one line naming the setting, not a traceback
        print(f"mm {args.command}: error: {wrap(exc, 'Kafka client')}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
