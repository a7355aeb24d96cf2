"""Build a ``MirrorConfig`` from ``connect-mirror-maker.properties`` and ``MM_*`` variables.

How each top-level key is read, first rule that applies:

1. ``clusters``: the aliases.
2. ``X->Y.<key>``: declares flow X->Y; ``<key>`` overrides the global key for it.
3. ``spark.*`` -> ``MirrorConfig.spark``; ``mm.state.dir`` -> ``state_dir``; other
   ``mm.*`` -> ``MirrorConfig.mm``; `mm backup`'s keys (``backup.path`` ...,
   :data:`mm.backup.settings.BACKUP_KEYS`) -> ``MirrorConfig.backup``, parsed
   only by `mm backup`.
4. a global flow key (``topics``, ``emit.checkpoints.interval.seconds`` ...): the
   default for every flow.
5. ``<alias>.<key>`` for a listed alias: that cluster's client settings.
6. top-level ``security.protocol``, ``ssl.*``, ``sasl.*``: inherited by every
   cluster that does not set them (as MM2 does).
7. anything else: kept in ``MirrorConfig.other``; MM2/Connect keys we ignore are
   logged at info. An unknown ``backup.*`` key (no cluster is called ``backup``)
   also goes to ``MirrorConfig.backup``.

Unknown keys (typos: ``A->B.topcs``, ``mm.mirror.trigger.second``,
``backup.pth``) are found by :mod:`mm.config.unknown` when :func:`load_config`
reads the file, before anything starts: one warning line each on stderr with the
closest known key, or, with ``mm.config.strict = true`` (or ``strict=True``), a
ConfigError listing them (exit 2). :func:`build_config` itself does not report them.

Every invalid value raises ``ConfigError(key, value, expected)`` with the key as
written (``primary->backup.emit.checkpoints.interval.seconds``); secrets show as
``******``. Pydantic's own errors never escape.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import ValidationError

from mm.backup.settings import is_backup_key
from mm.config.env import apply_env_overrides
from mm.config.keys import (
    ignored_reason,
    inherited_client_key,
    is_secret_key,
    mask_if_secret,
)
from mm.config.librdkafka import ROLES, to_librdkafka
from mm.config.model import ClusterConfig, FlowConfig, MirrorConfig
from mm.config.properties import load_properties_with_lines
from mm.config.settings import parse_settings
from mm.errors import ConfigError
from mm.kafka.profile import PROFILES, broker_profile
from mm.logs import get_logger

if TYPE_CHECKING:
    from mm.config.unknown import UnknownKey

__all__ = ["FLOW_KEYS", "build_config", "load_config", "unknown_config_keys"]


def _log() -> Any:
    # bound per call: a logger bound at import would miss configure_logging()
    return get_logger("mm.config")


# FlowConfig field -> (MM2 key, deprecated MM2 alias or None)
def _flow_keys() -> dict[str, tuple[str, str | None]]:
    out: dict[str, tuple[str, str | None]] = {}
    for name, field in FlowConfig.model_fields.items():
        extra = field.json_schema_extra
        if isinstance(extra, dict) and "property" in extra:
            old = extra.get("deprecated")
            out[name] = (str(extra["property"]), str(old) if old else None)
    return out


FLOW_KEYS = _flow_keys()
_GLOBAL_FLOW_KEYS = {
    key: field
    for field, (prop, old) in FLOW_KEYS.items()
    if field != "enabled"  # a flow is enabled only by its own X->Y.enabled
    for key in (prop, old)
    if key
}
_FLOW_KEY = re.compile(r"(?P<source>[^.]+?)->(?P<target>[^.]+?)\.(?P<key>.+)")
_ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")
_PROVIDER_REF = re.compile(r"\$\{[^}]*:[^}]*\}")


def load_config(
    path: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
    *,
    strict: bool = False,
    check_keys: bool = True,
) -> MirrorConfig:
    """Read ``path`` (None: no file), apply ``MM_*`` overrides from ``env`` (default
    ``os.environ``, see ``mm.config.env``) and validate the result.

    Unknown keys are reported first (``check_keys``): a warning line each on stderr,
    or an UnknownConfigKeysError when ``strict`` or ``mm.config.strict = true``.
    """
    from mm.config.unknown import (
        UnknownConfigKeysError,
        find_unknown_keys,
        is_strict,
        report_unknown_keys,
    )

    props, sources, lines = _effective(path, env)
    try:
        if check_keys:
            unknown = find_unknown_keys(props, lines=lines, sources=sources)
            report_unknown_keys(unknown, strict=strict or is_strict(props))
        cfg = build_config(props, config_path=Path(path) if path is not None else None)
        if check_keys:
            _warn_internal_topics(cfg, props)
        return cfg
    except ConfigError as exc:
        if exc.key not in sources or isinstance(exc, UnknownConfigKeysError):
            raise
        # the value came from the environment: say which variable to fix
        raise ConfigError(f"{exc.key} (from {sources[exc.key]})", exc.value, exc.expected) from None


def _warn_internal_topics(cfg: MirrorConfig, props: Mapping[str, str]) -> None:
    """Topics patterns naming internal topics: a warning line each on stderr, before
    anything starts (they are never mirrored; the user should know)."""
    import sys

    from mm.config.checks import internal_topic_warnings
    from mm.logs import program

    for line in internal_topic_warnings(cfg, props):
        print(f"{program()}: warning: {line}", file=sys.stderr, flush=True)


def _effective(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] | None
) -> tuple[dict[str, str], dict[str, str], dict[str, int]]:
    """(properties, {key: MM_* variable that set it}, {key: line in the file})."""
    props, lines = load_properties_with_lines(path) if path is not None else ({}, {})
    known = [*_GLOBAL_FLOW_KEYS, "enabled", "clusters", "mm.state.dir"]
    merged, sources = apply_env_overrides(
        props, os.environ if env is None else env, known_keys=known
    )
    return merged, sources, lines


def unknown_config_keys(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> list[UnknownKey]:
    """The unknown keys :func:`load_config` reports for this file and environment."""
    from mm.config.unknown import find_unknown_keys

    props, sources, lines = _effective(path, env)
    return find_unknown_keys(props, lines=lines, sources=sources)


def effective_properties(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The file's properties with ``MM_*`` overrides applied, unvalidated.

    Jobs hand these to Spark-side code, which rebuilds the config with
    :func:`build_config` (a pydantic model does not travel as a Spark option).
    """
    return dict(_effective(path, env)[0])


def build_config(
    props: Mapping[str, str], *, config_path: Path | None = None, cwd: Path | None = None
) -> MirrorConfig:
    """Validate raw properties into a MirrorConfig (no file, no environment)."""
    aliases = _aliases(props)
    flow_keys: dict[tuple[str, str], dict[str, str]] = {}  # (src, tgt) -> {key: original key}
    cluster_keys: dict[str, dict[str, str]] = {a: {} for a in aliases}
    inherited: dict[str, str] = {}
    spark: dict[str, str] = {}
    mm: dict[str, str] = {}
    backup: dict[str, str] = {}
    other: dict[str, str] = {}
    for key, value in props.items():
        head = key.split(".", 1)[0]
        if key == "clusters":
            continue
        if m := _FLOW_KEY.fullmatch(key):
            flow_keys.setdefault((m["source"], m["target"]), {})[m["key"]] = key
        elif key.startswith("spark."):
            spark[key] = value
        elif key.startswith("mm."):
            if key != "mm.state.dir":
                mm[key.removeprefix("mm.")] = value
        elif key in _GLOBAL_FLOW_KEYS:
            continue
        elif is_backup_key(key):
            # before the cluster keys: an alias "backup" does not own backup.path
            backup[key.removeprefix("backup.")] = value
        elif head in cluster_keys and "." in key:
            cluster_keys[head][key.removeprefix(f"{head}.")] = key
        elif head == "backup" and "." in key:
            backup[key.removeprefix("backup.")] = value  # unknown: see mm.config.unknown
        elif inherited_client_key(key):
            inherited[key] = value
        else:
            other[key] = value
            _note_unused(key)
    _warn_unresolved_references(props)
    settings = parse_settings(mm)  # unknown mm.* keys: see mm.config.unknown
    clusters = {
        a: _cluster(a, cluster_keys[a], inherited, props, settings["broker.profile"])
        for a in aliases
    }
    # global flow keys are checked even when no flow is declared yet
    _validated_flow(aliases[0], aliases[-1], "", props, {})
    flows = tuple(_flow(src, tgt, keys, props, aliases) for (src, tgt), keys in flow_keys.items())
    cfg = MirrorConfig(
        clusters=clusters,
        flows=flows,
        spark=spark,
        state_dir=_state_dir(props, cwd),
        mm=mm,
        backup=backup,
        settings=settings,
        other=other,
        config_path=config_path,
    )
    from mm.config.checks import check_config

    check_config(cfg, props)  # what needs several keys at once
    return cfg


def _aliases(props: Mapping[str, str]) -> list[str]:
    raw = props.get("clusters")
    expected = "a comma-separated list of one or more cluster aliases"
    aliases = list(dict.fromkeys(a.strip() for a in (raw or "").split(",") if a.strip()))
    if not aliases:
        raise ConfigError("clusters", raw, expected)
    for alias in aliases:
        if not _ALIAS.fullmatch(alias):
            raise ConfigError(
                "clusters", raw, f"{expected} of letters, digits, '-' and '_' ({alias!r} is not)"
            )
    return aliases


def _note_unused(key: str, *, shown: str | None = None) -> None:
    """Log an MM2 key we keep but do not use; ``shown`` is its spelling in the file.

    Unknown keys are reported by load_config (mm.config.unknown), not here."""
    shown = shown or key
    if (reason := ignored_reason(key)) is not None:
        _log().info("config key accepted and ignored", key=shown, reason=reason)
    elif key == "enabled":
        _log().warning("config key ignored", key=shown, reason="enable each flow with X->Y.enabled")


def _warn_unresolved_references(props: Mapping[str, str]) -> None:
    refs = sorted(k for k, v in props.items() if _PROVIDER_REF.search(v))
    if refs and "config.providers" in props:
        _log().warning(
            "config provider references are not resolved; values are used literally", keys=refs
        )


def _cluster(
    alias: str,
    keys: dict[str, str],
    inherited: dict[str, str],
    props: Mapping[str, str],
    default_profile: str,
) -> ClusterConfig:
    client: dict[str, Any] = {
        prop: _client_value(prop, props[original])
        for prop, original in keys.items()
        if prop not in ("bootstrap.servers", PROFILE_KEY)
    }
    from_top = {k: _client_value(k, v) for k, v in inherited.items() if k not in client}
    bootstrap_key = f"{alias}.bootstrap.servers"
    raw = {
        "alias": alias,
        "bootstrap_servers": props.get(bootstrap_key),
        "client": {**from_top, **client},
        "inherited": frozenset(from_top),
        "broker_profile": _profile(alias, keys, props, default_profile),
    }
    if raw["bootstrap_servers"] is None:
        raise ConfigError(
            bootstrap_key, None, f"host:port[,host:port...] for cluster {alias!r} of clusters"
        )
    try:
        cluster = ClusterConfig.model_validate(raw)
    except ValidationError as exc:
        _raise_config_error(exc, {"bootstrap_servers": bootstrap_key}, raw, lambda f: alias)
    _check_client_conversion(cluster)
    return cluster


PROFILE_KEY = "mm.broker.profile"  # <alias>.mm.broker.profile (see mm.kafka.profile)


def _profile(alias: str, keys: dict[str, str], props: Mapping[str, str], default: str) -> str:
    if PROFILE_KEY not in keys:
        return default
    raw = props[keys[PROFILE_KEY]]
    try:
        return broker_profile(raw).name
    except ValueError:
        raise ConfigError(f"{alias}.{PROFILE_KEY}", raw, f"one of {', '.join(PROFILES)}") from None


def _client_value(prop: str, value: str) -> str:
    # Java trims most typed client settings; credentials are taken verbatim
    return value if is_secret_key(prop) else value.strip()


def _check_client_conversion(cluster: ClusterConfig) -> None:
    """Fail at load, not in a Spark task, if our clients cannot use these settings."""
    dropped: set[str] = set()
    for role in ROLES:
        _conf, unknown = to_librdkafka(
            cluster.client_properties(role), role, key_name=cluster.key_namer(role)
        )
        dropped.update(unknown)
    if dropped:
        _log().warning(
            "client properties without a librdkafka equivalent are not used",
            cluster=cluster.alias,
            keys=sorted(dropped),
        )


def _flow(
    source: str,
    target: str,
    keys: dict[str, str],
    props: Mapping[str, str],
    aliases: list[str],
) -> FlowConfig:
    first_key = next(iter(keys.values()))
    for alias in (source, target):
        if alias not in aliases:
            raise ConfigError(
                first_key, alias, f"a cluster alias listed in clusters ({', '.join(aliases)})"
            )
    if source == target:
        raise ConfigError(first_key, f"{source}->{target}", "a flow between two different clusters")
    prefix = f"{source}->{target}."
    modelled = {k for pair in FLOW_KEYS.values() for k in pair if k}
    other = {k: props[orig] for k, orig in keys.items() if k not in modelled}
    for key in other:
        _note_unused(key, shown=prefix + key)
    return _validated_flow(source, target, prefix, props, other)


def _validated_flow(
    source: str, target: str, prefix: str, props: Mapping[str, str], other: dict[str, str]
) -> FlowConfig:
    """FlowConfig from ``<prefix><key>`` (if a prefix is given), else the global ``<key>``."""
    raw: dict[str, Any] = {"source": source, "target": target, "other": other}
    origins: dict[str, str] = {}
    for field, (prop, old) in FLOW_KEYS.items():
        names = [prop, old] if old else [prop]
        candidates = [prefix + n for n in names] if prefix else []
        if field != "enabled":
            candidates += names
        found = next((c for c in candidates if c in props), None)
        if found is not None:
            raw[field], origins[field] = props[found], found
    try:
        return FlowConfig.model_validate(raw)
    except ValidationError as exc:
        _raise_config_error(exc, origins, raw, lambda f: prefix + FLOW_KEYS.get(f, (f, None))[0])


def _state_dir(props: Mapping[str, str], cwd: Path | None) -> Path:
    raw = props.get("mm.state.dir", "mm-state").strip()
    if not raw:
        raise ConfigError("mm.state.dir", props.get("mm.state.dir"), "a directory path")
    path = Path(raw).expanduser()
    return path if path.is_absolute() else (cwd or Path.cwd()) / path


def _raise_config_error(
    exc: ValidationError,
    origins: Mapping[str, str],
    raw: Mapping[str, Any],
    fallback_key: Callable[[str], str],
) -> NoReturn:
    err = exc.errors()[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    key = origins.get(field) or fallback_key(field)
    expected = str((err.get("ctx") or {}).get("expected") or err["msg"])
    raise ConfigError(key, mask_if_secret(key, raw.get(field)), expected) from None
