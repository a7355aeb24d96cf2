"""What the mirror's Spark source needs to plan, as one small picklable value.

The driver builds a :class:`MirrorPlan` from the validated configuration and
hands it to the source as an option. Spark starts a fresh Python process per
query to plan it; unpickling a plan there imports neither the config models
(pydantic) nor the job module, which keeps that process's start short.
"""

from __future__ import annotations

import base64
import pickle
import re
from dataclasses import dataclass, field
from typing import Any

from mm.source.spec import FlowRuntime


@dataclass(frozen=True)
class NameFilter:
    """A name passes when it fully matches an ``include`` regex and no ``exclude`` one
    (MM2 matches whole names)."""

    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    def __call__(self, name: str) -> bool:
        # re caches compiled patterns, so this compiles each pattern once per process
        return any(re.fullmatch(p, name) for p in self.include) and not any(
            re.fullmatch(p, name) for p in self.exclude
        )


@dataclass(frozen=True)
class MirrorPlan:
    """A flow's runtime (for tasks) and its topic planner's settings (for planning)."""

    runtime: FlowRuntime
    # keyword arguments of mm.source.topics.TopicMirrorPlanner, except ``log``
    planner: dict[str, Any]
    refresh_topics_interval_seconds: float
    # the driver's own topic refresh just before the query starts (source topic ->
    # mm.source.topics.MirroredTopic, and topics that cannot be mirrored), with its
    # wall-clock time: the source starts from it instead of repeating it
    topics: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    refreshed_at: float = 0.0
    # idle partitions' positions are committed again this often (mm.source.keepalive),
    # counting across runs in this file ("" = in memory only)
    position_refresh_seconds: float = 86_400.0
    position_refresh_file: str = ""
    # the flow's shard count (mm.source.shard_map); 0 = auto
    shards: int = 0

    def fresh_topics(self, now: float) -> bool:
        """Whether the driver's refresh is recent enough to stand for the source's."""
        return bool(self.topics) and now - self.refreshed_at < self.refresh_topics_interval_seconds

    def encode(self) -> str:
        return base64.b64encode(pickle.dumps(self)).decode("ascii")

    @staticmethod
    def decode(text: str) -> MirrorPlan:
        plan = pickle.loads(base64.b64decode(text))
        if not isinstance(plan, MirrorPlan):
            raise TypeError(f"expected a MirrorPlan, got {type(plan).__name__}")
        return plan
