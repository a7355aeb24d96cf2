"""`mm drill -c FILE` on the user's own clusters: names, the derived config, the
cleanup plan (pure: no cluster is contacted here).

A run owns everything it creates through one mark, ``drill-<8 hex>``, in every name:

- its topics and groups: ``mm-drill-<hex>-<scenario>``, ``mm-drill-<hex>-<scenario>-<speed>``;
- its cluster aliases: ``drill-<hex>-<user alias>``. Every name the mirror, checkpoint
  and DR commands derive from a flow (state group ``__mm.mirror.<src>.<tgt>``,
  transactional ids ``mm.<src>.<tgt>...``, offset-syncs, checkpoints, mirror-ends,
  offset-history and failover-points topics, remote topics ``<src>.<topic>``) therefore
  carries the mark and differs from what the user's own flow uses.

So cleanup deletes exactly the topics and groups whose name carries the mark, on both
clusters, and nothing else. The one fixed name the jobs would share with the user is
the ``heartbeats`` topic on A: the drill runs no `mm heartbeat`
(``emit.heartbeats.enabled = false``). Its mirror still copies A's heartbeats topics
as MM2 always does (reading them only), into remote topics that carry the mark.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mm.config import FlowConfig, MirrorConfig
from mm.errors import ConfigError, UsageError
from mm.kafka.committed import reader_of

# the drill's flow keys, which beat whatever the user's flow (or a global key) says
_FLOW_OVERRIDES = (
    "enabled",
    "topics",
    "topics.exclude",
    "topics.blacklist",
    "groups",
    "groups.exclude",
    "groups.blacklist",
    "emit.checkpoints.enabled",
    "emit.checkpoints.interval.seconds",
    "emit.heartbeats.enabled",
    "refresh.groups.interval.seconds",
    "errors.deadletterqueue.topic.name",
)


def new_mark() -> str:
    return f"drill-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class DrillNames:
    """Every name of one drill run. Embedded runs: prefix ``drill``, aliases A and B."""

    prefix: str  # of topics, groups and transactional ids
    source: str  # alias of A in the drill's config
    target: str  # alias of B in the drill's config
    mark: str = ""  # in every name the run creates (external runs only)

    @property
    def flow(self) -> str:
        return f"{self.source}->{self.target}"

    def topic(self, scenario: str) -> str:
        return f"{self.prefix}-{scenario}"

    def group(self, scenario: str, speed: str) -> str:
        return f"{self.prefix}-{scenario}-{speed}"

    def groups_regex(self, scenario: str | None = None) -> str:
        return re.escape(self.prefix if scenario is None else self.topic(scenario)) + "-.*"

    def owns(self, name: str) -> bool:
        return bool(self.mark) and self.mark in name


def external_names(mark: str, user_source: str, user_target: str) -> DrillNames:
    return DrillNames(f"mm-{mark}", f"{mark}-{user_source}", f"{mark}-{user_target}", mark)


@dataclass(frozen=True)
class ExternalSetup:
    """What a `-c FILE` drill runs with: its names, its config, what the report says."""

    names: DrillNames
    user_source: str
    user_target: str
    properties: dict[str, str]  # the drill's own properties file (holds the credentials)
    bootstrap: dict[str, str]  # user alias -> bootstrap servers (no credentials)
    warnings: list[str] = field(default_factory=list)


def prepare_external(
    cfg: MirrorConfig,
    props: Mapping[str, str],
    flow: FlowConfig,
    *,
    mark: str,
    state_dir: Path,
    scenarios: Sequence[str],
    topics_created: Iterable[str] = ("switchover", "failover", "ready"),
) -> ExternalSetup:
    """The drill's setup for ``flow`` of the user's config; UsageError when that flow
    cannot carry a drill. ``props`` are the file's raw properties (``MM_*`` applied)."""
    src, tgt = cfg.cluster(flow.source), cfg.cluster(flow.target)
    if set(src.bootstrap_servers) & set(tgt.bootstrap_servers):
        raise UsageError(
            f"flow {flow.name}: {flow.source} and {flow.target} share bootstrap servers "
            f"({', '.join(sorted(set(src.bootstrap_servers) & set(tgt.bootstrap_servers)))}): "
            "a drill needs two clusters"
        )
    reading = [s for s in scenarios if s in ("switchover", "failback")]
    for cluster in (src, tgt) if reading else ():
        # only a cluster whose broker profile needs the raw reader, on TLS or SASL
        try:
            reader_of(cluster).check(f"the drill's {' and '.join(reading)} scenario")
        except ConfigError as exc:
            raise UsageError(f"flow {flow.name}: {exc}; run --scenarios failover") from None
    names = external_names(mark, flow.source, flow.target)
    if {names.source, names.target} & set(cfg.clusters):
        raise UsageError(f"the file already has a cluster alias {names.source} or {names.target}")
    warnings = []
    mirrored = [names.topic(t) for t in topics_created if flow.topic_filter(names.topic(t))]
    if flow.enabled and mirrored:
        # the user's running mirror copies them too: B gets its own remote copies, which
        # cleanup deletes (they carry the mark), but its checkpoints stay in its topics
        warnings.append(
            f"your flow {flow.name} selects the drill's topics (e.g. {mirrored[0]}): if its "
            "mirror runs, it copies them to B too; cleanup deletes those copies"
        )
    return ExternalSetup(
        names=names,
        user_source=flow.source,
        user_target=flow.target,
        properties=derive_properties(props, flow.source, flow.target, names, state_dir),
        bootstrap={a: ",".join(cfg.cluster(a).bootstrap_servers) for a in (src.alias, tgt.alias)},
        warnings=warnings,
    )


def derive_properties(
    props: Mapping[str, str],
    user_source: str,
    user_target: str,
    names: DrillNames,
    state_dir: Path,
) -> dict[str, str]:
    """The user's properties with the two clusters and their flow renamed to the drill's
    aliases, other clusters and flows dropped, and the drill's own flow settings."""
    aliases = [a.strip() for a in props.get("clusters", "").split(",") if a.strip()]
    rename = {user_source: names.source, user_target: names.target}
    user_flow = f"{user_source}->{user_target}."
    out: dict[str, str] = {"clusters": f"{names.source}, {names.target}"}
    for key, value in props.items():
        head = key.split(".", 1)[0]
        if key in ("clusters", "mm.state.dir"):
            continue
        if "->" in head:
            if key.startswith(user_flow):
                rest = key.removeprefix(user_flow)
                if rest not in _FLOW_OVERRIDES:
                    out[f"{names.flow}.{rest}"] = value
            continue  # another flow
        if head in aliases and "." in key:
            if head in rename:
                out[f"{rename[head]}.{key.removeprefix(head + '.')}"] = value
            continue  # another cluster
        out[key] = value  # global: security, client defaults, flow defaults, spark, mm
    drill_flow = {
        "enabled": "true",
        "topics": re.escape(names.prefix) + "-.*",
        # the model's default exclusions: a user's may exclude the drill's names
        "topics.exclude": r".*[\-\.]internal, .*\.replica, __.*",
        "groups": names.groups_regex(),
        "groups.exclude": "__.*",
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": "1",
        # `mm heartbeat` writes to A's fixed `heartbeats` topic: the user's
        "emit.heartbeats.enabled": "false",
        # the drill's groups appear after the checkpoint job started
        "refresh.groups.interval.seconds": "2",
        # a dead letter topic would be the user's
        "errors.deadletterqueue.topic.name": "",
    }
    out.update({f"{names.flow}.{k}": v for k, v in drill_flow.items()})
    # the disaster SIGKILLs the mirror mid-transaction: its open transaction holds
    # read_committed readers on B until it times out (default 120 s)
    out[f"{names.target}.producer.transaction.timeout.ms"] = "10000"
    out["mm.state.dir"] = str(state_dir)
    return out


def render_properties(props: Mapping[str, str]) -> str:
    """A properties file (keys and values escaped as java.util.Properties reads them)."""
    lines = ["# written by mm drill -c: the user's two clusters under the drill's aliases"]
    for key, value in props.items():
        lines.append(f"{_escape(key, key=True)} = {_escape(value)}")
    return "\n".join(lines) + "\n"


def _escape(text: str, *, key: bool = False) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif (key and ch in " =:") or (ch in "#!" and i == 0) or (ch == " " and i == 0):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True)
class CleanupPlan:
    topics: dict[str, list[str]]  # cluster (user alias) -> topics to delete
    groups: dict[str, list[str]]  # cluster (user alias) -> groups to delete


def cleanup_plan(
    names: DrillNames,
    topics: Mapping[str, Iterable[str]],
    groups: Mapping[str, Iterable[str]],
) -> CleanupPlan:
    """Of the topics and groups listed per cluster, the run's own (those carrying its
    mark), sorted."""
    if not names.mark:
        raise ValueError("an embedded drill has nothing to clean up on its clusters")
    return CleanupPlan(
        {c: sorted(t for t in ts if names.owns(t)) for c, ts in topics.items()},
        {c: sorted(g for g in gs if names.owns(g)) for c, gs in groups.items()},
    )
