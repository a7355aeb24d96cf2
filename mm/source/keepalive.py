"""Keeps idle partitions' positions from expiring.

The mirror's position lives in a member-less group on the target; Apache Kafka
drops such a group's committed offsets ``offsets.retention.minutes`` (7 days by
default) after they were last committed. A partition that receives nothing
for that long would lose its position. So the planner asks, every
``mm.mirror.position.refresh.interval.seconds`` (default one day), for a
*refresh* of each partition that had no range planned for that long: an empty
range whose task fences the partition's transactional id like any other task
and commits the same position and metadata again, which restarts the clock.

:class:`RefreshClock` remembers when each partition was last planned, in a
small JSON file next to Spark's checkpoint, so ``--once`` runs from cron count
across runs. A partition first seen counts as planned then: losing the file
delays refreshes by one interval at most, and never starts a storm of them.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# Spark offset keys "<prefix><topic>:<partition>" count a partition's refreshes: a
# new count makes Spark run a batch with no new data, and tells whichever process
# plans that batch which partitions to refresh (never a plain "topic:partition")
REFRESH_PREFIX = "__mm.refresh/"
DEFAULT_INTERVAL_S = 86_400.0


@dataclass
class RefreshClock:
    interval_s: float = DEFAULT_INTERVAL_S
    path: str = ""  # "" keeps the times in memory only
    # "topic:partition" -> wall-clock time it was last planned (a range or a refresh)
    planned_at: dict[str, float] = field(default_factory=dict)
    _mtime: float = -1.0

    @classmethod
    def load(cls, interval_s: float, path: str) -> RefreshClock:
        clock = cls(interval_s, path)
        clock.reload()
        return clock

    def reload(self) -> None:
        """Take the times another planning process saved (when the file changed)."""
        try:
            mtime = os.stat(self.path).st_mtime if self.path else -1.0
        except OSError:
            return
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            with open(self.path) as f:
                data = json.load(f)
            saved = {str(k): float(v) for k, v in data.items()}
        except (OSError, ValueError, TypeError, AttributeError):
            # a torn or foreign file: keep counting from what is known (refreshes
            # come at most one interval later; positions are committed, not lost)
            return
        for k, t in saved.items():
            self.planned_at[k] = max(t, self.planned_at.get(k, t))

    def due(self, keys: Iterable[str], now: float) -> list[str]:
        """Those of ``keys`` not planned for a whole interval; unseen ones count from now."""
        out = []
        for k in keys:
            seen = self.planned_at.setdefault(k, now)
            if now - seen >= self.interval_s:
                out.append(k)
        return sorted(out)

    def planned(self, keys: Iterable[str], now: float) -> None:
        for k in keys:
            self.planned_at[k] = now

    def save(self) -> None:
        """Write the times atomically (temporary file, then rename)."""
        if not self.path:
            return
        directory = os.path.dirname(self.path) or "."
        Path(directory).mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".refresh-", dir=directory)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.planned_at, f, sort_keys=True)
            os.replace(tmp, self.path)
            self._mtime = os.stat(self.path).st_mtime
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
