"""The replica fetcher: how a follower copies its leader's log, by pulling.

Kafka replicates by pull: each follower fetches from the leader, appends what it gets, and
learns the HW from the answer. Before fetching in a new leader epoch the follower removes
whatever its log has that the leader's does not, **by leader epoch** (KIP-101, KIP-279):

1. it asks the leader for the end of its own latest epoch (OffsetForLeaderEpoch, one
   request per leader for every partition truncating at the time: :mod:`epoch_end_lookups`);
2. the leader answers with the largest epoch it has that is not newer, and where that
   epoch ends in its log;
3. if the follower has that epoch too, it truncates to the smaller of the two end offsets;
   if not, it truncates to where its own log leaves that epoch and asks again.

The ``truncate-to-hw`` variant does what Kafka did before KIP-101: truncate to the
follower's own HW and fetch from there. The follower's HW lags the leader's by a fetch,
so this can remove committed records, which are then lost if this follower is elected
before it fetches them again.

Every fetch carries the follower's view of the leader epoch and the epoch of its last
record; a leader in another epoch refuses it (KIP-320), and a leader whose log diverges
from the follower's says so, and the follower truncates again before fetching on. A broker
at the ``truncate-on-fetch`` inter-broker protocol skips steps 1 to 3 and relies on that
answer alone (Kafka 2.7, KAFKA-10554): it fetches at once, and the leader, finding the
follower's last epoch ending before the fetch offset (or missing), answers with where it
ends instead of records and does not count the fetch as progress.

A follower fetches all the partitions it follows from one leader in one request (one
*session* per leader broker, as Kafka's fetcher threads do), so a thousand idle partitions
cost one long poll, not a thousand. Truncation runs per partition, before the partition
joins its session's fetches.

The replica manager owns the fetchers: it starts and stops following as the controller
orders, and lends them what they use: the metadata cache (where leaders are), the broker's
session (its incarnation), a lookup of the replicas it holds now (a fetcher whose replica
was replaced or stopped gives up) and its storage guard.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from floodmark.contracts.node_event_kinds import Rejected
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.broker.epoch_end_lookups import EpochEndLookups
from floodmark.reference.broker.metadata_cache import MetadataCache
from floodmark.reference.broker.partition import Partition
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.broker.storage_guard import ReplicaOffline, StorageGuard
from floodmark.reference.log.partition_log import LogAppendError
from floodmark.reference.protocol.messages import (
    NO_EPOCH,
    EpochEndQuery,
    Errors,
    FetchPartition,
    FetchResponse,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
)
from floodmark.reference.runtime import Runtime

Key = tuple[str, int]
ReplicaLookup = Callable[[str, int], Partition | None]
"""The replica the replica manager holds for (topic, partition) now, if any."""


class Stop(Exception):
    """This partition is no longer followed in the epoch its fetcher was started for."""


@dataclass(eq=False)
class Followed:
    """One partition followed in one leader epoch."""

    partition: Partition
    leader: int
    epoch: int
    ready: bool = False  # truncation done: the partition is in its session's fetches
    retry_at: float = 0.0  # after an error, leave it out of fetches until then
    truncation: Any = None  # the task that truncates it before it is ready
    wanted: FetchPartition | None = None  # its entry in the last fetch request, reused while it fits

    def fetch_entry(self) -> FetchPartition:
        """Its entry in a fetch request: built again only once its log moved (thousands are
        sent every round, most of them unchanged)."""
        log = self.partition.log
        wanted = self.wanted
        if wanted is None or wanted.offset != log.log_end or wanted.last_fetched_epoch != log.last_epoch:
            wanted = self.wanted = FetchPartition(self.partition.topic, self.partition.partition, log.log_end,
                                                  self.epoch, log.last_epoch)
        return wanted


class ReplicaFetchers:
    def __init__(self, runtime: Runtime, config: BrokerConfig, metadata: MetadataCache,
                 session: BrokerSession, replica: ReplicaLookup, guarded: StorageGuard) -> None:
        self.runtime = runtime
        self.config = config
        self.metadata = metadata  # where each leader is
        self.session = session  # fetches carry this broker's incarnation
        self._replica = replica
        self._guarded = guarded
        self._followed: dict[Key, Followed] = {}
        self._by_leader: dict[int, list[Followed]] | None = {}  # in key order; None: to rebuild
        self._sessions: dict[int, Any] = {}  # leader broker id -> its fetch session task
        self._wakeups: dict[int, asyncio.Event] = {}
        self._epoch_ends = EpochEndLookups(runtime, config.broker_id, metadata.address_of, config.request_timeout)

    def has(self, key: Key) -> bool:
        return key in self._followed

    def add(self, p: Partition) -> None:
        """Start following ``p`` in its current epoch: truncate, then fetch."""
        self.remove(p.key)
        followed = Followed(p, p.leader_id, p.leader_epoch)
        self._followed[p.key] = followed
        self._by_leader = None
        if self._truncates_first(p):
            followed.truncation = self.runtime.spawn(self._prepare(followed),
                                                     name=f"truncate-{p.topic}-{p.partition}")
        else:
            followed.ready = True
            self._wake(followed.leader)
        self._ensure_session(followed.leader)

    def _truncates_first(self, p: Partition) -> bool:
        """Does ``p`` truncate before its first fetch? Always under ``truncate-to-hw``; else
        unless its history is empty (nothing can diverge) or its broker's protocol truncates
        on the fetch's answer instead."""
        if self.config.variant.truncate_to_high_watermark:
            return True
        return p.log.epoch_cache.latest_epoch != NO_EPOCH and not self.config.protocol.truncation_on_fetch

    def remove(self, key: Key) -> None:
        followed = self._followed.pop(key, None)
        if followed is not None:
            self._by_leader = None
            if followed.truncation is not None:
                followed.truncation.cancel()

    def stop_all(self) -> None:
        for key in sorted(self._followed):
            self.remove(key)
        for leader in sorted(self._sessions):
            self._sessions.pop(leader).cancel()
        self._epoch_ends.stop_all()

    # ------------------------------------------------------------------ bookkeeping

    def _ensure_session(self, leader: int) -> None:
        if leader not in self._sessions:
            self._wakeups.setdefault(leader, asyncio.Event())
            self._sessions[leader] = self.runtime.spawn(self._session(leader), name=f"fetch-from-{leader}")

    def _followed_from(self, leader: int) -> list[Followed]:
        """The partitions followed from ``leader``, in key order. Every fetch round asks, and
        sorting thousands each time cost more than the fetch: sorted again only after a change."""
        if self._by_leader is None:
            self._by_leader = {}
            for _, f in sorted(self._followed.items()):
                self._by_leader.setdefault(f.leader, []).append(f)
        return self._by_leader.get(leader, [])

    def _wake(self, leader: int) -> None:
        event = self._wakeups.get(leader)
        if event is not None:
            event.set()

    def _current(self, f: Followed) -> bool:
        p = f.partition
        return (self._followed.get(p.key) is f and self._replica(p.topic, p.partition) is p
                and p.role == "follower" and p.leader_id == f.leader and p.leader_epoch == f.epoch)

    def _check(self, f: Followed) -> None:
        if not self._current(f):
            raise Stop()

    # ------------------------------------------------------------------ truncation

    async def _prepare(self, f: Followed) -> None:
        try:
            if self.config.variant.truncate_to_high_watermark:
                self._truncate(f, f.partition.high_watermark, "high_watermark")
            else:
                await self._truncate_by_epoch(f)
        except (Stop, ReplicaOffline):
            return
        f.ready = True
        self._wake(f.leader)

    async def _truncate_by_epoch(self, f: Followed) -> None:
        p = f.partition
        while True:
            self._check(f)
            latest = p.log.epoch_cache.latest_epoch
            if latest == NO_EPOCH:
                return  # an empty history: nothing can diverge
            answer = await self._epoch_ends.ask(f.leader, EpochEndQuery(
                p.topic, p.partition, latest, current_leader_epoch=f.epoch))
            self._check(f)
            if answer is None or answer.error is not None:
                await self._backoff(f)
                continue
            if self._truncate_to_leader_epoch(f, answer.leader_epoch, answer.end_offset, "leader_epoch"):
                return

    def _truncate_to_leader_epoch(self, f: Followed, leader_epoch: int, leader_end: int, reason: str) -> bool:
        """Apply one "epoch E ends at O" answer; True when no further round is needed."""
        p = f.partition
        if leader_epoch == NO_EPOCH or leader_end < 0:
            # The leader knows nothing as old as our history: fall back to our HW (Kafka).
            self._truncate(f, p.high_watermark, reason)
            return True
        own_epoch, own_end = p.log.epoch_cache.end_offset_for(leader_epoch, p.log_end)
        if own_epoch != leader_epoch:
            # We never had the leader's epoch: drop everything after our last epoch below
            # it, and ask again about that one.
            target = own_end if own_end >= 0 else p.high_watermark
            self._truncate(f, min(target, leader_end), reason)
            return own_epoch == NO_EPOCH
        self._truncate(f, min(leader_end, own_end), reason)
        return True

    def _truncate(self, f: Followed, offset: int, reason: str) -> None:
        p = f.partition
        self._guarded(p, lambda: p.truncate(max(offset, 0), reason))

    async def _backoff(self, f: Followed) -> None:
        await self.runtime.sleep(self.config.replica_fetch_backoff)
        self._check(f)

    # ------------------------------------------------------------------ fetching

    async def _session(self, leader: int) -> None:
        """Fetch every ready partition led by ``leader``, in one request, until none is left."""
        wakeup = self._wakeups[leader]
        unanswered = 0  # fetches in a row the leader gave no answer to
        try:
            while True:
                mine = self._followed_from(leader)
                if not mine:
                    return
                now = self.runtime.monotonic()
                batch = [f for f in mine if f.ready and f.retry_at <= now and self._current(f)]
                address = self.metadata.address_of(leader)
                if not batch or address is None:
                    wakeup.clear()
                    await self._wait(wakeup, self.config.replica_fetch_backoff)
                    continue
                if await self._fetch(leader, address, batch):
                    unanswered = 0
                    continue
                unanswered += 1
                # A partition that becomes ready for this leader (a new epoch, after its
                # truncation) cuts the wait short.
                wakeup.clear()
                await self._wait(wakeup, self._backoff_after(unanswered))
        finally:
            # No await between finding nothing to follow and this: an add() either came
            # before (and was seen) or comes after (and starts a new session).
            if self._sessions.get(leader) is asyncio.current_task():
                del self._sessions[leader]

    def _backoff_after(self, unanswered: int) -> float:
        """The wait after ``unanswered`` fetches in a row got no answer: doubling from the
        backoff up to its maximum."""
        config = self.config
        return min(config.replica_fetch_backoff_max, config.replica_fetch_backoff * 2 ** min(unanswered - 1, 16))

    async def _wait(self, event: asyncio.Event, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    async def _fetch(self, leader: int, address: str, batch: list[Followed]) -> bool:
        """One fetch for ``batch``, its answers applied; False if the leader gave none."""
        request = ReplicaFetchRequest(
            self.config.broker_id, self.session.incarnation,
            tuple(f.fetch_entry() for f in batch),
            max_records=self.config.replica_fetch_max_records,
            max_wait=self.config.replica_fetch_wait_max)
        try:
            response = await self.runtime.network.request(
                address, request, self.config.request_timeout + self.config.replica_fetch_wait_max)
        except (ConnectionError, TimeoutError):
            return False
        if not isinstance(response, ReplicaFetchResponse) or response.error is not None:
            return False
        sent = {(f.partition.topic, f.partition.partition): (f, wanted)
                for f, wanted in zip(batch, request.partitions)}
        for result in response.partitions:
            f, wanted = sent.get((result.topic, result.partition), (None, None))
            if f is None or wanted is None or not self._current(f) or f.partition.log_end != wanted.offset:
                continue  # no longer followed in that epoch, or truncated meanwhile
            try:
                self._apply(f, result.response)
            except ReplicaOffline:
                continue
        return True

    def _apply(self, f: Followed, response: FetchResponse) -> None:
        p = f.partition
        if response.error is None:
            if response.diverging_epoch != NO_EPOCH or response.diverging_end_offset >= 0:
                self._truncate_to_leader_epoch(f, response.diverging_epoch, response.diverging_end_offset,
                                               "diverging_epoch")
                return
            records = response.batch.records() if response.batch is not None else list(response.records)
            try:
                self._guarded(p, lambda: p.append_as_follower(records, response.high_watermark))
            except LogAppendError as error:
                # The leader's records do not continue our log (only flawed variants get
                # here): say so and retry later; a truncation or the controller sorts it out.
                self.runtime.log.error("%s-%s: cannot append the leader's records: %s",
                                       p.topic, p.partition, error)
                self.runtime.emit(Rejected(request="FetchResponse", why=str(error), topic=p.topic,
                                           partition=p.partition, leader_epoch=f.epoch))
                f.retry_at = self.runtime.monotonic() + self.config.replica_fetch_backoff
            return
        if response.error == Errors.OFFSET_OUT_OF_RANGE and p.log_end > response.log_end >= 0:
            # We are ahead of the leader (the pre-KIP-101 path): cut back to its end.
            self._truncate(f, response.log_end, "high_watermark")
            return
        # Fenced, unknown epoch, not leader yet, storage error on the leader: the controller
        # will tell us what changed; until then leave this partition out for a moment.
        f.retry_at = self.runtime.monotonic() + self.config.replica_fetch_backoff
