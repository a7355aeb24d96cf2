"""Encoding of the mirror's per-partition state kept in committed-offset metadata.

The mirror commits, in the same target transaction as the records, an offset
for ``(target topic, partition)`` in the flow's state group: the next *source*
offset to mirror. Its metadata string carries the offset syncs of that
transaction, so a restarted task can write them again if the previous process
died between committing on the target and writing the syncs on the source.

Format (ASCII, well under Kafka's 4096-byte metadata limit):
``v1;<batch id>;<u0>:<d0>,<du>:<dd>,...`` where each later pair is the delta to
the previous pair.
"""

from __future__ import annotations

from mm_client.errors import RecordDecodeError

VERSION = "v1"


def encode_state(batch_id: str, syncs: list[tuple[int, int]]) -> str:
    parts: list[str] = []
    pu = pd = 0
    for u, d in syncs:
        parts.append(f"{u - pu}:{d - pd}")
        pu, pd = u, d
    return f"{VERSION};{batch_id};{','.join(parts)}"


def decode_state(metadata: str | None) -> tuple[str, list[tuple[int, int]]] | None:
    """(batch id, syncs) or None when the metadata is empty (no state yet)."""
    if not metadata:
        return None
    try:
        version, batch_id, body = metadata.split(";", 2)
        if version != VERSION:
            raise ValueError(f"unknown version {version!r}")
        syncs: list[tuple[int, int]] = []
        u = d = 0
        if body:
            for pair in body.split(","):
                du, dd = pair.split(":")
                u += int(du)
                d += int(dd)
                syncs.append((u, d))
        return batch_id, syncs
    except ValueError as exc:
        raise RecordDecodeError(f"mirror state metadata {metadata[:80]!r}: {exc}") from exc
