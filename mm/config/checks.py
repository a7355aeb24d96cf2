"""Checks that need several keys at once: a cluster's security settings, the
identity-policy cycle between two flows, and topic patterns naming internal topics.

:func:`check_config` raises ConfigError (exit 2) for what cannot work; the
loader calls it once every key is valid on its own. :func:`internal_topic_warnings`
returns warning lines for a ``topics`` pattern that asks for topics MM2 (and mm)
never mirror: they are dropped, so the user is told which ones, before anything
starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mm.config.keys import reveal
from mm.config.librdkafka import ROLES
from mm.config.model import ClusterConfig, FlowConfig, MirrorConfig
from mm.errors import ConfigError

__all__ = ["check_config", "internal_topic_warnings"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# the mechanisms whose credentials only sasl.jaas.config (or librdkafka.*) can give
_NEEDS_JAAS = {
    "PLAIN": ("PlainLoginModule", "librdkafka.sasl.username"),
    "SCRAM-SHA-256": ("ScramLoginModule", "librdkafka.sasl.username"),
    "SCRAM-SHA-512": ("ScramLoginModule", "librdkafka.sasl.username"),
    "OAUTHBEARER": ("OAuthBearerLoginModule", "librdkafka.sasl.oauthbearer.config"),
}


def check_config(cfg: MirrorConfig, props: Mapping[str, str]) -> None:
    for cluster in cfg.clusters.values():
        _check_security(cluster)
    _check_identity_cycle(cfg, props)


# --- security -------------------------------------------------------------------------


def _check_security(cluster: ClusterConfig) -> None:
    for role in ROLES:
        props = {k: reveal(v) for k, v in cluster.client_properties(role).items()}
        name = cluster.key_namer(role)
        protocol = props.get("security.protocol", "PLAINTEXT").strip()
        if protocol.upper() not in PROTOCOLS:
            raise ConfigError(name("security.protocol"), protocol, "one of " + ", ".join(PROTOCOLS))
        if not protocol.upper().startswith("SASL_"):
            continue
        mechanism = props.get("sasl.mechanism", "GSSAPI").strip()  # Java's default
        if mechanism.upper() not in MECHANISMS:
            raise ConfigError(
                name("sasl.mechanism"),
                mechanism,
                f"one of {', '.join(MECHANISMS)} (security.protocol is {protocol})",
            )
        needed = _NEEDS_JAAS.get(mechanism.upper())
        if needed and not props.get("sasl.jaas.config") and not props.get(needed[1]):
            raise ConfigError(
                name("sasl.jaas.config"),
                None,
                f"a {needed[0]} entry holding the credentials: sasl.mechanism "
                f"{mechanism.upper()} over {protocol.upper()} cannot log in without them",
            )


# --- identity policy: A->B and B->A -------------------------------------------------------

# names that stand for "any topic" when a flow's topics are a catch-all
_ANY_TOPIC = ("orders", "t", "topic-1")
_LITERAL = re.compile(r"(?:[A-Za-z0-9_\-]|\\\.)+")


def _witnesses(flow: FlowConfig) -> list[str]:
    """Topic names the flow's own patterns spell out literally (``orders``, ``a\\.b``)."""
    return [p.replace("\\.", ".") for p in flow.topics if _LITERAL.fullmatch(p)]


def _overlap(one: FlowConfig, other: FlowConfig) -> str | None:
    """A topic name both flows would mirror, found among the names their patterns
    spell out and a few ordinary names (catch-alls); None when none is found."""
    for name in (*_witnesses(one), *_witnesses(other), *_ANY_TOPIC):
        if one.topic_filter(name) and other.topic_filter(name):
            return name
    return None


def _is_identity(flow: FlowConfig) -> bool:
    return flow.replication_policy_class.rsplit(".", 1)[-1] == "IdentityReplicationPolicy"


def _check_identity_cycle(cfg: MirrorConfig, props: Mapping[str, str]) -> None:
    """MM2 finds cycles from remote topic names; the identity policy keeps names as
    they are, so with A->B and B->A both enabled a topic both select goes round
    for ever (each copy is appended to the other side's topic of the same name)."""
    enabled = {(f.source, f.target): f for f in cfg.enabled_flows()}
    for (src, tgt), flow in enabled.items():
        back = enabled.get((tgt, src))
        if back is None or src > tgt or not (_is_identity(flow) or _is_identity(back)):
            continue
        topic = _overlap(flow, back)
        if topic is None:
            continue
        identity = flow if _is_identity(flow) else back
        key = next(
            (
                k
                for k in (f"{identity.name}.replication.policy.class", "replication.policy.class")
                if k in props
            ),
            "replication.policy.class",
        )
        raise ConfigError(
            key,
            identity.replication_policy_class,
            f"DefaultReplicationPolicy while {flow.name} and {back.name} are both enabled: "
            "with IdentityReplicationPolicy a mirrored topic keeps its name, so MM2 (and mm) "
            f"cannot tell a copy from the original and topic {topic!r}, selected by both "
            "flows, would be mirrored back and forth for ever; or disable one flow, or give "
            f"the two flows topics that do not overlap ({flow.name}.topics, {back.name}.topics)",
        )


# --- topic patterns naming internal topics ---------------------------------------------

# internal topics of Kafka, Connect, MM2 and mm, as a pattern might name them
_INTERNAL_EXAMPLES = (
    "__consumer_offsets",
    "__transaction_state",
    "mm2-offset-syncs.B.internal",
    "A.checkpoints.internal",
    "mm2-configs.A.internal",
    "mm-failover-points.A.internal",
    "connect-offsets-internal",
)
_ORDINARY = ("orders", "payments-v2", "x")


def _alternatives(pattern: str) -> list[str]:
    """``a|b(c|d)`` -> ``['a', 'b(c|d)']``: the pattern split at its top-level ``|``."""
    out, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    out.append(pattern[start:])
    return out


def _internal_named_by(pattern: str) -> list[str]:
    """The internal topics an alternative of ``pattern`` names on purpose: one that
    matches internal names but no ordinary one (``.*`` matches everything: no)."""
    named: list[str] = []
    for alt in _alternatives(pattern):
        try:
            compiled = re.compile(alt)
        except re.error:
            continue  # the whole pattern compiled; a piece alone may not: skip it
        if any(compiled.fullmatch(o) for o in _ORDINARY):
            continue
        named += [t for t in _INTERNAL_EXAMPLES if compiled.fullmatch(t) and t not in named]
    return named


def internal_topic_warnings(cfg: MirrorConfig, props: Mapping[str, str]) -> list[str]:
    """One line per flow whose ``topics`` names internal topics: MM2 never mirrors
    them (Kafka's ``__*``, MM2's and mm's ``*.internal``, Connect's ``*-internal``),
    nor does mm, whatever ``topics`` and ``topics.exclude`` say."""
    lines = []
    for flow in cfg.flows:
        if not flow.enabled:
            continue
        named = [t for p in flow.topics for t in _internal_named_by(p)]
        if not named:
            continue
        key = f"{flow.name}.topics" if f"{flow.name}.topics" in props else "topics"
        shown = ", ".join(dict.fromkeys(named))
        lines.append(
            f"{key} = {','.join(flow.topics)} names internal topics ({shown}), "
            f"which {flow.name} never mirrors: Kafka's __*, MM2's and mm's *.internal and "
            "Connect's *-internal topics are always left out, as in MirrorMaker 2; expected "
            "patterns for application topics only"
        )
    return lines
