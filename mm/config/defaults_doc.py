"""Flow-level defaults that differ from MirrorMaker 2's, with MM2's value and why.

Our defaults live on the ``FlowConfig`` fields (whose descriptions say "MM2: x");
this table is the machine-readable record of MM2's value for ``mm config
defaults``. Every field whose description mentions MM2's value has a row here,
and the other way round (checked by the tests).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MM2_DIFFERENCES", "Mm2Difference"]


class Mm2Difference(NamedTuple):
    mm2: object  # MM2's default, typed as our FlowConfig field is
    why: str


_BROKER_DEFAULT = "-1 = the broker's default.replication.factor"
_FEW_BROKERS = f"{_BROKER_DEFAULT}; MM2's 3 fails with fewer than 3 brokers"

# MM2 property -> MM2's default and why ours differs
MM2_DIFFERENCES: dict[str, Mm2Difference] = {
    "emit.checkpoints.interval.seconds": Mm2Difference(
        60, "fresher translated offsets at failover"
    ),
    "sync.group.offsets.interval.seconds": Mm2Difference(60, "matches the checkpoint period"),
    "refresh.topics.interval.seconds": Mm2Difference(600, "a new topic is mirrored within seconds"),
    "refresh.groups.interval.seconds": Mm2Difference(
        600, "new groups get checkpoints within seconds"
    ),
    "replication.factor": Mm2Difference(
        2, f"{_BROKER_DEFAULT}; MM2's 2 fails with a single broker"
    ),
    "checkpoints.topic.replication.factor": Mm2Difference(3, _FEW_BROKERS),
    "heartbeats.topic.replication.factor": Mm2Difference(3, _FEW_BROKERS),
    "offset-syncs.topic.replication.factor": Mm2Difference(3, _FEW_BROKERS),
}
