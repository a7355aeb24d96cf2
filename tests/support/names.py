"""Unique, valid Kafka names per test, so tests sharing a cluster never collide."""

from __future__ import annotations

import re
import uuid

# Kafka allows [a-zA-Z0-9._-]; '.' and '_' are kept out of the generated part
# because MirrorMaker 2 uses '.' as its separator (A.orders) and Kafka warns
# about topics that differ only by '.' vs '_'.
_LEGAL = re.compile(r"[A-Za-z0-9._-]+")
_SLUG_DROP = re.compile(r"[^A-Za-z0-9-]+")
MAX_TOPIC_LEN = 249


def unique_name(prefix: str, test_name: str) -> str:
    """``prefix-<test name slug>-<8 hex>``, e.g. ``orders-copy-keeps-order-1a2b3c4d``."""
    if not _LEGAL.fullmatch(prefix):
        raise ValueError(f"{prefix!r} has characters Kafka does not allow in names")
    name = test_name.removeprefix("test_")
    slug = _SLUG_DROP.sub("-", name).strip("-")[:40].strip("-") or "t"
    return f"{prefix}-{slug}-{uuid.uuid4().hex[:8]}"[:MAX_TOPIC_LEN]
