"""Options shared by the commands: `-c/--config FILE` and `--flow SRC->TGT`."""

from __future__ import annotations

import argparse

from mm.config import FlowConfig, MirrorConfig
from mm.errors import ConfigError


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


def select_flows(cfg: MirrorConfig, names: list[str] | None) -> list[FlowConfig]:
    """The flows named with --flow (any declared flow), else every enabled flow."""
    if not names:
        return cfg.enabled_flows()
    declared = {f.name for f in cfg.flows}
    for name in names:
        if name not in declared:
            raise ConfigError("--flow", name, f"one of the configured flows {sorted(declared)}")
    return [f for f in cfg.flows if f.name in names]
