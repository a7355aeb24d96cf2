"""Options shared by the commands: `-c/--config FILE` and `--flow SRC->TGT` (one flow,
or several), and the one place flows are selected."""

from __future__ import annotations

import argparse
import re

from mm.config import FlowConfig, MirrorConfig
from mm.errors import ConfigError, UsageError


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--config",
        required=True,
        metavar="FILE",
        help="connect-mirror-maker.properties (MM2 format)",
    )


def add_flow_option(parser: argparse.ArgumentParser, default_help: str) -> None:
    parser.add_argument(
        "--flow",
        action="append",
        metavar="SRC->TGT",
        help=f"only these flows (default: {default_help})",
    )


def add_one_flow_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--flow",
        metavar="SRC->TGT",
        help=f"flow whose {what} (default: the only enabled flow)",
    )


def one_flow(cfg: MirrorConfig, name: str | None) -> FlowConfig:
    """The flow named ``SRC->TGT`` (any declared flow), else the only enabled one."""
    from mm.errors import UsageError

    if name:
        source, sep, target = name.partition("->")
        try:
            if not sep:
                raise KeyError(name)
            return cfg.flow(source.strip(), target.strip())
        except KeyError:
            names = sorted(f.name for f in cfg.flows)
            raise ConfigError("--flow", name, f"one of the configured flows {names}") from None
    enabled = cfg.enabled_flows()
    if len(enabled) != 1:
        names = sorted(f.name for f in enabled)
        raise UsageError(
            f"--flow is required: {len(enabled)} enabled flows ({', '.join(names) or 'none'})"
        )
    return enabled[0]


def select_flows(
    cfg: MirrorConfig, names: list[str] | None, *, enabled_only: bool = False
) -> list[FlowConfig]:
    """The flows named with --flow (any declared flow), else every enabled flow.

    ``enabled_only``: the jobs that write (mirror, checkpoint, heartbeat) refuse a
    disabled flow named with --flow, as MM2 never runs one; commands that only read
    (status, verify) accept it."""
    if not names:
        return cfg.enabled_flows()
    declared = {f.name: f for f in cfg.flows}
    for name in names:
        if name not in declared:
            raise ConfigError("--flow", name, f"one of the configured flows {sorted(declared)}")
        if enabled_only and not declared[name].enabled:
            raise ConfigError(
                "--flow",
                name,
                f"an enabled flow: {name}.enabled is not true in the properties file "
                f"(set {name}.enabled = true to run it)",
            )
    return [f for f in cfg.flows if f.name in names]


def require_flow_clusters(
    cfg: MirrorConfig, flows: list[FlowConfig], timeout: float | None = None
) -> None:
    """Refuse to start (one line, exit 1) unless the source and target of every
    flow in ``flows`` answer within ``timeout`` (default: mm.reach.STARTUP_TIMEOUT),
    before Spark or any client loop starts (see :mod:`mm.reach`)."""
    from mm.reach import STARTUP_TIMEOUT, require_reachable

    aliases = {f.source for f in flows} | {f.target for f in flows}
    require_reachable(cfg, aliases, STARTUP_TIMEOUT if timeout is None else timeout)


def groups_pattern(value: str | None, flag: str = "--groups") -> re.Pattern[str] | None:
    """``--groups REGEX`` compiled (None when not given); a bad regex is a usage error."""
    if value is None:
        return None
    try:
        return re.compile(value)
    except re.error as exc:
        raise UsageError(
            f"{flag} {value!r} is not a valid regex: {exc}; expected a Python regular "
            "expression matching whole names"
        ) from None
