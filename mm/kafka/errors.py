"""Kafka errors as the toolkit's error type: the one implementation is
:mod:`mm_client.kafka.errors`, re-exported for modules that import it from here."""

from __future__ import annotations

from mm_client.kafka.errors import wrap

__all__ = ["wrap"]
