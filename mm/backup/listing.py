"""What `mm backup ls` shows of one partition, from its catalog alone (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mm.backup.catalog import STARTED, PartitionCatalog


@dataclass(frozen=True)
class PartitionListing:
    topic: str
    partition: int
    segments: int  # visible
    first_offset: int | None  # first offset the visible segments cover
    last_offset: int | None  # last offset they cover (inclusive)
    min_timestamp: int | None
    max_timestamp: int | None
    records: int
    size_bytes: int
    levels: tuple[int, ...]
    lost: int  # offsets recorded as lost, before or between the segments
    in_flight: int  # copies started and not finished (a running or crashed backup)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "segments": self.segments,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "next_offset": None if self.last_offset is None else self.last_offset + 1,
            "min_timestamp": self.min_timestamp,
            "max_timestamp": self.max_timestamp,
            "records": self.records,
            "size_bytes": self.size_bytes,
            "levels": list(self.levels),
            "lost": self.lost,
            "in_flight": self.in_flight,
        }


def partition_listing(catalog: PartitionCatalog) -> PartitionListing:
    visible = catalog.visible()
    lows = [e.min_timestamp for e in visible if e.min_timestamp is not None]
    highs = [e.max_timestamp for e in visible if e.max_timestamp is not None]
    return PartitionListing(
        topic=catalog.topic,
        partition=catalog.partition,
        segments=len(visible),
        first_offset=visible[0].start if visible else None,
        last_offset=visible[-1].end if visible else None,
        min_timestamp=min(lows) if lows else None,
        max_timestamp=max(highs) if highs else None,
        records=catalog.record_count,
        size_bytes=sum(e.size_bytes for e in visible),
        levels=tuple(sorted({e.level for e in visible})),
        lost=catalog.lost_count,
        in_flight=len(catalog.in_state(STARTED)),
    )
