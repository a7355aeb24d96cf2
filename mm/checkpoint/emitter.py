"""The checkpoint job's driver-side work for one flow (``source->target``).

Each round (:meth:`FlowCheckpointer.tick`):

1. the offset syncs of the micro-batch are fed into the flow's
   :class:`~mm.checkpoint.store.OffsetSyncStore` (a record that does not decode
   is counted and logged with its offset, then skipped and taken as a hole: it may
   have been any partition's sync). An offset gap in the
   offset-syncs topic where the writer leaves none (see :meth:`FlowCheckpointer.gaps_are_holes`)
   means syncs were compacted or deleted away: the store marks a hole, and
   groups inside it get conservative translations (``docs/offset-syncs.md``);
2. the mirror's positions are read from its state group on the target (keys are
   target topics, mapped back to source topics) and set on the store; on
   Apache Kafka the committed offset's metadata also carries the syncs of the
   mirror's last transaction, which the store holds aside (never inserted
   ahead of syncs the topic has not delivered yet);
3. the source's consumer groups (listed every ``refresh.groups.interval.seconds``,
   filtered by ``groups``/``groups.exclude``; ``__*`` and the mirror's own
   state group never) have their committed offsets read and translated;
4. MM2 ``Checkpoint`` records are written to ``<source>.checkpoints.internal`` on
   the target following :mod:`mm.checkpoint.rules` (never ahead of the mirror,
   never backwards unless the group moved backwards, only when changed);
5. history is pruned, the store is snapshotted (:mod:`mm.checkpoint.snapshot`)
   and a small report (holes, conservative translations) is written for ``mm status``;
6. with ``sync.group.offsets.enabled``, every
   ``sync.group.offsets.interval.seconds``, the newest checkpoints are committed
   into the same groups on the target where those have no active members.

What bounds memory and storage: per source partition the store keeps the syncs
at and above ``min(lowest committed offset of any tracked group, source log
start)`` (plus the one sync just below, so the bound stays translatable); the
mirror writes two syncs per run of consecutive source offsets, so the history is
O(mirror transactions + source gaps) within the source's retained log (or back
to the oldest tracked group, if that is older). The snapshot holds the same
data, delta-encoded. ``last`` (newest checkpoint per group partition) is
O(tracked groups x partitions).

Kafka failures during a round are logged and counted; the round is retried at
the next one (the snapshot is still written), so a broker hiccup never stops
the streaming query.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec
from mm_client.kafka import (
    AcknowledgedProducer,
    describe_groups,
    ensure_topic,
    group_offsets,
    latest_wins_producer_conf,
    new_admin,
    new_producer,
    wrap,
)
from mm_client.records import Checkpoint

from mm.checkpoint import rules, snapshot
from mm.checkpoint.history import PRODUCER_MAX_BYTES, HistoryPublisher
from mm.checkpoint.reader import gaps_are_holes, offset_key
from mm.checkpoint.rules import GroupOffset
from mm.checkpoint.store import prune_bound
from mm.config import FlowConfig, MirrorConfig
from mm.errors import MirrorError
from mm.logs import get_logger
from mm.source.runtime import offset_syncs_topic, state_group

REQUEST_TIMEOUT = 30.0
CHECKPOINTS_READ_TIMEOUT = 120.0

# (group, target topic, partition)
CheckpointKey = tuple[str, str, int]


@dataclass
class CheckpointStats:
    """Totals of one flow's checkpoint job (driver side)."""

    batches: int = 0
    syncs: int = 0
    corrupt: int = 0
    rounds: int = 0
    failed_rounds: int = 0
    groups: int = 0
    checkpoints: int = 0
    # group partitions with a committed offset the store cannot translate (yet):
    # ahead of the mirror, or below the kept history (last round)
    untranslated: int = 0
    # translations withheld because they would move a checkpoint backwards (last round)
    withheld_backwards: int = 0
    pruned: int = 0
    group_offsets_synced: int = 0
    groups_skipped_active: int = 0
    # offset gaps in the offset-syncs topic taken as missing syncs
    syncs_gaps: int = 0
    # intervals of the kept history not known complete (after the last round)
    holes: int = 0
    # group partitions translated conservatively, maybe below exact (last round)
    inexact: int = 0

    def summary(self) -> str:
        return (
            f"syncs={self.syncs} corrupt={self.corrupt} groups={self.groups} "
            f"checkpoints={self.checkpoints} untranslated={self.untranslated} "
            f"inexact={self.inexact} holes={self.holes} syncs_gaps={self.syncs_gaps} "
            f"withheld_backwards={self.withheld_backwards} pruned={self.pruned} "
            f"group_offsets_synced={self.group_offsets_synced} "
            f"groups_skipped_active={self.groups_skipped_active} "
            f"failed_rounds={self.failed_rounds}"
        )


def load_last_checkpoints(
    target_consumer_conf: dict[str, Any], flow: FlowConfig
) -> dict[CheckpointKey, Checkpoint]:
    """The newest checkpoint per group partition in the flow's checkpoints topic.

    Read once at start with the failover client's reader (MM2's semantics: newest
    record per key wins, undecodable records skipped and logged by it), so a
    restarted job never moves a checkpoint backwards.
    """
    from mm_client.checkpoints_reader import read_checkpoints

    snap = read_checkpoints(
        target_consumer_conf,
        flow.source,
        ".*",
        CHECKPOINTS_READ_TIMEOUT,
        replication_policy=flow.policy(),
    )
    out: dict[CheckpointKey, Checkpoint] = {}
    for g in snap.groups:
        for tp, cp in snap.checkpoints(g).items():
            out[(g, tp.topic, tp.partition)] = cp
    return out


def tracked_group(flow: FlowConfig, group: str) -> bool:
    """Groups the flow checkpoints: its filters, never ``__*`` nor the mirror's state group."""
    return not group.startswith("__") and group != state_group(flow) and flow.group_filter(group)


class FlowCheckpointer:
    """Store, groups and emitted checkpoints of one flow; thread-safe rounds."""

    def __init__(self, cfg: MirrorConfig, flow: FlowConfig, *, once: bool = False) -> None:
        self.flow = flow
        self.once = once
        self.policy = flow.policy()
        source, target = cfg.cluster(flow.source), cfg.cluster(flow.target)
        self._source_admin_conf: dict[str, Any] = dict(source.librdkafka("admin"))
        self._target_admin_conf: dict[str, Any] = dict(target.librdkafka("admin"))
        self.target_consumer_conf = dict(target.librdkafka("consumer"))
        self._target_producer_conf: dict[str, Any] = dict(target.librdkafka("producer"))
        where = flow.target if flow.offset_syncs_topic_location == "target" else flow.source
        self.syncs_consumer_conf = dict(cfg.cluster(where).librdkafka("consumer"))
        self.syncs_profile = cfg.cluster(where).profile
        self.syncs_cluster = where
        self.syncs_topic = offset_syncs_topic(flow)
        self.checkpoints_topic = self.policy.checkpoints_topic(flow.source)
        self.state_group = state_group(flow)
        self.dir = snapshot.snapshot_dir(cfg.state_dir, flow.source, flow.target)
        self.snapshot_path = self.dir / snapshot.FILE_NAME
        self.report_path = self.dir / snapshot.REPORT_FILE_NAME
        self._syncs_on_target = flow.offset_syncs_topic_location == "target"
        # the offset-syncs topic's cleanup.policy; None until it could be read
        self.syncs_cleanup_policy: str | None = None
        # per group: partitions translated conservatively in the last round
        self.inexact_groups: dict[str, int] = {}
        self.snap = snapshot.Snapshot(flow.name)
        # newest checkpoint per (group, target topic, partition): emitted or read at start
        self.last: dict[CheckpointKey, Checkpoint] = {}
        self.groups: list[str] = []
        self.stats = CheckpointStats()
        self.log = get_logger("mm.checkpoint", flow=flow.name)
        self._lock = threading.RLock()
        self._groups_at = -math.inf
        self._log_starts: dict[tuple[str, int], int] = {}
        # partitions whose log start could not be read (warned about once)
        self._unknown_log_starts: set[tuple[str, int]] = set()
        self._last_tick = -math.inf
        self._last_group_sync = -math.inf
        self._dirty = False
        self._source_admin: AdminClient | None = None
        self._target_admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._target_to_source: dict[str, str] = {}
        self._warned_backwards: set[tuple[CheckpointKey, int]] = set()
        self.history = HistoryPublisher(flow.name, flow.source, self.log)

    # --- clients ------------------------------------------------------------------
    @property
    def source_admin(self) -> AdminClient:
        if self._source_admin is None:
            self._source_admin = new_admin(self._source_admin_conf)
        return self._source_admin

    @property
    def target_admin(self) -> AdminClient:
        if self._target_admin is None:
            self._target_admin = new_admin(self._target_admin_conf)
        return self._target_admin

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            conf = latest_wins_producer_conf(self._target_producer_conf)
            conf["linger.ms"] = 5
            # one request must carry the whole published history (mm.checkpoint.history)
            conf.setdefault("message.max.bytes", PRODUCER_MAX_BYTES)
            self._producer = new_producer(conf)
        return self._producer

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)

    # --- start-up -----------------------------------------------------------------
    def start(self) -> None:
        """Load the snapshot, create the checkpoints topic, read the newest checkpoints."""
        snap = snapshot.load(self.snapshot_path, self.flow.name)
        if snap is not None:
            self.snap = snap
        try:
            self._check_syncs_topic()
        except KafkaException as exc:
            self.log.warning(
                "offset-syncs topic not checked", topic=self.syncs_topic, error=str(exc)
            )
        ensure_topic(
            self.target_admin,
            self.checkpoints_topic,
            f"cluster {self.flow.target}",
            self.flow.checkpoints_topic_replication_factor,
        )
        self.history.ensure_topic(
            self.target_admin,
            f"cluster {self.flow.target}",
            self.flow.checkpoints_topic_replication_factor,
        )
        self.last = load_last_checkpoints(self.target_consumer_conf, self.flow)
        self.log.info(
            "checkpoint job state loaded",
            snapshot=str(self.snapshot_path) if snap is not None else None,
            syncs_kept=self.snap.store.size(),
            syncs_next=self.snap.syncs_next,
            checkpoints_known=len(self.last),
        )

    # --- rounds ---------------------------------------------------------------------
    def on_batch(self, batch_df: Any, batch_id: int) -> None:
        """foreachBatch: feed the micro-batch's syncs, then (unless --once) emit."""
        rows = batch_df.collect()
        with self._lock:
            self.stats.batches += 1
            self.feed(rows)
            if self.once:
                self._save()  # --once emits in one final round, after the last batch
            else:
                self.tick()

    def gaps_are_holes(self) -> bool:
        """Whether an offset gap in the offset-syncs topic means missing syncs
        (:func:`mm.checkpoint.reader.gaps_are_holes`)."""
        return gaps_are_holes(self._syncs_on_target, self.syncs_cleanup_policy)

    def feed(self, rows: Iterable[Any]) -> None:
        store, nxt = self.snap.store, self.snap.syncs_next
        fed = 0
        gaps = 0
        holes = self.gaps_are_holes()
        for r in sorted(rows, key=lambda r: (r.syncs_partition, r.offset)):
            key = offset_key(self.syncs_topic, r.syncs_partition)
            expected = nxt.get(key)
            if holes and expected is not None and r.offset > expected:
                # syncs of any partition may have been in the missing offsets
                store.mark_hole()
                gaps += 1
            nxt[key] = max(nxt.get(key, 0), r.offset + 1)
            self._dirty = True
            if r.error is not None:
                # it may have been a sync of any partition: a hole, as a gap is
                store.mark_hole()
                self.stats.corrupt += 1
                self.log.error(
                    "corrupt offset sync skipped",
                    topic=self.syncs_topic,
                    partition=r.syncs_partition,
                    offset=r.offset,
                    error=r.error,
                    expected="an MM2 OffsetSync (key: topic STRING, partition INT32; "
                    "value: upstream INT64, downstream INT64)",
                    effect="taken as a hole: groups between the syncs around it get "
                    "conservative checkpoints (never ahead)",
                    corrupt_total=self.stats.corrupt,
                )
                continue
            store.add_sync(
                r.topic, r.partition, r.upstream, r.downstream, bool(r.txn_first), r.writer
            )
            fed += 1
        self.stats.syncs += fed
        if gaps:
            self.stats.syncs_gaps += gaps
            self.log.warning(
                "offset gaps in the offset-syncs topic: syncs may be missing, groups in those "
                "stretches get conservative checkpoints",
                topic=self.syncs_topic,
                gaps=gaps,
                cleanup_policy=self.syncs_cleanup_policy,
                see="docs/offset-syncs.md",
            )

    def tick_if_due(self) -> None:
        if time.monotonic() - self._last_tick >= self.flow.emit_checkpoints_interval_seconds:
            self.tick()

    def tick(self, *, final: bool = False) -> bool:
        """One round (see the module docstring). False when Kafka failed it."""
        with self._lock:
            started = time.monotonic()
            self._last_tick = started
            self.stats.rounds += 1
            ok = True
            try:
                emitted = self._round(final)
                # quiet when nothing happened: continuous jobs run a round every few
                # seconds (the first round is always shown: the job is up)
                loud = emitted or final or self.stats.rounds == 1
                (self.log.info if loud else self.log.debug)(
                    "checkpoint round",
                    emitted=emitted,
                    groups=len(self.groups),
                    untranslated=self.stats.untranslated,
                    syncs_kept=self.snap.store.size(),
                    seconds=round(time.monotonic() - started, 3),
                )
            except (KafkaException, MirrorError) as exc:
                ok = False
                self.stats.failed_rounds += 1
                self.log.error("checkpoint round failed; retried next round", error=str(exc))
            finally:
                self._save()
                self._save_report()
                self._publish_history()
            return ok

    def _publish_history(self) -> None:
        """The store on the target for readers without the source (see
        :mod:`mm.checkpoint.history`); a failure waits for the next round."""
        try:
            self.history.publish(self.producer, self.snap.store)
        except (KafkaException, MirrorError) as exc:
            self.log.warning(
                "offset history not published; retried next round",
                topic=self.history.topic,
                error=str(exc),
            )

    def _save(self) -> None:
        if self._dirty or not self.snapshot_path.exists():
            snapshot.save(self.snapshot_path, self.snap)
            self._dirty = False

    def _save_report(self) -> None:
        self.stats.holes = self.snap.store.holes()
        report = snapshot.Report(
            self.flow.name,
            time.time_ns() // 1_000_000,
            self.syncs_topic,
            self.syncs_cleanup_policy,
            self.stats.holes,
            self.stats.syncs_gaps,
            dict(self.inexact_groups),
        )
        try:
            snapshot.save_report(self.report_path, report)
        except MirrorError as exc:  # a StateDirError: only `mm status` misses it
            self.log.warning(
                "checkpoint report not written", path=str(self.report_path), error=str(exc)
            )

    def _round(self, final: bool) -> int:
        now = time.monotonic()
        refresh = self._groups_at == -math.inf or (
            self.flow.refresh_groups_enabled
            and now - self._groups_at >= self.flow.refresh_groups_interval_seconds
        )
        if refresh:
            self._refresh_groups()
            self._refresh_log_starts()
            if self.syncs_cleanup_policy is None:
                self._check_syncs_topic()
            else:
                # an operator may change it while the job runs (the warning's way out)
                self._read_syncs_policy()
            self._groups_at = now
        self._read_positions()
        committed = self._read_group_offsets()
        emitted = self._emit(committed)
        self._prune(committed)
        if self.flow.sync_group_offsets_enabled and (
            final or now - self._last_group_sync >= self.flow.sync_group_offsets_interval_seconds
        ):
            self._last_group_sync = now
            self._sync_group_offsets()
        return emitted

    # --- topics ---------------------------------------------------------------------
    def target_topic(self, source_topic: str) -> str:
        target = self.policy.format_remote_topic(self.flow.source, source_topic)
        self._target_to_source[target] = source_topic
        return target

    def source_topic(self, target_topic: str) -> str | None:
        """The source topic mirrored to ``target_topic`` (names from the store first)."""
        known = self._target_to_source.get(target_topic)
        if known is not None:
            return known
        for t in {t for t, _ in self.snap.store.partitions}:
            self.target_topic(t)
        known = self._target_to_source.get(target_topic)
        if known is None:
            known = self.policy.upstream_topic(target_topic)
            if known is not None:
                self._target_to_source[target_topic] = known
        return known

    # --- Kafka reads ------------------------------------------------------------------
    def _refresh_groups(self) -> None:
        try:
            res = self.source_admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT).result(
                REQUEST_TIMEOUT + 5
            )
        except KafkaException as exc:
            raise wrap(exc, f"list consumer groups on {self.flow.source}") from exc
        for err in res.errors:
            self.log.warning("listing groups partly failed", error=str(err))
        groups = sorted({g.group_id for g in res.valid if tracked_group(self.flow, g.group_id)})
        if groups != self.groups:
            self.log.info(
                "tracked groups", groups=len(groups), added=sorted(set(groups) - set(self.groups))
            )
        self.groups = groups
        self.stats.groups = len(groups)

    def _check_syncs_topic(self) -> None:
        """Read the offset-syncs topic's cleanup.policy (a warning when compacted) and
        mark a hole where retention deleted syncs the snapshot had not read yet."""
        if not self._read_syncs_policy():
            return
        admin = self.target_admin if self._syncs_on_target else self.source_admin
        nxt = self.snap.syncs_next
        if not nxt or not self.snap.store.partitions:
            return
        from mm.checkpoint.reader import split_key

        tps = [TopicPartition(*split_key(k)) for k in sorted(nxt)]
        futs = admin.list_offsets(
            {tp: OffsetSpec.earliest() for tp in tps}, request_timeout=REQUEST_TIMEOUT
        )
        for tp, fut in futs.items():
            start = fut.result(REQUEST_TIMEOUT + 5).offset
            if start > nxt[offset_key(tp.topic, tp.partition)]:
                self.snap.store.mark_hole()
                self._dirty = True
                self.log.warning(
                    "offset syncs deleted before they were read (the checkpoint job was down "
                    "longer than the topic's retention): groups in that stretch get "
                    "conservative checkpoints",
                    topic=tp.topic,
                    partition=tp.partition,
                    read_up_to=nxt[offset_key(tp.topic, tp.partition)],
                    log_start=start,
                )

    def _read_syncs_policy(self) -> bool:
        """Read the offset-syncs topic's cleanup.policy into ``syncs_cleanup_policy`` (a
        warning when it turns compacted); False when it could not be read."""
        admin = self.target_admin if self._syncs_on_target else self.source_admin
        where = self.flow.target if self._syncs_on_target else self.flow.source
        res = ConfigResource("topic", self.syncs_topic)
        try:
            entries = next(
                iter(admin.describe_configs([res], request_timeout=REQUEST_TIMEOUT).values())
            ).result(REQUEST_TIMEOUT + 5)
        except Exception as exc:
            self.log.debug(
                "offset-syncs topic config unknown", topic=self.syncs_topic, error=str(exc)
            )
            return False
        entry = entries.get("cleanup.policy")
        policy = (entry.value if entry is not None else None) or "delete"
        changed, self.syncs_cleanup_policy = policy != self.syncs_cleanup_policy, policy
        if "compact" in policy and changed:
            self.log.warning(
                "the offset-syncs topic is compacted: once a segment rolls it keeps one sync "
                "per partition, so history read from it may have holes; groups inside a hole "
                "get conservative checkpoints (never ahead, maybe re-reading records)",
                topic=self.syncs_topic,
                cluster=where,
                cleanup_policy=policy,
                fix=(
                    f"kafka-configs.sh --bootstrap-server <{where}> --alter --entity-type topics "
                    f"--entity-name {self.syncs_topic} --add-config "
                    "cleanup.policy=delete,retention.ms=<at least the source topics' retention>"
                ),
                see="docs/offset-syncs.md",
            )
        return True

    def _refresh_log_starts(self) -> None:
        tps = list(self.snap.store.partitions)
        if not tps:
            return
        futs = self.source_admin.list_offsets(
            {TopicPartition(t, p): OffsetSpec.earliest() for t, p in tps},
            request_timeout=REQUEST_TIMEOUT,
        )
        for tp, fut in futs.items():
            key = (tp.topic, tp.partition)
            try:
                self._log_starts[key] = fut.result(REQUEST_TIMEOUT + 5).offset
                self._unknown_log_starts.discard(key)
            except KafkaException as exc:
                # a deleted source topic: its history stays until it can be judged.
                # Said once per partition (and again after it was known), not at
                # every refresh for as long as its syncs are kept
                log = self.log.debug if key in self._unknown_log_starts else self.log.warning
                log("log start unknown", topic=tp.topic, partition=tp.partition, error=str(exc))
                self._unknown_log_starts.add(key)
                self._log_starts.pop(key, None)

    def _read_positions(self) -> None:
        from mm.source.state import decode_state

        offsets = group_offsets(
            self.target_admin, [self.state_group], REQUEST_TIMEOUT, self.flow.target
        )
        store = self.snap.store
        for tp in offsets.get(self.state_group, []):
            if tp.error is not None or tp.offset < 0:
                continue
            source_topic = self.source_topic(tp.topic)
            if source_topic is None:
                continue
            try:
                state = decode_state(tp.metadata)
            except MirrorError:
                state = None
            if state is not None:
                # the mirror's last transaction's syncs (written to the source after
                # its commit): closes the window in which the position is newer.
                # Held aside: syncs before them may not have been read yet
                store.set_pending(source_topic, tp.partition, state[1], state[0])
            h = store.history(source_topic, tp.partition)
            if h is None or h.position != tp.offset:
                store.set_position(source_topic, tp.partition, tp.offset)
                self._dirty = True

    def _read_group_offsets(self) -> dict[str, dict[tuple[str, int], GroupOffset]]:
        """Committed offsets of the tracked groups, on partitions the store knows."""
        known = self.snap.store.partitions
        out: dict[str, dict[tuple[str, int], GroupOffset]] = {}
        # a group deleted since it was listed has no offsets: nothing to translate
        source_offsets = group_offsets(
            self.source_admin, self.groups, REQUEST_TIMEOUT, self.flow.source
        )
        for g, tps in source_offsets.items():
            mine = {
                (tp.topic, tp.partition): GroupOffset(tp.offset, tp.metadata or "")
                for tp in tps
                if tp.error is None and tp.offset >= 0 and (tp.topic, tp.partition) in known
            }
            if mine:
                out[g] = mine
        return out

    # --- checkpoints --------------------------------------------------------------------
    def _emit(self, committed: dict[str, dict[tuple[str, int], GroupOffset]]) -> int:
        store = self.snap.store
        todo: list[Checkpoint] = []
        untranslated = backwards = 0
        inexact: dict[str, int] = {}
        for g, offsets in sorted(committed.items()):
            for (topic, partition), go in sorted(offsets.items()):
                target_topic = self.target_topic(topic)
                key = (g, target_topic, partition)
                last = self.last.get(key)
                found = store.lookup(topic, partition, go.offset)
                if found is None:
                    untranslated += 1
                    continue
                translated = found.offset
                bound = store.bound(topic, partition, go.offset)
                if not found.exact:
                    inexact[g] = inexact.get(g, 0) + 1
                if rules.is_backwards(last, go.offset, translated, bound):
                    backwards += 1
                    if (key, translated) in self._warned_backwards:
                        continue
                    self._warned_backwards.add((key, translated))
                    self.log.warning(
                        "checkpoint not moved backwards",
                        group=g,
                        topic=target_topic,
                        partition=partition,
                        upstream=go.offset,
                        translated=translated,
                        last_upstream=last.upstream_offset if last else None,
                        last_downstream=last.downstream_offset if last else None,
                    )
                    continue
                cp = rules.next_checkpoint(g, target_topic, partition, go, translated, last, bound)
                if cp is not None:
                    todo.append(cp)
        self.stats.untranslated = untranslated
        self.stats.withheld_backwards = backwards
        self.stats.inexact = sum(inexact.values())
        self.inexact_groups = inexact
        if todo:
            self._produce(todo)
        return len(todo)

    def _produce(self, checkpoints: list[Checkpoint]) -> None:
        producer = AcknowledgedProducer(self.producer)
        for cp in checkpoints:
            producer.produce(self.checkpoints_topic, cp.value_bytes(), cp.key_bytes(), partition=0)
        producer.flush(REQUEST_TIMEOUT, f"writing checkpoints to {self.checkpoints_topic} failed")
        # only what the target acknowledged counts as emitted (all of it, or we raised)
        for cp in checkpoints:
            self.last[(cp.consumer_group, cp.topic, cp.partition)] = cp
        self.stats.checkpoints += len(checkpoints)

    def _prune(self, committed: dict[str, dict[tuple[str, int], GroupOffset]]) -> None:
        lowest: dict[tuple[str, int], list[int]] = {}
        for offsets in committed.values():
            for tp, go in offsets.items():
                lowest.setdefault(tp, []).append(go.offset)
        for (t, p), h in self.snap.store.partitions.items():
            bound = prune_bound(lowest.get((t, p), []), self._log_starts.get((t, p)))
            if bound is not None:
                n = h.prune(bound)
                if n:
                    self.stats.pruned += n
                    self._dirty = True

    # --- group offset sync (KIP-545) ----------------------------------------------------
    def _sync_group_offsets(self) -> None:
        wanted: dict[str, dict[tuple[str, int], int]] = {}
        tracked = set(self.groups)
        for (g, t, p), cp in self.last.items():
            if g in tracked:
                wanted.setdefault(g, {})[(t, p)] = cp.downstream_offset
        if not wanted:
            return
        admin = self.target_admin
        described = describe_groups(admin, sorted(wanted), REQUEST_TIMEOUT)
        for g, d in sorted(described.items()):
            try:
                if isinstance(d, Exception):
                    raise d  # handled below as any failure of this group's sync
                if not rules.group_is_idle(d.state):
                    self.stats.groups_skipped_active += 1
                    self.log.info(
                        "group offsets not synced: group active on the target",
                        group=g,
                        state=d.state,
                        members=d.members,
                    )
                    continue
                have = {
                    (tp.topic, tp.partition): tp.offset
                    for tp in group_offsets(admin, [g], REQUEST_TIMEOUT, self.flow.target)[g]
                    if tp.error is None
                }
                plan = rules.plan_group_sync(wanted[g], have)
                if not plan:
                    continue
                tps = [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())]
                admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(g, tps)], request_timeout=REQUEST_TIMEOUT
                )[g].result(REQUEST_TIMEOUT + 5)
                self.stats.group_offsets_synced += len(tps)
                self.log.info("group offsets synced to the target", group=g, partitions=len(tps))
            except (KafkaException, MirrorError) as exc:
                # e.g. a member joined between describe and alter: Kafka refuses, we move on
                self.log.warning("group offset sync failed", group=g, error=str(exc))
