"""The state file of `mm embedded up`: which processes to find again for status/down."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mm.embedded import procs
from mm.errors import MirrorError

STATE_ENV = "MM_EMBEDDED_STATE"
DEFAULT_STATE_FILE = Path(".mm-embedded") / "state.json"
FORMAT_VERSION = 1


def state_path(given: str | os.PathLike[str] | None = None) -> Path:
    """--state-file, else $MM_EMBEDDED_STATE, else .mm-embedded/state.json (cwd)."""
    return Path(given or os.environ.get(STATE_ENV) or DEFAULT_STATE_FILE)


@dataclass
class Proc:
    pid: int
    # Start time guards against signalling a recycled pid (None off Linux).
    start_time: int | None = None

    @classmethod
    def of(cls, pid: int) -> Proc:
        return cls(pid, procs.start_time(pid))

    def alive(self) -> bool:
        return procs.pid_alive(self.pid, self.start_time)


@dataclass
class ClusterState:
    name: str
    bootstrap_servers: str
    log_path: str
    storage_engine: str
    proc: Proc
    # the broker profile (mm.kafka.profile); files written before it: the embedded broker
    profile: str = "embedded"


@dataclass
class State:
    run_dir: str
    detached: bool
    clusters: list[ClusterState]
    moto: Proc | None = None
    # The foreground `mm embedded up` process, which `down` asks to shut down first.
    owner: Proc | None = None
    version: int = field(default=FORMAT_VERSION)

    def processes(self) -> list[Proc]:
        found = [c.proc for c in self.clusters]
        return [*found, self.moto] if self.moto else found

    def any_alive(self) -> bool:
        return any(p.alive() for p in self.processes()) or bool(self.owner and self.owner.alive())

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)  # readers never see a half-written file

    @classmethod
    def read(cls, path: Path) -> State | None:
        try:
            raw: dict[str, Any] = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise MirrorError(f"cannot read embedded state file {path}: {exc}") from exc
        try:
            return cls(
                run_dir=raw["run_dir"],
                detached=bool(raw["detached"]),
                clusters=[
                    ClusterState(**{**c, "proc": Proc(**c["proc"])}) for c in raw["clusters"]
                ],
                moto=Proc(**raw["moto"]) if raw.get("moto") else None,
                owner=Proc(**raw["owner"]) if raw.get("owner") else None,
                version=int(raw.get("version", FORMAT_VERSION)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MirrorError(f"malformed embedded state file {path}: {exc!r}") from exc
