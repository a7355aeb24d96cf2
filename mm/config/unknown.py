"""Keys of a properties file that nothing reads: typos, found before anything starts.

A key is known when the loader uses it (``clusters``, the flow keys globally or as
``X->Y.<key>``, ``<alias>.<client property>``, top-level ``security.protocol``,
``ssl.*``, ``sasl.*``, ``spark.*``, ``mm.state.dir`` and the ``mm.*`` settings,
`mm backup`'s ``backup.*`` keys) or when MirrorMaker 2 / Kafka Connect read it and
we accept it unused (:func:`mm.config.keys.ignored_reason`). Any other key is
unknown: :func:`find_unknown_keys` names it with where it was set (file line or
``MM_*`` variable) and the closest known key, and :func:`report_unknown_keys`
prints one warning line each on stderr, or, in strict mode (``mm.config.strict
= true``, `mm config check --strict`), raises :class:`UnknownConfigKeysError`
(exit 2).
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mm.backup.settings import BACKUP_KEYS
from mm.backup.settings import PREFIX as BACKUP_PREFIX
from mm.config.keys import IGNORED_KEYS, ignored_reason, inherited_client_key
from mm.config.settings import SETTINGS
from mm.errors import ConfigError
from mm.logs import program

__all__ = [
    "UnknownConfigKeysError",
    "UnknownKey",
    "find_unknown_keys",
    "report_unknown_keys",
]

_FLOW_KEY = re.compile(r"(?P<source>[^.]+?)->(?P<target>[^.]+?)\.(?P<key>.+)")


@dataclass(frozen=True)
class UnknownKey:
    key: str
    where: str | None  # "line 7", "from MM_A__B__TOPCS", or None
    closest: str | None

    def message(self) -> str:
        at = f" ({self.where})" if self.where else ""
        hint = (
            f"; did you mean {self.closest}?"
            if self.closest
            else "; no MirrorMaker 2 or mm key is spelt like it"
        )
        return f"unknown config key {self.key}{at}{hint}"


class UnknownConfigKeysError(ConfigError):
    """Unknown keys in strict mode: one line per key, then what to do (exit 2)."""

    def __init__(self, unknown: list[UnknownKey]) -> None:
        expected = "only keys MirrorMaker 2 or mm know (strict mode)"
        super().__init__(unknown[0].key, None, expected)
        lines = [u.message() for u in unknown]
        lines.append(
            f"{len(unknown)} unknown config key{'s' if len(unknown) > 1 else ''}: "
            "fix or remove them (unknown keys are errors with mm.config.strict = true "
            "or `mm config check --strict`)"
        )
        self.unknown = unknown
        self.args = ("\n".join(lines),)


def _flow_keys() -> list[str]:
    from mm.config.loader import FLOW_KEYS

    return sorted({k for pair in FLOW_KEYS.values() for k in pair if k})


def _is_known_flow_key(key: str, flow_keys: list[str]) -> bool:
    return key in flow_keys or ignored_reason(key) is not None


def _is_unknown(key: str, aliases: list[str], flow_keys: list[str]) -> bool:
    """The loader's rules (mm.config.loader), in its order: True if none uses ``key``."""
    head = key.split(".", 1)[0]
    if key == "clusters" or key.startswith("spark."):
        return False
    if m := _FLOW_KEY.fullmatch(key):
        return not _is_known_flow_key(m["key"], flow_keys)
    if key.startswith("mm."):
        name = key.removeprefix("mm.")
        return name != "state.dir" and name not in SETTINGS
    if key in flow_keys:  # "enabled" too: the loader warns that it enables nothing
        return False
    if key.startswith(BACKUP_PREFIX) and key.removeprefix(BACKUP_PREFIX) in BACKUP_KEYS:
        return False
    if head in aliases and "." in key:
        return False  # a cluster's client property (the loader warns about unused ones)
    if inherited_client_key(key):
        return False
    return ignored_reason(key) is None


def _candidates(key: str, aliases: list[str], flow_keys: list[str]) -> list[str]:
    """Known keys a typo of ``key`` most likely meant."""
    if m := _FLOW_KEY.fullmatch(key):
        prefix = f"{m['source']}->{m['target']}."
        return [prefix + k for k in flow_keys]
    if key.startswith("mm."):
        return ["mm.state.dir", *(f"mm.{k}" for k in SETTINGS)]
    if key.startswith(BACKUP_PREFIX) and "backup" not in aliases:
        return [BACKUP_PREFIX + k for k in BACKUP_KEYS]
    flows = [f"{s}->{t}.{k}" for s in aliases for t in aliases if s != t for k in flow_keys]
    return [
        "clusters",
        "security.protocol",
        *flow_keys,
        *IGNORED_KEYS,
        *(f"mm.{k}" for k in SETTINGS),
        *(BACKUP_PREFIX + k for k in BACKUP_KEYS),
        *(f"{a}.bootstrap.servers" for a in aliases),
        *flows,
    ]


def find_unknown_keys(
    props: Mapping[str, str],
    *,
    lines: Mapping[str, int] | None = None,
    sources: Mapping[str, str] | None = None,
) -> list[UnknownKey]:
    """The keys of ``props`` nothing reads, in file order, each with the closest
    known key. ``lines``: key -> line in the file; ``sources``: key -> the ``MM_*``
    variable that set it."""
    aliases = [a.strip() for a in props.get("clusters", "").split(",") if a.strip()]
    if not aliases:
        # the load fails naming clusters; its cluster keys are not typos meanwhile
        aliases = [
            k.removesuffix(".bootstrap.servers") for k in props if k.endswith(".bootstrap.servers")
        ]
    flow_keys = _flow_keys()
    out = []
    for key in props:
        if not _is_unknown(key, aliases, flow_keys):
            continue
        if sources and key in sources:
            where: str | None = f"from {sources[key]}"
        elif lines and key in lines:
            where = f"line {lines[key]}"
        else:
            where = None
        close = difflib.get_close_matches(key, _candidates(key, aliases, flow_keys), 1, 0.6)
        out.append(UnknownKey(key, where, close[0] if close else None))
    return out


def is_strict(props: Mapping[str, str]) -> bool:
    """``mm.config.strict`` (a bad value is a ConfigError naming it)."""
    setting = SETTINGS["config.strict"]
    raw = props.get("mm.config.strict")
    if raw is None:
        return bool(setting.default)
    try:
        return bool(setting.parse(raw))
    except ValueError:
        raise ConfigError("mm.config.strict", raw, setting.expected) from None


def report_unknown_keys(
    unknown: list[UnknownKey], *, strict: bool, warn: Callable[[str], None] | None = None
) -> None:
    """Raise UnknownConfigKeysError (strict), else one warning line per key on
    stderr (``warn`` replaces the printing)."""
    if not unknown:
        return
    if strict:
        raise UnknownConfigKeysError(unknown)
    for u in unknown:
        line = f"{program()}: warning: {u.message()}"
        if warn is not None:
            warn(line)
        else:
            print(line, file=sys.stderr, flush=True)
