"""Errors of the mirroring application; all derive from mm_client's MirrorError."""

from __future__ import annotations

from mm_client.errors import KafkaOperationError, MirrorError, RecordDecodeError

__all__ = [
    "ConfigError",
    "KafkaOperationError",
    "MirrorError",
    "RecordDecodeError",
    "UsageError",
]


class ConfigError(MirrorError):
    """Invalid configuration: names the key, the bad value and what is expected.

    The CLI turns it into one line on stderr and exit code 2, without a traceback.
    """

    def __init__(self, key: str, value: object, expected: str) -> None:
        self.key = key
        self.value = value
        self.expected = expected
        shown = "<missing>" if value is None else repr(value)
        super().__init__(f"invalid config {key}={shown}: expected {expected}")


class ConfigFileError(ConfigError):
    """The configuration file itself cannot be read (exit code 2)."""

    def __init__(self, path: str, reason: str) -> None:
        expected = "a readable MirrorMaker 2 properties file (-c FILE or MM_CONFIG)"
        super().__init__("-c", path, expected)
        # one sentence, not "invalid config config file=...": the file is the problem
        self.args = (f"cannot read the configuration file {path!r}: {reason}; expected {expected}",)


class UsageError(MirrorError):
    """The command line asks for something impossible (exit code 2)."""
