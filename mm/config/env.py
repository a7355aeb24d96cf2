"""``MM_*`` environment variables that override properties-file keys.

Scheme: strip ``MM_``, split the rest on double underscores ``__``:

==================================  ======================================
environment variable                property key
==================================  ======================================
``MM_<KEY>``                        ``<key>`` (top level)
``MM_<ALIAS>__<KEY>``               ``<alias>.<key>`` (one cluster)
``MM_<SOURCE>__<TARGET>__<KEY>``    ``<source>-><target>.<key>`` (a flow)
==================================  ======================================

Inside ``<KEY>`` a single ``_`` stands for ``.``. Aliases match the ``clusters``
list case-insensitively (``MM_CLUSTERS`` itself is applied first). A key is spelt
as the first known key whose name, upper-cased with every non-alphanumeric
character turned into ``_``, equals ``<KEY>``: known keys are those already in the
file (for that cluster or flow) and MM2's flow keys. That is how
``MM_OFFSET_SYNCS_TOPIC_LOCATION`` finds ``offset-syncs.topic.location`` and
``MM_SPARK_DRIVER_EXTRAJAVAOPTIONS`` finds ``spark.driver.extraJavaOptions`` when
the file has it. Otherwise the key is ``<KEY>`` lower-cased with ``_`` -> ``.``.

Examples::

    MM_PRIMARY__BOOTSTRAP_SERVERS=a:9092      primary.bootstrap.servers
    MM_PRIMARY__CONSUMER_FETCH_MAX_BYTES=1    primary.consumer.fetch.max.bytes
    MM_PRIMARY__BACKUP__ENABLED=true          primary->backup.enabled
    MM_EMIT_CHECKPOINTS_INTERVAL_SECONDS=2    emit.checkpoints.interval.seconds
    MM_SPARK_MASTER=local[2]                  spark.master
    MM_MM_STATE_DIR=/var/lib/mm               mm.state.dir

Process settings read elsewhere (``RESERVED``: log level/format, Spark log level,
config path, `mm embedded`'s state file, the directory of Apache Kafka's jars that
``./dev`` fills) are never treated as overrides.
Variables that name no listed cluster or have empty segments are skipped with a
warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from mm.logs import get_logger

__all__ = ["ENV_PREFIX", "RESERVED", "apply_env_overrides", "env_key"]

ENV_PREFIX = "MM_"
RESERVED = frozenset(
    {
        "MM_LOG_LEVEL",
        "MM_LOG_FORMAT",
        "MM_SPARK_LOG_LEVEL",
        "MM_CONFIG",
        "MM_EMBEDDED_STATE",
        "MM_KAFKA_JARS",
    }
)


def _log() -> Any:
    # bound per call: a logger bound at import would miss configure_logging()
    return get_logger("mm.config.env")


def env_key(key: str) -> str:
    """The environment spelling of one key segment: upper case, non-alphanumerics -> ``_``."""
    return re.sub(r"[^A-Za-z0-9]", "_", key).upper()


def apply_env_overrides(
    props: Mapping[str, str],
    env: Mapping[str, str],
    *,
    known_keys: Iterable[str] = (),
) -> tuple[dict[str, str], dict[str, str]]:
    """Apply every ``MM_*`` variable of ``env`` on top of ``props``.

    Returns (new properties, {property key: variable that set it}). ``known_keys``
    are top-level/flow key spellings to match besides the file's keys.
    """
    result = dict(props)
    sources: dict[str, str] = {}
    names = sorted(n for n in env if n.startswith(ENV_PREFIX) and n not in RESERVED)
    if "MM_CLUSTERS" in names:  # later names are resolved against the new aliases
        result["clusters"] = env["MM_CLUSTERS"]
    aliases = [a.strip() for a in result.get("clusters", "").split(",") if a.strip()]
    known = list(known_keys)
    for name in names:
        key = "clusters" if name == "MM_CLUSTERS" else _property_key(name, aliases, result, known)
        if key is not None:
            result[key] = env[name]
            sources[key] = name
    if sources:
        _log().debug("config overridden from environment", keys=sorted(sources))
    return result, sources


def _property_key(
    name: str, aliases: list[str], props: Mapping[str, str], known: list[str]
) -> str | None:
    segments = name[len(ENV_PREFIX) :].split("__")
    if not all(segments) or len(segments) > 3:
        _log().warning("ignoring environment variable", variable=name, reason="malformed name")
        return None
    *alias_parts, key_part = segments
    matched = [_alias(part, aliases) for part in alias_parts]
    if any(a is None for a in matched):
        _log().warning(
            "ignoring environment variable",
            variable=name,
            reason=f"names no cluster in clusters ({', '.join(aliases)})",
        )
        return None
    if not matched:
        prefix = ""
    elif len(matched) == 1:
        prefix = f"{matched[0]}."
    else:
        prefix = f"{matched[0]}->{matched[1]}."
    if prefix:
        existing = [k[len(prefix) :] for k in props if k.startswith(prefix)]
    else:  # a top-level name must not pick up a cluster or flow key of the file
        existing = [k for k in props if "->" not in k and k.split(".", 1)[0] not in aliases]
    # MM2's flow keys are spelt for top-level and flow names, not for cluster names
    candidates = existing if len(matched) == 1 else [*existing, *known]
    return prefix + _spell(key_part, candidates)


def _alias(part: str, aliases: list[str]) -> str | None:
    for alias in aliases:
        if env_key(alias) == part.upper():
            return alias
    return None


def _spell(part: str, candidates: list[str]) -> str:
    wanted = part.upper()
    for candidate in candidates:
        if env_key(candidate) == wanted:
            return candidate
    return part.lower().replace("_", ".")
