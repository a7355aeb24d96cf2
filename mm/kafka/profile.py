"""What a cluster's broker does where Kafka-protocol brokers differ: the one seam.

mm follows Apache Kafka's semantics (MSK, Confluent and Strimzi run Apache Kafka).
A cluster may instead declare the embedded broker that ``mm embedded``, ``mm demo``
and ``mm drill`` start where Apache Kafka's jars are absent (Tansu 0.6), with

    <alias>.mm.broker.profile = embedded     # one cluster
    mm.broker.profile = embedded             # every cluster of the file

Code that must behave differently on such a broker asks the cluster's
:class:`BrokerProfile` for the one property it depends on, never the broker's
name, so Apache Kafka's path is the main path and each difference is named here.

Where the embedded broker (Tansu 0.6) is known to differ from Apache Kafka, and
where the code handles it:

* FetchResponse lists no aborted transactions, so read_committed consumers get
  aborted records: :mod:`mm.kafka.committed` reads committed records with
  :mod:`mm.kafka.rawlog`, which applies the read_committed rule itself
  (``read_committed_exact``), for :mod:`mm.verify`, :mod:`mm.dr` and :mod:`mm.drill`;
  :mod:`mm.backup.task` (the committed filter) and :mod:`mm.restore.mapping_read`
  use the raw reader on PLAINTEXT listeners; :func:`mm.restore.plan.merge_runs`
  keeps a committed retry over the aborted attempt;
* no ABORT marker for a fenced epoch's open transaction: :mod:`mm.kafka.rawlog`
  ends it at the new epoch's first batch;
* a Fetch with ``max_wait_ms`` 0 answered with no topic: :func:`mm.kafka.rawlog.fetch`;
* acknowledged offset commits, and their metadata, lost for some transactions
  (a fenced producer's late batch leaves one open): :mod:`mm.source.task` writes
  the offset syncs again and resumes from its own higher position,
  :mod:`mm.restore.task` takes its position from the mapping;
* the last stable offset lagging behind transactions that overlap on a partition:
  :mod:`mm.restore.mapping_read` reads the mapping raw, :mod:`mm.source.task`
  writes one transaction at a time to the target's offset-syncs partition;
* a topic's own settings labelled ``DEFAULT_CONFIG``: :mod:`mm.source.topics`
  (``use.defaults.from = source`` copies them);
* DescribeAcls answered with an empty list: :mod:`mm.source.acl_sync` sends no
  empty CreateAcls; DescribeCluster listing no operation the principal may do
  (``lists_cluster_operations``);
* group states STABLE with an empty member list, UNKNOWN while a consumer joins,
  EMPTY for a group that never existed, and commits accepted into active groups:
  :func:`mm.checkpoint.rules.group_is_idle`, for :mod:`mm.dr.groups` and
  :mod:`mm.commands.failover`;
* ListOffsets by timestamp answered with the log start: :mod:`mm_client.fallback`
  reads forward to the first matching record;
* ListOffsets(latest) under-reporting the log end: :mod:`mm_client.checkpoints_reader`
  reads to the Fetch high watermark on any broker; :mod:`mm.kafka.watermarks`
  asks ``list_offsets_exact`` (below).

These are handled in ways correct on both brokers, which is why the profile does
not switch them; it switches only the differences that change a read
(``list_offsets_exact``, ``read_committed_exact``) or would override an operator
(``keeps_acknowledged_commits``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EMBEDDED", "KAFKA", "PROFILES", "BrokerProfile", "broker_profile"]


@dataclass(frozen=True)
class BrokerProfile:
    """One broker's answers where Kafka-protocol brokers differ (picklable: Spark
    tasks carry it)."""

    name: str
    list_offsets_exact: bool
    """ListOffsets(latest) answers a partition's end exactly: the log end offset,
    or under read_committed the last stable offset. When False (Tansu answers the
    base offset of the last batch + 1), ends come from the high watermark of a real
    fetch (:func:`mm.kafka.watermarks.watermarks`)."""
    read_committed_exact: bool = True
    """A read_committed consumer gets exactly the committed records (Apache Kafka
    lists the aborted transactions in its fetch responses). When False (the embedded
    broker lists none), committed records are read with :mod:`mm.kafka.rawlog`,
    which applies the rule to the stored markers itself (:mod:`mm.kafka.committed`)."""
    keeps_acknowledged_commits: bool = True
    """An offset commit the broker acknowledged stays (Apache Kafka). When False
    (the embedded broker loses a transaction's commit when a fenced epoch's late
    produce leaves it open), a mirror worker resumes from the highest position it
    committed itself rather than a lower one read back; on Apache Kafka a lower
    position is an operator's reset, and it is honoured."""
    open_transactions_visible: bool = True
    """A partition's last stable offset stays below its high watermark exactly while
    a transaction is open there (Apache Kafka), so an open transaction shows in its
    ends. When False (the embedded broker's last stable offset can stay below
    transactions that committed, and is 0 while one is open), the ends do not tell,
    and `mm switchover` says it did not check."""
    lists_cluster_operations: bool = True
    """DescribeCluster, asked for them, lists the operations the principal may do on
    the cluster (Apache Kafka: none when it may not DESCRIBE the cluster). The topic
    ACL sync (:mod:`mm.source.acl_sync`) checks an empty DescribeAcls answer with it,
    because librdkafka reads a refused DescribeAcls as an empty one. When False (the
    embedded broker lists none to anyone), the empty answer is believed."""


KAFKA = BrokerProfile(name="kafka", list_offsets_exact=True)
EMBEDDED = BrokerProfile(
    name="embedded",
    list_offsets_exact=False,
    read_committed_exact=False,
    keeps_acknowledged_commits=False,
    open_transactions_visible=False,
    lists_cluster_operations=False,
)
PROFILES: dict[str, BrokerProfile] = {p.name: p for p in (KAFKA, EMBEDDED)}


def broker_profile(name: str) -> BrokerProfile:
    """The profile called ``name`` (case-insensitive); ValueError naming the choices."""
    key = name.strip().lower()
    if key not in PROFILES:
        raise ValueError(f"{name!r} is not a broker profile; expected one of {', '.join(PROFILES)}")
    return PROFILES[key]
