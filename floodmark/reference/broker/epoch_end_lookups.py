"""Epoch end lookups: a follower's OffsetForLeaderEpoch questions, one request per leader.

Before a follower fetches in a new leader epoch it asks the leader where its own latest
epoch ends (KIP-101/279), once per partition. After a failover a broker starts following
thousands of partitions in the same instant, and one request per partition would put
thousands of small requests in front of a leader that is busy becoming leader of them.
Kafka's fetcher thread asks about every partition awaiting truncation in one
OffsetsForLeaderEpoch request per leader; so does this: each partition's truncation asks
for itself (its rounds and back-offs stay its own), and the questions asked in the same
turn, or while an earlier request to that leader is in flight, leave together.

One request per leader is in flight at a time. A lost request, a leader that cannot be
reached or an answer that lacks a partition answer each of its partitions with None, and
that partition's truncation backs off and asks again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from floodmark.reference.protocol.messages import (
    EpochEnd,
    EpochEndQuery,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from floodmark.reference.runtime import Runtime

Key = tuple[str, int]
AddressOf = Callable[[int], str | None]
"""Where broker ``id`` listens, if known."""


class EpochEndLookups:
    """Batches one follower broker's epoch end questions per leader broker."""

    def __init__(self, runtime: Runtime, replica_id: int, address_of: AddressOf, timeout: float) -> None:
        self.runtime = runtime
        self.replica_id = replica_id
        self._address_of = address_of
        self._timeout = timeout
        self._waiting: dict[int, dict[Key, tuple[EpochEndQuery, asyncio.Future[EpochEnd | None]]]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    async def ask(self, leader: int, query: EpochEndQuery) -> EpochEnd | None:
        """Where ``query``'s epoch ends in ``leader``'s log; None if no answer came."""
        answer: asyncio.Future[EpochEnd | None] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.setdefault(leader, {})
        earlier = waiting.get((query.topic, query.partition))
        if earlier is not None and not earlier[1].done():
            earlier[1].set_result(None)  # superseded: that truncation is no longer current
        waiting[(query.topic, query.partition)] = (query, answer)
        if leader not in self._senders:
            self._senders[leader] = self.runtime.spawn(self._send(leader), name=f"epoch-ends-from-{leader}")
        return await answer

    def stop_all(self) -> None:
        for leader in sorted(self._senders):
            self._senders.pop(leader).cancel()
        for waiting in self._waiting.values():
            for _, answer in waiting.values():
                if not answer.done():
                    answer.set_result(None)
        self._waiting.clear()

    async def _send(self, leader: int) -> None:
        try:
            await self.runtime.sleep(0)  # the partitions that start truncating this turn ask too
            while True:
                batch = [(q, a) for q, a in self._waiting.pop(leader, {}).values() if not a.done()]
                if not batch:
                    return
                answers = await self._request(leader, tuple(q for q, _ in batch))
                for query, answer in batch:
                    if not answer.done():
                        answer.set_result(answers.get((query.topic, query.partition)))
        finally:
            if self._senders.get(leader) is asyncio.current_task():
                del self._senders[leader]

    async def _request(self, leader: int, queries: tuple[EpochEndQuery, ...]) -> dict[Key, EpochEnd]:
        address = self._address_of(leader)
        if address is None:
            return {}
        try:
            response = await self.runtime.network.request(
                address, OffsetForLeaderEpochRequest(self.replica_id, queries), self._timeout)
        except (ConnectionError, TimeoutError):
            return {}
        if not isinstance(response, OffsetForLeaderEpochResponse) or response.error is not None:
            return {}
        return {(end.topic, end.partition): end for end in response.partitions}
