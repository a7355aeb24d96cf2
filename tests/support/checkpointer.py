"""A flow's checkpointer for pure tests: fed offset-sync rows and asked directly.

Its Kafka clients are built lazily and never are here (the clusters' addresses
are never contacted)."""

from __future__ import annotations

from pathlib import Path

from mm.checkpoint.emitter import FlowCheckpointer
from mm.config import build_config


def offline_checkpointer(state_dir: Path) -> FlowCheckpointer:
    """The A->B flow's checkpointer, its snapshot under ``state_dir``."""
    cfg = build_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:9092",
            "B.bootstrap.servers": "b:9092",
            "A->B.enabled": "true",
            "mm.state.dir": str(state_dir),
        }
    )
    return FlowCheckpointer(cfg, cfg.enabled_flows()[0])
