"""Source topic IDs the mirror has seen: a topic deleted and recreated under the same
name is refused, not mirrored onto the old topic's copy.

The mirror's positions are source offsets. When a source topic is deleted and
recreated, its new records start again at offset 0, and the old positions mean
nothing for them. If the new topic is still shorter than a position, the task sees
a position past the log end and stops the partition (mm.source.position); if it
already grew past it, offsets alone cannot tell: the records below the position
would never be mirrored, silently. Kafka gives every topic an ID (KIP-516) that
changes when the topic is recreated, so the flow keeps the ID of each source topic
it mirrors, in ``<mm.state.dir>/mirror/<source>-<target>.topic-ids.json``, and a
different ID under a known name refuses the topic.

Limits: the first run (or a run after the state directory was lost) records the
IDs it finds and can detect nothing before; brokers without topic IDs (before
Apache Kafka 2.8) answer the all-zero ID, which is never recorded.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path

from mm.state_dir import write_atomically

# what brokers without topic IDs answer (the all-zero UUID, base64 as Kafka prints it)
NO_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def topic_ids_file(state_dir: str | Path, source: str, target: str) -> Path:
    return Path(state_dir) / "mirror" / f"{source}-{target}.topic-ids.json"


def compare(
    known: Mapping[str, str], current: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """(the IDs to keep, topic -> (known ID, current ID) of the recreated topics).

    New topics are added; a recreated topic keeps its known ID (it stays refused
    until an operator removes the entry); topics not seen now are kept (a topic
    deleted and not yet recreated)."""
    keep = dict(known)
    recreated: dict[str, tuple[str, str]] = {}
    for topic, tid in current.items():
        if not tid or tid == NO_ID:
            continue
        old = known.get(topic)
        if old is None:
            keep[topic] = tid
        elif old != tid:
            recreated[topic] = (old, tid)
    return keep, recreated


def adopt_recreated(
    keep: Mapping[str, str],
    recreated: Mapping[str, tuple[str, str]],
    targets_absent: Collection[str],
) -> tuple[dict[str, str], dict[str, tuple[str, str]], list[str]]:
    """The recreated topics whose target topic is gone take their new ID: the
    operator deleted the old topic's copy (the way out of :func:`recreated_message`),
    so nothing of the old topic can meet the new one on the target, and the new
    topic is mirrored from its start into a new target topic.

    Returns (the IDs to keep, the topics still refused, the topics adopted)."""
    keep_now = dict(keep)
    still: dict[str, tuple[str, str]] = {}
    adopted: list[str] = []
    for topic, (old, new) in recreated.items():
        if topic in targets_absent:
            keep_now[topic] = new
            adopted.append(topic)
        else:
            still[topic] = (old, new)
    return keep_now, still, adopted


def load(path: Path) -> dict[str, str]:
    """The recorded IDs ({} when the file does not exist). A file that is not ours is
    a ValueError naming it (never ignored: it is what keeps the check honest)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise ValueError(
            f"{path} is not a topic-ID file ({exc}); expected the JSON object the mirror "
            "writes (topic -> ID); delete it to record the IDs the source has now"
        ) from None
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in doc.items()
    ):
        raise ValueError(
            f"{path} is not a topic-ID file; expected a JSON object of topic -> ID strings"
        )
    return doc


def save(path: Path, ids: Mapping[str, str]) -> None:
    write_atomically(path, json.dumps(dict(sorted(ids.items())), indent=1) + "\n")


def recreated_message(
    topic: str,
    old: str,
    new: str,
    *,
    source: str,
    target: str,
    target_topic: str,
    state_group: str,
    path: Path,
) -> str:
    return (
        f"source topic {topic} on {source} was deleted and recreated since the mirror "
        f"recorded it (topic ID {old}, now {new}, kept in {path}): {target_topic} on {target} "
        f"holds the old topic's records and the mirror's positions are the old topic's "
        f"offsets, so the new topic's records below them would never be mirrored. Nothing is "
        f"mirrored for it. To mirror the new topic from its start, delete the mirror's "
        f"positions for it (kafka-consumer-groups.sh --group {state_group} --topic "
        f"{target_topic} --delete-offsets --bootstrap-server <{target}>), then topic "
        f"{target_topic} on {target}, then run the mirror again: it records the new topic's "
        "ID and copies it from its start."
    )
