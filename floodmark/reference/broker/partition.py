"""A partition replica: this broker's copy of one partition and the rules it follows.

Each replica is either the **leader** of its partition, in one *leader epoch*, or a
**follower** that pulls the leader's log, or neither (not yet told, or stopped). The
controller decides roles (LeaderAndIsr); the replica applies the rules of the replication
design on its own:

* **Leader epochs.** A LeaderAndIsr request is applied only if its leader epoch is newer than
  the one the replica has (a new controller's init re-send of the same epoch may only update
  the replica list). A new leader records "epoch E starts at my log end" in its leader epoch
  cache; followers learn epochs from the records they copy.
* **High watermark (HW).** The first offset not yet committed. The leader advances it to the
  minimum log end over the ISR, as followers report their log ends by fetching; it never
  moves backwards. A new leader starts from the HW it already knew and does not advance it
  until the followers report. A follower takes ``min(leader HW, own log end)``.
* **ISR.** The leader drops followers that lag (by time or by records) and admits a follower
  back only once it has reached both the HW and the start offset of the leader's current
  epoch (KAFKA-7128). The ZooKeeper write of the new ISR is the broker's job; this class only
  decides, and applies the outcome. While an expansion is on its way (to ZooKeeper or the
  controller) the HW counts the joining follower as a member already: the *maximal ISR* of
  KIP-497. The write may land late (a held-back request, a slow ZooKeeper reply) when the
  follower has fallen behind again, and an ISR member must hold everything committed; so
  nothing is committed that the joiner lacks until the outcome is known.
* **Fencing.** Fetches and epoch lookups carry the requester's view of the leader epoch
  (KIP-320); a replica answers only requests in its own epoch.

This class does no I/O besides calling its log (which may raise ``OSError``: the broker
takes the log directory offline). It receives wall-clock times as arguments and reports
what it did through ``emit`` (node events), so it can be unit-tested directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from floodmark.contracts.node_event_kinds import (
    Appended,
    BecameFollower,
    BecameLeader,
    Fenced,
    HwChanged,
    IsrChanged,
    KnownKind,
    Truncated,
)
from floodmark.reference.broker.follower_progress import UNKNOWN_OFFSET, FollowerProgress
from floodmark.reference.log.epoch_cache import LeaderEpochCache
from floodmark.reference.protocol.eligible_leaders import may_advance_high_watermark, strict_min_isr
from floodmark.reference.protocol.messages import NO_EPOCH, Errors, PartitionState, Record
from floodmark.reference.protocol.variants import Variant

Role = Literal["leader", "follower", "none"]
TAIL_RECORDS = 20_000  # records a leader keeps in memory for its followers' fetches
Emit = Callable[[KnownKind], None]


class ReplicaLog(Protocol):
    """What a replica needs from its log (``floodmark.reference.log.partition_log.PartitionLog``)."""

    @property
    def log_start(self) -> int: ...

    @property
    def log_end(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...

    @property
    def epoch_cache(self) -> LeaderEpochCache: ...

    def append_as_leader(self, values: Sequence[str], leader_epoch: int) -> int: ...

    def append_as_follower(self, records: Sequence[Record]) -> None: ...

    def read(self, offset: int, max_records: int, max_offset: int | None = None) -> list[Record]: ...

    def truncate_to(self, offset: int) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Divergence:
    """The follower's log diverges from the leader's: truncate to ``end_offset`` at most."""

    leader_epoch: int
    end_offset: int


@dataclass(frozen=True)
class FetchCheck:
    error: str | None = None
    divergence: Divergence | None = None


# The verdict of nearly every follower fetch: one shared instance (checks are immutable),
# not one allocation per partition per fetch.
FETCH_OK = FetchCheck()


class Partition:
    def __init__(self, topic: str, partition: int, broker_id: int, log: ReplicaLog, *,
                 high_watermark: int, variant: Variant, emit: Emit) -> None:
        self.topic = topic
        self.partition = partition
        self.key = (topic, partition)  # a plain attribute: looked up on every fetch
        self.broker_id = broker_id
        self.log = log
        self.variant = variant
        self._emit = emit
        self.role: Role = "none"
        self.leader_id = -1
        self.leader_epoch = NO_EPOCH
        self.controller_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.elr: tuple[int, ...] = ()  # KIP-966's eligible leader replicas, as ZooKeeper has them
        # The topic's min.insync.replicas: the HW stands still while the ISR is smaller
        # (KIP-966's strict min ISR). Set by the replica manager, which reads the topic config.
        self.min_insync_replicas = 1
        self.zk_version = -1
        # The HW from the checkpoint can exceed a log that lost its unsynced tail in a crash.
        self.high_watermark = min(max(high_watermark, log.log_start), log.log_end)
        self.epoch_start_offset = UNKNOWN_OFFSET  # where the current epoch began (leader only)
        self.followers: dict[int, FollowerProgress] = {}
        self.isr_update_pending = False  # an ISR write to ZooKeeper is in flight
        # Followers whose admission to the ISR may have been written (its outcome not known yet).
        self.joining: tuple[int, ...] = ()
        # Followers being admitted to the ISR: the log end each had reached when admitted.
        self.admitted_log_ends: dict[int, int] = {}
        self.stale = False  # lost a conditional ISR write: stop acting until the controller speaks
        # Acting as leader: role "leader" and not stale, kept by _leadership_changed whenever
        # either changes. A plain attribute, not a property (Python 3.11 calls a property's
        # getter as a function), as every request for the partition asks.
        self.is_leader = False
        # Called after the HW or the log end moved (wakes waiting produce and fetch requests).
        self.on_high_watermark: Callable[[Partition], None] | None = None
        self.on_log_end: Callable[[Partition], None] | None = None
        # The newest records appended as leader, kept in memory so that followers fetching
        # them (every follower, right after every append) cost no disk read and decode:
        # Kafka serves them from the page cache. Valid only while it ends at the log end.
        self._tail: list[Record] = []
        self._tail_start = 0

    # ------------------------------------------------------------------ identity and events

    @property
    def log_end(self) -> int:
        return self.log.log_end

    def _leadership_changed(self) -> None:
        """``role`` or ``stale`` changed: is it acting as leader now?"""
        self.is_leader = self.role == "leader" and not self.stale

    # ------------------------------------------------------------------ LeaderAndIsr

    def accepts(self, state: PartitionState, is_init: bool) -> bool:
        """Is this LeaderAndIsr state newer than what the replica has?"""
        if state.leader_epoch > self.leader_epoch:
            return True
        if self.stale and state.leader_epoch == self.leader_epoch:
            return True  # a fenced replica takes the controller's word for its own epoch again
        # A new controller re-sends the current epoch with the init flag; it may carry a
        # changed replica list (reassignment) but must not reset the replica's role.
        return is_init and state.leader_epoch == self.leader_epoch

    def make_leader(self, state: PartitionState, now_wall: float) -> bool:
        """Become leader of ``state.leader_epoch``; returns False if the state is not newer."""
        same_epoch = state.leader_epoch == self.leader_epoch and self.role == "leader" and not self.stale
        isr_before = self.isr
        self._take_state(state)
        if same_epoch:
            for r in self.replicas:  # an init re-send may add replicas (reassignment)
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerProgress(r, last_caught_up_wall=now_wall,
                                                         last_fetch_wall=now_wall)
            if self.isr != isr_before:
                # A newer state node of this epoch (an ISR change the controller wrote for us
                # and never answered): the ISR this leader now counts acks against goes on
                # record, or the events show it acknowledging with the old one (explore seed
                # 279 at truncate-on-fetch: a false acked-below-min-isr).
                self._emit(IsrChanged(topic=self.topic, partition=self.partition, leader_epoch=self.leader_epoch,
                                      isr=self.isr, zk_version=self.zk_version, change="controller"))
            return False
        self.role = "leader"
        self._leadership_changed()
        self.leader_id = self.broker_id
        self.epoch_start_offset = self.log.log_end
        self.log.epoch_cache.assign(state.leader_epoch, self.epoch_start_offset)
        # Followers start out caught up: each gets a full lag window to show up.
        self.followers = {
            r: FollowerProgress(r, last_caught_up_wall=now_wall, last_fetch_wall=now_wall)
            for r in self.replicas if r != self.broker_id
        }
        self._emit(BecameLeader(topic=self.topic, partition=self.partition, leader_epoch=self.leader_epoch,
                                isr=self.isr, log_end=self.log_end, high_watermark=self.high_watermark))
        self.maybe_advance_high_watermark()
        return True

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader`` in ``state.leader_epoch``; truncation is the fetcher's job."""
        same = (state.leader_epoch == self.leader_epoch and self.role == "follower"
                and state.leader == self.leader_id and not self.stale)
        self._take_state(state)
        if same:
            return False
        self.role = "follower"
        self._leadership_changed()
        self.leader_id = state.leader
        self.epoch_start_offset = UNKNOWN_OFFSET
        self.followers = {}
        self._emit(BecameFollower(topic=self.topic, partition=self.partition, leader_epoch=self.leader_epoch,
                                  leader=self.leader_id, log_end=self.log_end))
        return True

    def _take_state(self, state: PartitionState) -> None:
        if state.leader_epoch == self.leader_epoch and not self.stale and state.zk_version <= self.zk_version:
            # A new controller's re-send of the epoch this replica has (the init flag): its
            # replica list may be new (a reassignment), its ISR may be old. As leader this
            # replica may have changed the ISR since the controller read the node, or be
            # changing it now: the state node's version says which is newer (Kafka's partition
            # epoch, KIP-497). Taking the older ISR back let a leader whose ISR had shrunk
            # below min.insync.replicas advance its HW and acknowledge (explore seed 17211).
            self.controller_epoch = state.controller_epoch
            self.replicas = tuple(state.replicas)
            return
        self.leader_epoch = state.leader_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)
        self.elr = tuple(state.elr)
        self.zk_version = state.zk_version
        self.isr_update_pending = False
        self.joining = ()
        self.stale = False
        self._leadership_changed()

    def stop(self) -> None:
        """StopReplica, or the log directory went offline: no role any more."""
        self.role = "none"
        self._leadership_changed()
        self.followers = {}

    # ------------------------------------------------------------------ epochs and fencing

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """KIP-101/279: (largest epoch <= ``epoch`` this log has, where that epoch ends)."""
        kip279 = not self.variant.epoch_lookup_without_kip279
        epoch_found, end = self.log.epoch_cache.end_offset_for(epoch, self.log.log_end, kip279=kip279)
        return int(epoch_found), int(end)

    def check_leader_epoch(self, current_leader_epoch: int) -> str | None:
        """KIP-320: is the requester's leader epoch ours? (NO_EPOCH: a client that does not know)."""
        if current_leader_epoch == NO_EPOCH:
            return None
        if current_leader_epoch < self.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.leader_epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return None

    def check_follower_fetch(self, offset: int, current_leader_epoch: int,
                             last_fetched_epoch: int) -> FetchCheck:
        """Validate a follower's fetch: its epoch (KIP-320) and whether its log diverged."""
        if self.variant.unfenced_fetch:
            return FETCH_OK  # before KIP-320: any fetch is served and counted
        error = self.check_leader_epoch(current_leader_epoch)
        if error is not None:
            return FetchCheck(error=error)
        if last_fetched_epoch != NO_EPOCH and offset > 0:
            log = self.log
            if last_fetched_epoch == log.epoch_cache.latest_epoch:
                # Nearly every fetch: the follower's last epoch is our latest, which ends at
                # our log end (epoch_end_offset's answer, without its lookup).
                epoch, end = last_fetched_epoch, log.log_end
            else:
                epoch, end = self.epoch_end_offset(last_fetched_epoch)
            if epoch != last_fetched_epoch or end < offset:
                return FetchCheck(divergence=Divergence(epoch, end))
        return FETCH_OK

    # ------------------------------------------------------------------ leader: produce

    def check_enough_replicas(self, min_insync_replicas: int) -> str | None:
        """acks=all needs an ISR of at least ``min.insync.replicas`` before appending."""
        if self.variant.acks_all_with_isr_of_one:
            return None  # Jepsen 2013: whatever the ISR is, it is enough
        if len(self.isr) < min_insync_replicas:
            return Errors.NOT_ENOUGH_REPLICAS
        return None

    def append_as_leader(self, values: Sequence[str]) -> int:
        """Append a batch in the current epoch; returns its base offset."""
        base = self.log.append_as_leader(values, self.leader_epoch)
        self._remember(base, values)
        self._emit(Appended(topic=self.topic, partition=self.partition, offset=base, epoch=self.leader_epoch,
                            values=tuple(values), role="leader"))
        if self.on_log_end is not None:
            self.on_log_end(self)
        self.maybe_advance_high_watermark()
        return base

    # ------------------------------------------------------------------ leader: followers

    def record_follower_fetch(self, replica_id: int, offset: int, incarnation: int,
                              now_wall: float) -> bool:
        """A follower fetched at ``offset``; returns True if the HW advanced."""
        progress = self.followers.get(replica_id)
        if progress is None:
            return False  # not a replica of this partition (reassigned away, or unknown)
        if incarnation < progress.incarnation:
            return False  # a fetch from an older incarnation of that broker: ignore it
        progress.incarnation = incarnation
        progress.record_fetch(offset, self.log.log_end, now_wall)
        return self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        """HW = min log end over the ISR (leader included), never backwards, and only while
        the ISR has min.insync.replicas members (KIP-966: what keeps the ELR safe to elect)."""
        if not self.is_leader:
            return False
        if strict_min_isr(self.variant) and not may_advance_high_watermark(self.isr, self.min_insync_replicas):
            return False
        candidate = self.log.log_end
        for replica in self.maximal_isr:
            if replica == self.broker_id:
                continue
            progress = self.followers.get(replica)
            if progress is None or progress.log_end == UNKNOWN_OFFSET:
                return False  # an ISR member has not reported yet in this epoch
            candidate = min(candidate, progress.log_end)
        return self._set_high_watermark(candidate)

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR plus the followers whose admission may be written already (KIP-497)."""
        if not self.joining:  # nearly always: the HW asks on every fetch
            return self.isr
        return self.isr + tuple(r for r in self.joining if r not in self.isr)

    def begin_expansion(self, joining: int) -> tuple[int, ...]:
        """Start admitting ``joining``; returns the ISR to write. Until the outcome is known
        the HW waits for it too (see the module docstring)."""
        self.isr_update_pending = True
        self.admitted_log_ends = {joining: self.followers[joining].log_end}
        self.joining = (joining,)
        return tuple(r for r in self.replicas if r in self.isr or r == joining)

    def end_isr_update(self, outcome_known: bool = True) -> None:
        """The ISR write is over without changing this replica's ISR: refused (outcome known),
        or failed in a way that leaves unknown whether it landed (the joiner still counts for
        the HW until the state is learnt: a LeaderAndIsr or a later ISR write)."""
        self.isr_update_pending = False
        if outcome_known:
            self.joining = ()

    def followers_to_drop(self, now_wall: float, lag_time_max: float,
                          lag_max_records: int) -> tuple[int, ...]:
        """ISR members (other than the leader) that are out of sync."""
        if not self.is_leader or self.isr_update_pending:
            return ()
        return tuple(
            r for r in self.isr
            if r != self.broker_id and r in self.followers
            and self.followers[r].is_lagging(now_wall, self.log.log_end, lag_time_max, lag_max_records)
        )

    def may_join_isr(self, replica_id: int, now_wall: float, lag_time_max: float) -> bool:
        """May this follower, which just fetched, (re)join the ISR?"""
        progress = self.followers.get(replica_id)
        if (not self.is_leader or self.isr_update_pending or progress is None
                or replica_id in self.isr or replica_id not in self.replicas):
            return False
        if now_wall - progress.last_caught_up_wall > lag_time_max:
            return False  # it would be dropped again at once
        if progress.log_end < self.high_watermark or progress.log_end == UNKNOWN_OFFSET:
            return False
        if self.variant.isr_admission_below_epoch_start:
            return True  # the literal V3 rule: reaching the HW is enough
        # KAFKA-7128: a follower below the start of this epoch may lack records that the
        # previous leader committed but this leader's lagging HW does not cover yet.
        return progress.log_end >= self.epoch_start_offset

    def apply_isr(self, isr: tuple[int, ...], zk_version: int, change: str, elr: tuple[int, ...] = (),
                  *, zxid: int | None = None) -> None:
        """The ISR write succeeded at ``zk_version`` (ZooKeeper transaction ``zxid``), with
        ``elr`` beside it."""
        joined = next((r for r in isr if r not in self.isr), None) if change == "expand" else None
        admitted_at = self.admitted_log_ends.pop(joined, None) if joined is not None else None
        progress = self.followers.get(joined) if joined is not None else None
        known = progress.log_end if progress is not None and progress.log_end != UNKNOWN_OFFSET else None
        self.isr = isr
        self.elr = elr
        self.zk_version = zk_version
        self.isr_update_pending = False
        self.joining = ()
        self._emit(IsrChanged(topic=self.topic, partition=self.partition, leader_epoch=self.leader_epoch,
                              isr=isr, zk_version=zk_version, change=change, zxid=zxid, joined=joined,
                              joined_log_end=admitted_at, joined_progress=known))
        self.maybe_advance_high_watermark()

    def fence(self, why: str) -> None:
        """Lost a conditional ISR write (or the broker fenced itself): stop acting as leader."""
        if self.stale:
            return
        self.stale = True
        self._leadership_changed()
        self.isr_update_pending = False
        self.joining = ()
        self._emit(Fenced(topic=self.topic, partition=self.partition, why=why, leader_epoch=self.leader_epoch))

    # ------------------------------------------------------------------ follower

    def append_as_follower(self, records: Sequence[Record], leader_high_watermark: int) -> None:
        if records:
            self.log.append_as_follower(records)
            self._emit(records_appended(self.topic, self.partition, records, "follower"))
        self._set_high_watermark(min(leader_high_watermark, self.log.log_end))

    def truncate(self, offset: int, reason: str) -> None:
        """Drop every record at or after ``offset``. If the log is shorter there is none to
        drop, but epochs without records go all the same (see ``PartitionLog.truncate_to``)."""
        before = self.log.log_end
        if offset >= before:
            self.log.truncate_to(offset)
            return
        self._tail = []
        self.log.truncate_to(offset)
        after = self.log.log_end
        self._emit(Truncated(topic=self.topic, partition=self.partition, leader_epoch=self.leader_epoch,
                             from_offset=before, to_offset=after, reason=reason))
        if self.high_watermark > after:
            # Only a flawed variant truncates below the HW; record it so checkers see it.
            previous = self.high_watermark
            self.high_watermark = after
            self._emit(HwChanged(topic=self.topic, partition=self.partition, leader_epoch=self.leader_epoch,
                                 role=self.role, previous=previous, high_watermark=after, log_end=after))

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, max_records: int, max_offset: int | None = None) -> list[Record]:
        tail, start = self._tail, self._tail_start
        log_end = self.log.log_end
        if tail and start <= offset <= log_end and start + len(tail) == log_end:
            end = min(log_end if max_offset is None else min(max_offset, log_end), offset + max_records)
            return tail[offset - start:end - start] if end > offset else []
        return self.log.read(offset, max_records, max_offset)

    def _remember(self, base: int, values: Sequence[str]) -> None:
        if not self._tail or self._tail_start + len(self._tail) != base:
            self._tail, self._tail_start = [], base
        epoch = self.leader_epoch
        self._tail.extend(Record(base + i, epoch, v) for i, v in enumerate(values))
        if len(self._tail) > 2 * TAIL_RECORDS:
            drop = len(self._tail) - TAIL_RECORDS
            del self._tail[:drop]
            self._tail_start += drop

    def consumer_read_error(self, offset: int) -> str | None:
        """Where a consumer may read: [log start, HW); between HW and log end is retriable."""
        if offset < self.log.log_start or offset > self.log.log_end:
            return Errors.OFFSET_OUT_OF_RANGE
        if offset > self.high_watermark:
            return Errors.OFFSET_NOT_AVAILABLE
        return None

    # ------------------------------------------------------------------ internals

    def _set_high_watermark(self, candidate: int) -> bool:
        candidate = min(candidate, self.log.log_end)
        if candidate <= self.high_watermark:
            return False
        previous = self.high_watermark
        self.high_watermark = candidate
        self._emit(HwChanged(topic=self.topic, partition=self.partition, leader_epoch=self.leader_epoch,
                             role=self.role, previous=previous, high_watermark=candidate,
                             log_end=self.log.log_end))
        if self.on_high_watermark is not None:
            self.on_high_watermark(self)
        return True


def records_appended(topic: str, partition: int, records: Sequence[Record], role: str) -> Appended:
    """The ``appended`` event of ``records`` (at least one) reaching a log as ``role``."""
    first = records[0]
    if len(records) == 1:  # a follower's fetch nearly always brings one record
        return Appended(topic=topic, partition=partition, offset=first.offset, epoch=first.leader_epoch,
                        values=(first.value,), role=role, epochs=(first.leader_epoch,))
    return Appended(topic=topic, partition=partition, offset=first.offset, epoch=first.leader_epoch,
                    values=tuple(r.value for r in records), role=role,
                    epochs=tuple(sorted({r.leader_epoch for r in records})))
