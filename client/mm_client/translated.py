"""What the translate functions answer: a dict, as MM2's, that knows where it came from.

:func:`~mm_client.translate_offsets` keeps MirrorMaker 2's meaning
(``RemoteClusterUtils.translateOffsets``): a map of target partition -> offset,
empty for a group without checkpoints. The map is a :class:`TranslatedOffsets`,
a ``dict`` that also carries the group, the source alias, the cluster read and
the other groups the checkpoints topic holds, so the helpers that *apply* it
(:mod:`mm_client.consumers`) can refuse an empty one with a message naming the
groups that do have checkpoints (a misspelt group name is the usual cause)
instead of silently leaving the consumer to its reset policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mm_client.topic_partition import TopicPartition

__all__ = ["TranslatedOffsets"]


class TranslatedOffsets(dict[TopicPartition, int]):
    """``{target partition: offset}`` for ``group``, read from ``checkpoints_topic``."""

    __slots__ = ("bootstrap_servers", "checkpoints_topic", "group", "other_groups", "source_alias")

    def __init__(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        group: str,
        source_alias: str,
        bootstrap_servers: str,
        checkpoints_topic: str,
        other_groups: Iterable[str] = (),
    ) -> None:
        super().__init__(offsets)
        self.group = group
        self.source_alias = source_alias
        self.bootstrap_servers = bootstrap_servers
        self.checkpoints_topic = checkpoints_topic
        self.other_groups = tuple(sorted(set(other_groups) - {group}))

    def with_offsets(self, offsets: Mapping[TopicPartition, int]) -> TranslatedOffsets:
        """Other ``offsets`` from the same read (same group, cluster, other groups)."""
        return TranslatedOffsets(
            offsets,
            group=self.group,
            source_alias=self.source_alias,
            bootstrap_servers=self.bootstrap_servers,
            checkpoints_topic=self.checkpoints_topic,
            other_groups=self.other_groups,
        )

    def __repr__(self) -> str:
        return f"TranslatedOffsets(group={self.group!r}, {dict.__repr__(self)})"
