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


class UsageError(MirrorError):
    """The command line asks for something impossible (exit code 2)."""
