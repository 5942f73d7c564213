"""Client side: finding partition leaders through cluster metadata.

Clients (producer, consumer, admin) learn where each partition's leader lives by asking
any broker for metadata; every broker holds the controller's latest UpdateMetadata. The
answer may be stale: during a leader change a broker can still name the old leader. Clients
therefore treat metadata as a hint, and refresh it whenever a broker says it is not the
leader, that their leader epoch is stale, or cannot be reached. Requests carry the leader
epoch the client knows (KIP-320), so a broker can tell a client with stale metadata from
one with newer metadata than its own.

Brokers are addressed by what they advertise; the bootstrap list is where a client starts.
This module is protocol code: it uses only the :class:`~floodmark.reference.runtime.Runtime`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from floodmark.reference.protocol.messages import (
    NO_EPOCH,
    BrokerInfo,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicPartition,
)
from floodmark.reference.runtime import Runtime


class ClientError(Exception):
    """A client call that could not be carried out (bad arguments, no reachable broker)."""


@dataclass(frozen=True)
class LeaderInfo:
    broker_id: int
    address: str
    leader_epoch: int


class ClientMetadata:
    """The client's view of brokers and partition leaders, refreshed on demand."""

    def __init__(self, runtime: Runtime, bootstrap: Sequence[str], *, request_timeout: float = 2.0) -> None:
        if not bootstrap:
            raise ClientError("no bootstrap brokers given")
        self.runtime = runtime
        self.bootstrap = list(bootstrap)
        self.request_timeout = request_timeout
        self.brokers: dict[int, BrokerInfo] = {}
        self.partitions: dict[TopicPartition, PartitionMetadata] = {}
        self.controller_id = -1
        self._leaders: dict[TopicPartition, LeaderInfo] = {}  # what leader() last answered
        self._next = 0  # which address to ask next: spreads load and skips dead brokers

    def _addresses(self) -> list[str]:
        known = [b.address for _, b in sorted(self.brokers.items())]
        addresses = known + [a for a in self.bootstrap if a not in known]
        start = self._next % len(addresses)
        self._next += 1
        return addresses[start:] + addresses[:start]

    async def refresh(self, topics: Sequence[str] | None = None) -> bool:
        """Ask brokers in turn until one answers; False if none could."""
        request = MetadataRequest(tuple(topics) if topics is not None else None)
        for address in self._addresses():
            try:
                response = await self.runtime.network.request(address, request, self.request_timeout)
            except (ConnectionError, TimeoutError, OSError):
                continue
            if not isinstance(response, MetadataResponse):
                continue
            self._apply(response, topics)
            return True
        return False

    def _apply(self, response: MetadataResponse, topics: Sequence[str] | None) -> None:
        self._leaders = {}
        if response.brokers:
            self.brokers = {b.broker_id: b for b in response.brokers}
        self.controller_id = response.controller_id
        if topics is None:
            self.partitions = {}
        else:
            wanted = set(topics)
            self.partitions = {tp: p for tp, p in self.partitions.items() if tp.topic not in wanted}
        for p in response.partitions:
            tp = TopicPartition(p.topic, p.partition)
            old = self.partitions.get(tp)
            # Never step back to an older leader epoch because one broker lags behind.
            if old is None or p.leader_epoch >= old.leader_epoch or p.error is not None:
                self.partitions[tp] = p

    def leader(self, tp: TopicPartition) -> LeaderInfo | None:
        known = self._leaders.get(tp)  # every request asks: answer from what was worked out
        if known is not None:
            return known
        p = self.partitions.get(tp)
        if p is None or p.error is not None or p.leader < 0:
            return None
        broker = self.brokers.get(p.leader)
        if broker is None:
            return None
        known = self._leaders[tp] = LeaderInfo(p.leader, broker.address, p.leader_epoch)
        return known

    def leader_epoch(self, tp: TopicPartition) -> int:
        p = self.partitions.get(tp)
        return p.leader_epoch if p is not None else NO_EPOCH

    async def leader_for(self, tp: TopicPartition, *, refresh: bool = False) -> LeaderInfo | None:
        if refresh or self.leader(tp) is None:
            await self.refresh([tp.topic])
        return self.leader(tp)

    def invalidate(self, tp: TopicPartition) -> None:
        """Forget what we knew of ``tp`` (its broker said it is not the leader)."""
        self.partitions.pop(tp, None)
        self._leaders.pop(tp, None)
