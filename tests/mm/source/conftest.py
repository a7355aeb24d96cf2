"""Fixtures of the mirror's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mm_client.kafka.pool import ClientPool


@pytest.fixture
def workers() -> Iterator[list[ClientPool]]:
    """Two Spark Python workers' client pools, their clients closed before the
    clusters stop."""
    pools = [ClientPool(), ClientPool()]
    yield pools
    for pool in pools:
        pool.clear()
