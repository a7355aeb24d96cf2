"""Configuration: MirrorMaker 2's ``connect-mirror-maker.properties``, read unchanged.

``load_config(path, env)`` parses the file (``properties``), applies ``MM_*``
environment overrides (``env``) and validates everything into frozen models
(``model``); invalid values raise ``mm.errors.ConfigError`` naming the key.
Java client settings become librdkafka settings in one place (``librdkafka``).
"""

from mm.config.loader import build_config, effective_properties, load_config
from mm.config.model import ClusterConfig, FlowConfig, MirrorConfig
from mm.config.properties import load_properties, parse_properties

__all__ = [
    "ClusterConfig",
    "FlowConfig",
    "MirrorConfig",
    "build_config",
    "effective_properties",
    "load_config",
    "load_properties",
    "parse_properties",
]
