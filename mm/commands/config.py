"""`mm config check|defaults`: validate a connect-mirror-maker.properties, show defaults.

``check`` loads the file as every job does (``MM_*`` environment overrides
included) and prints the effective settings: clusters, every declared flow, the
``spark.*`` and ``mm.*`` keys, the state directory, and what the loader noted
(ignored or unknown keys), and the raw ``backup.*`` keys (`mm backup` parses
them when it runs). Credentials are always shown as ``******``. An invalid
value is one line on stderr naming key, value and expectation, exit code 2 (the
CLI's ConfigError handling). Log events of the load become the "notes" of the
summary instead of going to stderr.

``defaults`` lists every flow-level key with our default, and MM2's default with
the reason where they differ (``mm.config.defaults_doc``).

mm.config is imported inside the functions: `mm --help` must stay fast.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mm.errors import UsageError

if TYPE_CHECKING:
    from mm.config import ClusterConfig, FlowConfig, MirrorConfig

# FlowConfig fields shown per flow by `check`, in this order
_FLOW_FIELDS = (
    "topics",
    "topics_exclude",
    "groups",
    "groups_exclude",
    "replication_policy_class",
    "replication_policy_separator",
    "offset_syncs_topic_location",
    "emit_checkpoints_enabled",
    "emit_checkpoints_interval_seconds",
    "emit_heartbeats_enabled",
    "emit_heartbeats_interval_seconds",
    "sync_group_offsets_enabled",
    "sync_group_offsets_interval_seconds",
)


def add_parser(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="validate the file (with MM_* overrides) and print the effective settings",
        description="Validate a connect-mirror-maker.properties file, with MM_* environment "
        "overrides applied, and print the effective settings (credentials masked). "
        "Exit 0 if valid, 2 with the offending key on stderr if not.",
    )
    check.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        default=None,
        help="connect-mirror-maker.properties (default: $MM_CONFIG)",
    )
    check.add_argument("--json", action="store_true", help="print the summary as JSON")
    check.add_argument(
        "--strict",
        action="store_true",
        help="unknown keys are an error (exit 2), as with mm.config.strict = true; "
        "without it each is a warning on stderr",
    )
    defaults = actions.add_parser(
        "defaults",
        help="list every flow-level key with our default and MM2's where it differs",
    )
    defaults.add_argument("--json", action="store_true", help="print the list as JSON")


def run(args: argparse.Namespace) -> int:
    if args.action == "check":
        path = args.config or os.environ.get("MM_CONFIG")
        if not path:
            raise UsageError("no configuration file: pass -c FILE or set MM_CONFIG")
        summary = check_summary(path, strict=args.strict)
        print(json.dumps(summary, indent=2, default=str) if args.json else render_check(summary))
        return 0
    rows = defaults_rows()
    print(json.dumps(rows, indent=2) if args.json else render_defaults(rows))
    return 0


# --- check ------------------------------------------------------------------------


def check_summary(path: str, *, strict: bool = False) -> dict[str, Any]:
    """Load ``path`` like a job does; the effective settings as JSON-ready data.

    A ConfigError propagates (unknown keys too when ``strict``); unknown keys are
    warnings on stderr, as for every command, and notes; the log events of a
    successful load become ``notes`` too.
    """
    from structlog.testing import capture_logs

    from mm.config import load_config
    from mm.config.loader import unknown_config_keys

    # the capture only swaps the processors: the configured level still filters
    with capture_logs() as events:
        config = load_config(path, strict=strict)
    unknown = [
        {"log_level": "warning", "event": "unknown config key", "key": u.key}
        | ({"where": u.where} if u.where else {})
        | ({"did_you_mean": u.closest} if u.closest else {})
        for u in unknown_config_keys(path)
    ]
    return _summary(config, path, [*unknown, *events])


def _summary(config: MirrorConfig, path: str, events: list[Any]) -> dict[str, Any]:
    from mm.config.keys import mask_if_secret

    notes = [_note(e) for e in events]
    if not config.enabled_flows():
        notes.append(
            {"level": "warning", "event": "no flow is enabled; set <source>-><target>.enabled=true"}
        )
    return {
        "config": path,
        "state_dir": str(config.state_dir),
        "clusters": [_cluster(c) for c in config.clusters.values()],
        "flows": [_flow(f) for f in config.flows],
        "spark": {k: mask_if_secret(k, v) for k, v in config.spark.items()},
        "mm": {f"mm.{k}": mask_if_secret(k, v) for k, v in config.mm.items()},
        "backup": {f"backup.{k}": mask_if_secret(k, v) for k, v in config.backup.items()},
        "notes": notes,
    }


def _cluster(cluster: ClusterConfig) -> dict[str, Any]:
    from mm.config.keys import mask_if_secret

    client = {k: mask_if_secret(k, v) for k, v in sorted(cluster.client.items())}
    return {
        "alias": cluster.alias,
        "bootstrap.servers": list(cluster.bootstrap_servers),
        "security.protocol": client.pop("security.protocol", "PLAINTEXT"),
        "mm.broker.profile": cluster.broker_profile,
        "client": client,
        "inherited": sorted(cluster.inherited),
    }


def _flow(flow: FlowConfig) -> dict[str, Any]:
    from mm.config.keys import mask_if_secret
    from mm.config.loader import FLOW_KEYS

    return {
        "flow": flow.name,
        "enabled": flow.enabled,
        **{FLOW_KEYS[f][0]: _json_value(getattr(flow, f)) for f in _FLOW_FIELDS},
        "other": {k: mask_if_secret(k, v) for k, v in flow.other.items()},
    }


def _note(event: Mapping[str, Any]) -> dict[str, Any]:
    rest = {k: v for k, v in event.items() if k not in ("event", "log_level", "component")}
    return {"level": event.get("log_level", "info"), "event": str(event.get("event")), **rest}


def render_check(summary: Mapping[str, Any]) -> str:
    lines = [*_aligned({"config": summary["config"], "state dir": summary["state_dir"]}, 0)]
    lines += ["", "clusters"]
    for c in summary["clusters"]:
        inherited = set(c["inherited"])
        rows = {
            "bootstrap.servers": c["bootstrap.servers"],
            "security.protocol": c["security.protocol"],
            "mm.broker.profile": c["mm.broker.profile"],
        }
        rows |= {k + (" (top-level)" if k in inherited else ""): v for k, v in c["client"].items()}
        lines += [f"  {c['alias']}", *_aligned(rows, 4)]
    lines += ["", "flows"]
    for f in summary["flows"]:
        rows = {k: v for k, v in f.items() if k not in ("flow", "enabled", "other")}
        rows |= f["other"]
        state = "enabled" if f["enabled"] else "disabled"
        lines += [f"  {f['flow']} ({state})", *_aligned(rows, 4)]
    if not summary["flows"]:
        lines.append("  (none declared)")
    for section in ("spark", "mm", "backup"):
        if summary.get(section):
            lines += ["", section, *_aligned(summary[section], 2)]
    if summary["notes"]:
        lines += ["", "notes"]
        for n in summary["notes"]:
            detail = ", ".join(
                f"{k}={_text(v)}" for k, v in n.items() if k not in ("level", "event")
            )
            lines.append(f"  {n['level']}: {n['event']}" + (f" ({detail})" if detail else ""))
    return "\n".join(lines)


# --- defaults ---------------------------------------------------------------------


def defaults_rows() -> list[dict[str, Any]]:
    """Every flow-level key: our default, MM2's, and why they differ (None if equal)."""
    from mm.config import FlowConfig
    from mm.config.defaults_doc import MM2_DIFFERENCES
    from mm.config.loader import FLOW_KEYS

    rows = []
    for field, (key, _old) in FLOW_KEYS.items():
        ours = _json_value(FlowConfig.model_fields[field].default)
        diff = MM2_DIFFERENCES.get(key)
        rows.append(
            {
                "key": key,
                "ours": ours,
                "mm2": ours if diff is None else _json_value(diff.mm2),
                "why": None if diff is None else diff.why,
            }
        )
    return rows + settings_rows()


def settings_rows() -> list[dict[str, Any]]:
    """Our own ``mm.*`` settings (not MM2's): default and what each does."""
    from mm.config.settings import SETTINGS

    return [
        {"key": f"mm.{s.key}", "ours": s.default, "mm2": None, "why": None, "about": s.description}
        for s in SETTINGS.values()
    ]


def render_defaults(rows: list[dict[str, Any]]) -> str:
    lines = [
        "Flow-level keys and our defaults. Set a key for every flow as <key>, or for one",
        "flow as <source>-><target>.<key> (enabled only per flow). * differs from MM2.",
        "",
    ]
    ours = [r for r in rows if "about" in r]
    rows = [r for r in rows if "about" not in r]
    lines += _aligned({r["key"]: f"{_text(r['ours'])}{' *' if r['why'] else ''}" for r in rows}, 2)
    lines += ["", "Our own mm.* settings (not MM2's; checked when a file is loaded):", ""]
    lines += _aligned({r["key"]: f"{_text(r['ours'])}  {r['about']}" for r in ours}, 2)
    differing = [r for r in rows if r["why"]]
    if differing:
        table = [("key", "ours", "MM2", "why")]
        table += [(r["key"], _text(r["ours"]), _text(r["mm2"]), r["why"]) for r in differing]
        widths = [max(len(row[i]) for row in table) for i in range(3)]
        lines += ["", "* Defaults that differ from MirrorMaker 2:"]
        lines += [
            "  "
            + "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
            for row in table
        ]
    return "\n".join(lines)


# --- formatting -------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _text(value: Any) -> str:
    """A value as MM2 would spell it: lists comma-separated, booleans lower case."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "(none)"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) if value else "(none)"
    return str(value)


def _aligned(rows: Mapping[str, Any], indent: int) -> Iterable[str]:
    width = max((len(k) for k in rows), default=0)
    return [f"{' ' * indent}{k.ljust(width)}  {_text(v)}".rstrip() for k, v in rows.items()]
