"""The replica manager: all of a broker's partition replicas, and the controller's orders.

It owns the broker's :class:`~floodmark.reference.broker.partition.Partition` objects and applies
what the controller sends:

* **LeaderAndIsr**: refused as a whole if it was meant for an older incarnation of this
  broker or comes from a controller older than the newest seen (stale controller epoch);
  per partition, applied only if its leader epoch is newer (``Partition.accepts``). Then the
  replica becomes leader (its fetcher stops) or follower (a fetcher starts, which first
  truncates by leader epoch).
* **StopReplica**: the replica stops (and is deleted when asked).

It owns the replica fetchers and starts and stops following as those orders say; what it
reads of the broker's changing state (ZooKeeper session, incarnation, self-fenced) comes
from the broker's session, lent to it.

It lends its replicas to the leader's ISR duties (:mod:`.isr.maintenance`), runs the
periodic ones of its own (checkpoint HWs, bring the replicas' leader epoch checkpoint files
up to date from their directory's journal, a bounded step at a time so that a failover's
thousands never hold the loop) and handles **log directory failure** (KIP-112): an ``OSError`` from a replica's log
takes its whole directory offline; every replica there stops, waiting requests fail, the
broker answers KAFKA_STORAGE_ERROR for them and tells the controller through a sequential
``/log_dir_event_notification/log_dir_event_`` node. Replicas in other directories carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from floodmark.contracts.node_event_kinds import LogDirOffline, Rejected, Truncated
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.broker.epoch_compaction import CompactionSchedule
from floodmark.reference.broker.isr.maintenance import IsrMaintenance
from floodmark.reference.broker.metadata_cache import MetadataCache
from floodmark.reference.broker.offset_waiters import ChangeSignal, OffsetWaiters
from floodmark.reference.broker.partition import Partition, records_appended
from floodmark.reference.broker.replica_fetcher import ReplicaFetchers
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.broker.storage_guard import ReplicaOffline
from floodmark.reference.log.log_dirs import LogDirOfflineError, LogDirs
from floodmark.reference.log.partition_log import PartitionLog
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    Errors,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    PartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
)
from floodmark.reference.runtime import (
    ConnectionLossError,
    NoNodeError,
    Runtime,
    SessionExpiredError,
)

Key = tuple[str, int]
T = TypeVar("T")


LEADER_AND_ISR_CHUNK = 1000  # partitions applied between yields to the event loop ...
LEADER_AND_ISR_CHUNK_SECONDS = 0.01  # ... or fewer, once this long (or the last sync's time) has passed
LEADER_AND_ISR_CHUNK_MAX_SECONDS = 0.1  # ... but never longer (real time only)
EPOCH_COMPACTION_STEP = 200  # epoch checkpoint files rewritten per directory between yields


class ReplicaManager:
    def __init__(self, runtime: Runtime, config: BrokerConfig, log_dirs: LogDirs,
                 metadata: MetadataCache, session: BrokerSession) -> None:
        self.runtime = runtime
        self.config = config
        self.log_dirs = log_dirs
        self.metadata = metadata
        self.session = session  # the broker's: ZooKeeper session, incarnation, self-fenced
        self.partitions: dict[Key, Partition] = {}
        self.high_watermark_waiters: dict[Key, OffsetWaiters] = {}
        self.log_end_waiters: dict[Key, OffsetWaiters] = {}
        self.append_signal = ChangeSignal()  # some partition led here got new records
        self.checkpointed_high_watermarks: dict[Key, int] = {}
        self.controller_epoch = -1
        self.topic_min_isr: dict[str, int] = {}
        self.closed = False  # the broker shut down and closed its logs
        self.state_change_lock = asyncio.Lock()
        self._last_sync_seconds = 0.0  # how long the last LeaderAndIsr chunk's group commit took
        self.compaction = CompactionSchedule()
        self.fetchers = ReplicaFetchers(runtime, config, metadata, session, self.get, self.guarded)
        self.isr = IsrMaintenance(runtime, config, session, lambda: self.partitions)

    # ------------------------------------------------------------------ lookups

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def error_for(self, topic: str, partition: int) -> str | None:
        """Why requests for this replica cannot be served here, if they cannot."""
        if self.log_dirs.is_offline(topic, partition):
            return Errors.KAFKA_STORAGE_ERROR
        if (topic, partition) not in self.partitions:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        return None

    def leader_error(self, topic: str, partition: int) -> tuple[Partition | None, str | None]:
        """The replica if this broker may act as its leader, else the error to answer."""
        error = self.error_for(topic, partition)
        if error is not None:
            return None, error
        p = self.partitions[(topic, partition)]
        if self.session.fenced and p.role == "leader":
            return None, Errors.BROKER_FENCED
        if not p.is_leader:
            return None, Errors.NOT_LEADER
        return p, None

    async def min_insync_replicas(self, topic: str) -> int:
        """The topic's min.insync.replicas (its config in ZooKeeper), else the broker default."""
        zk_client = self.session.zk
        if topic not in self.topic_min_isr and zk_client is not None:
            try:
                data, _ = await zk_client.get(zk.topic_path(topic))
                value = zk.decode_topic(topic, data).min_insync_replicas
                self.topic_min_isr[topic] = value if value is not None else self.config.min_insync_replicas
            except (NoNodeError, ConnectionLossError, SessionExpiredError, zk.LayoutError):
                return self.config.min_insync_replicas
        return self.topic_min_isr.get(topic, self.config.min_insync_replicas)

    async def _learn_min_insync_replicas(self, topic: str) -> None:
        """Read a topic's min.insync.replicas and hand it to its replicas (their HW rule).

        In the background, so that a slow ZooKeeper never holds up a LeaderAndIsr; until it
        is known, the broker default (which the harness sets to the topic's) applies.
        """
        value = await self.min_insync_replicas(topic)
        for (name, _), p in sorted(self.partitions.items()):
            if name == topic:
                p.min_insync_replicas = value
                p.maybe_advance_high_watermark()

    # ------------------------------------------------------------------ storage guard

    def guarded(self, p: Partition, action: Callable[[], T]) -> T:
        """Run a log operation; an OSError takes the replica's directory offline."""
        try:
            return action()
        except OSError as error:
            self.storage_failed(p.topic, p.partition, error)
            raise ReplicaOffline(str(error)) from error

    def storage_failed(self, topic: str, partition: int, error: BaseException) -> None:
        self._dir_failed(self.log_dirs.dir_of(topic, partition), error)

    def _path_failed(self, error: OSError) -> None:
        """A deferred write failed: its path (``filename``) says which directory."""
        self._dir_failed(self.log_dirs.dir_containing(str(error.filename)), error)

    def _dir_failed(self, directory: str | None, error: BaseException) -> None:
        if self.closed or directory is None or not self.log_dirs.is_online(directory):
            return
        self._take_offline(directory, self.log_dirs.mark_offline(directory, error), error)

    def _take_offline(self, directory: str, keys: list[Key], error: BaseException | str) -> None:
        for key in keys:
            p = self.partitions.pop(key, None)
            if p is not None:
                p.stop()
            self.fetchers.remove(key)
            self._abort_waiters(key)
        self.runtime.emit(LogDirOffline(dir=directory, error=str(error), partitions=tuple(keys)))
        self.runtime.log.error("log directory %s is offline: %s", directory, error)
        self.runtime.spawn(self.notify_log_dir_failure(), name="log-dir-event")

    def handle_offline_error(self, error: LogDirOfflineError) -> None:
        if error.directory is not None and error.newly_offline:
            self._take_offline(error.directory, list(error.newly_offline), error.cause)

    async def notify_log_dir_failure(self) -> None:
        """Tell the controller that a log directory here failed (it asks which replicas)."""
        for _ in range(50):
            zk_client = self.session.zk
            if zk_client is None:
                return
            try:
                await zk_client.create(zk.log_dir_event_path(zk.LOG_DIR_EVENT_PREFIX),
                                       zk.encode_log_dir_event(self.config.broker_id),
                                       sequential=True, makepath=True)
                return
            except (ConnectionLossError, SessionExpiredError, NoNodeError) as e:
                self.runtime.log.warning("log dir event notification failed (%s); retrying", e)
                await self.runtime.sleep(0.5)

    # ------------------------------------------------------------------ LeaderAndIsr

    def stale_incarnation(self, incarnation: int) -> bool:
        """Meant for an older incarnation of this broker? (A newer one can only be the
        registration this broker is completing right now.)"""
        return 0 < incarnation < self.session.incarnation

    def _fence_controller_request(self, name: str, request: LeaderAndIsrRequest | StopReplicaRequest) -> str | None:
        """The error refusing a request meant for an older incarnation of this broker or sent
        by a deposed controller (recorded as a rejected event); None, having adopted its
        controller epoch, if it may be acted on."""
        if self.stale_incarnation(request.broker_incarnation):
            self.runtime.emit(Rejected(request=name, why="stale broker incarnation",
                                       incarnation=request.broker_incarnation))
            return Errors.STALE_BROKER_EPOCH
        if request.controller_epoch < self.controller_epoch:
            self.runtime.emit(Rejected(request=name, why="stale controller epoch",
                                       controller_epoch=request.controller_epoch))
            return Errors.STALE_CONTROLLER_EPOCH
        self.controller_epoch = request.controller_epoch
        return None

    async def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        async with self.state_change_lock:  # one at a time, as Kafka's replicaStateChangeLock
            refused = self._fence_controller_request("LeaderAndIsr", request)
            if refused is not None:
                return LeaderAndIsrResponse(refused)
            self.metadata.remember_brokers(request.live_leaders)
            # Leaders first, then followers, as Kafka's becomeLeaderOrFollower: after a failover
            # the partitions this broker now leads take writes again before it starts the
            # thousands of truncations its new followers need (which would hold up the rest).
            mine = sorted((s for s in request.partitions if self.config.broker_id in s.replicas),
                          key=lambda s: s.leader != self.config.broker_id)
            for topic in sorted({s.topic for s in mine} - set(self.topic_min_isr)):
                self.runtime.spawn(self._learn_min_insync_replicas(topic), name=f"min-isr-{topic}")
            errors: list[PartitionError] = []
            while len(errors) < len(mine):
                if errors:
                    # A controller failover or a large topic sends thousands of partitions at
                    # once: let heartbeats and client requests through between chunks.
                    await self.runtime.sleep(0)
                    if self.closed or self.controller_epoch > request.controller_epoch:
                        errors.extend(PartitionError(s.topic, s.partition, Errors.STALE_CONTROLLER_EPOCH)
                                      for s in mine[len(errors):])  # a newer controller spoke meanwhile
                        break
                errors.extend(self._apply_chunk(mine, len(errors), request.is_init))
            self.compaction.role_changes_applied(self.runtime.monotonic())
            return LeaderAndIsrResponse(None, tuple(errors))

    def _apply_chunk(self, states: list[PartitionState], start: int, is_init: bool) -> list[PartitionError]:
        """Apply ``states[start:]`` until LEADER_AND_ISR_CHUNK of them, or for as long as the
        last chunk's sync took (within the bounds above): on a busy disk a sync takes tens of
        milliseconds, and fixed 10 ms chunks then spent most of a failover syncing."""
        # Becoming leader records the new epoch in the partition's epoch cache: the chunk's
        # records are group-committed (one journal sync per log directory), and the answer
        # (what the controller counts as done) waits until they are durable. Nothing yields
        # in between, so no request is served by a leader whose epoch is not yet durable.
        began = self.runtime.monotonic()
        work_for = min(max(LEADER_AND_ISR_CHUNK_SECONDS, self._last_sync_seconds), LEADER_AND_ISR_CHUNK_MAX_SECONDS)
        errors: list[PartitionError] = []
        self.log_dirs.defer_syncs()
        try:
            for s in states[start:start + LEADER_AND_ISR_CHUNK]:
                errors.append(PartitionError(s.topic, s.partition, self._apply_state(s, is_init)))
                if self.runtime.monotonic() - began > work_for:
                    break  # creating logs is slow on some disks: never hold the loop long
        finally:
            syncing = self.runtime.monotonic()
            for failure in self.log_dirs.complete_syncs():
                self._path_failed(failure)
            self._last_sync_seconds = self.runtime.monotonic() - syncing
        return [PartitionError(e.topic, e.partition, Errors.KAFKA_STORAGE_ERROR)
                if e.error is None and self.log_dirs.is_offline(e.topic, e.partition) else e
                for e in errors]

    def _apply_state(self, state: PartitionState, is_init: bool) -> str | None:
        key = (state.topic, state.partition)
        if self.log_dirs.is_offline(*key):
            return Errors.KAFKA_STORAGE_ERROR
        p = self.partitions.get(key)
        if p is None:
            try:
                p = self._open(state.topic, state.partition, is_new=state.is_new)
            except LogDirOfflineError as error:
                self.handle_offline_error(error)
                return Errors.KAFKA_STORAGE_ERROR
        if not p.accepts(state, is_init):
            self.runtime.emit(Rejected(request="LeaderAndIsr", why="leader epoch not newer",
                                       topic=state.topic, partition=state.partition,
                                       leader_epoch=state.leader_epoch, current_leader_epoch=p.leader_epoch))
            return Errors.FENCED_LEADER_EPOCH
        was_leader_epoch = (p.role, p.leader_epoch)
        p.min_insync_replicas = self.topic_min_isr.get(state.topic, self.config.min_insync_replicas)
        try:
            if state.leader == self.config.broker_id:
                self.fetchers.remove(key)
                self.guarded(p, lambda: p.make_leader(state, self.runtime.wall_time()))
            else:
                if p.make_follower(state):
                    self.fetchers.remove(key)
                    if state.leader >= 0:
                        self.fetchers.add(p)
                elif state.leader >= 0 and not self.fetchers.has(key):
                    self.fetchers.add(p)
        except ReplicaOffline:
            return Errors.KAFKA_STORAGE_ERROR
        if (p.role, p.leader_epoch) != was_leader_epoch:
            self._abort_waiters(key)  # waiting requests re-check the new role
        return None

    def start_replica(self, topic: str, partition: int) -> None:
        """Open (and recover) a local replica at start-up; it has no role until LeaderAndIsr."""
        if (topic, partition) in self.partitions or self.log_dirs.is_offline(topic, partition):
            return
        try:
            self._open(topic, partition)
        except LogDirOfflineError as error:
            self.handle_offline_error(error)

    def _open(self, topic: str, partition: int, *, is_new: bool = False) -> Partition:
        log = self.log_dirs.open_log(topic, partition, is_new=is_new)
        key = (topic, partition)
        checkpointed = self.checkpointed_high_watermarks.get(key, 0)
        recovery = getattr(log, "recovery", None)
        if recovery is not None or checkpointed > log.log_end:
            # Records the log no longer has: a torn tail, or (after a power loss) records
            # that were never flushed, possibly below the HW. Other replicas still have
            # anything committed; say what this replica lost.
            self.runtime.emit(Truncated(topic=topic, partition=partition, leader_epoch=-1,
                                        from_offset=max(checkpointed, log.log_end), to_offset=log.log_end,
                                        reason="recovery",
                                        detail=recovery.reason if recovery is not None else "unflushed records lost"))
        if not is_new:
            self._announce_recovered(topic, partition, log, checkpointed)
        p = Partition(topic, partition, self.config.broker_id, log, high_watermark=checkpointed,
                      variant=self.config.variant, emit=self.runtime.emit)
        hw_waiters = self.high_watermark_waiters.setdefault(key, OffsetWaiters())
        end_waiters = self.log_end_waiters.setdefault(key, OffsetWaiters())
        p.on_high_watermark = lambda q: hw_waiters.advance(q.high_watermark)
        signal = self.append_signal

        def log_end_moved(q: Partition) -> None:
            end_waiters.advance(q.log_end)
            signal.notify()

        p.on_log_end = log_end_moved
        self.partitions[key] = p
        return p

    def _announce_recovered(self, topic: str, partition: int, log: PartitionLog, checkpointed: int) -> None:
        """Say what the recovered log holds above its checkpointed HW. A record is written
        before its ``appended`` event, so a broker stopped between the two (SIGKILL, power
        loss) holds a record it never announced; only the uncommitted tail can be one, since
        the HW moves past a record only after its event. Without this, checkers would read
        "never announced" as "never held"."""
        start = max(log.log_start, min(checkpointed, log.log_end))
        if start >= log.log_end:
            return
        self.runtime.emit(records_appended(topic, partition, log.read(start, log.log_end - start), "recovery"))

    def _abort_waiters(self, key: Key) -> None:
        for waiters in (self.high_watermark_waiters.get(key), self.log_end_waiters.get(key)):
            if waiters is not None:
                waiters.abort()

    # ------------------------------------------------------------------ StopReplica

    def handle_stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        refused = self._fence_controller_request("StopReplica", request)
        if refused is not None:
            return StopReplicaResponse(refused)
        errors = []
        self.log_dirs.defer_syncs()  # deleting thousands of replicas: one journal sync per directory
        try:
            for tp in request.partitions:
                errors.append(PartitionError(tp.topic, tp.partition,
                                             self.stop_replica(tp.topic, tp.partition, delete=request.delete)))
        finally:
            for failure in self.log_dirs.complete_syncs():
                self._path_failed(failure)
        return StopReplicaResponse(None, tuple(errors))

    def stop_replica(self, topic: str, partition: int, *, delete: bool) -> str | None:
        key = (topic, partition)
        self.fetchers.remove(key)
        p = self.partitions.get(key)
        if p is not None:
            p.stop()
            self._abort_waiters(key)
        if not delete:
            return None
        self.partitions.pop(key, None)
        self.checkpointed_high_watermarks.pop(key, None)
        try:
            self.log_dirs.delete(topic, partition)
        except LogDirOfflineError as error:
            self.handle_offline_error(error)
            return Errors.KAFKA_STORAGE_ERROR
        return None

    # ------------------------------------------------------------------ checkpoints

    def load_high_watermarks(self) -> list[LogDirOfflineError]:
        """Start-up: read the HW checkpoints; returns the directories that failed doing so."""
        self.checkpointed_high_watermarks, failures = self.log_dirs.read_high_watermarks()
        return failures

    def checkpoint_high_watermarks(self) -> None:
        current = dict(self.checkpointed_high_watermarks)
        for key, p in self.partitions.items():
            current[key] = p.high_watermark
        for error in self.log_dirs.write_high_watermarks(current):
            self.handle_offline_error(error)
        self.checkpointed_high_watermarks = current

    async def checkpoint_loop(self) -> None:
        while True:
            await self.runtime.sleep(self.config.high_watermark_checkpoint_interval)
            async with self.state_change_lock:  # not in the middle of a failover's LeaderAndIsr
                self.checkpoint_high_watermarks()
            if self.compaction.due(self.runtime.monotonic()):
                await self.compact_epoch_journals()

    async def compact_epoch_journals(self) -> None:
        """Rewrite the epoch checkpoint files the journals are ahead of, a step at a time,
        until a LeaderAndIsr comes (the rest waits for a later round: :mod:`.epoch_compaction`)."""
        while not self.closed and not self.state_change_lock.locked():
            remaining, failures = self.log_dirs.compact_epoch_journals(EPOCH_COMPACTION_STEP)
            for error in failures:
                self.handle_offline_error(error)
            if not remaining:
                return
            await self.runtime.sleep(0)  # let requests and LeaderAndIsr through between steps

    async def flush_loop(self, interval: float) -> None:
        """fsync every log every ``interval`` (off by default: durability comes from the ISR)."""
        while True:
            await self.runtime.sleep(interval)
            self.flush_all()

    def flush_all(self) -> None:
        for key in sorted(self.partitions):
            p = self.partitions.get(key)
            if p is None:
                continue
            with contextlib.suppress(ReplicaOffline):
                self.guarded(p, p.log.flush)

    def close(self) -> None:
        """Clean shutdown: checkpoint the HWs and flush the logs; later disk errors are not
        failures (requests still in flight must not see "disk failure")."""
        self.checkpoint_high_watermarks()
        self.flush_all()
        self.closed = True

    def fence_all(self, why: str) -> None:
        """KIP-343 self-fencing (already recorded in the session): every replica stops
        acting as leader."""
        for key in sorted(self.partitions):
            p = self.partitions[key]
            if p.role == "leader":
                p.fence(why)
                self._abort_waiters(key)

    def describe(self) -> dict[str, Any]:
        return {f"{k[0]}-{k[1]}": (p.role, p.leader_epoch, p.isr, p.high_watermark, p.log_end)
                for k, p in sorted(self.partitions.items())}
