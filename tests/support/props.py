"""The smallest valid MM2 properties: two clusters and one enabled flow A->B."""

from __future__ import annotations

TWO_CLUSTERS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}
