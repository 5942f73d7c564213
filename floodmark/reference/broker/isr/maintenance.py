"""The leader's ISR duties: drop followers that lag, admit followers that caught up.

A leader watches the followers of every partition it leads. One that has not caught up
for ``replica_lag_time_max`` (measured on the wall clock, as Kafka does, so clock faults
reach it) leaves the ISR, so that the HW may advance without it; one that reaches the
leader's log end again is proposed back (``Partition.begin_expansion`` keeps it counted
until the outcome is known: KIP-497's maximal ISR).

How a change is made depends on the inter-broker protocol: a legacy leader writes the
partition's state node in ZooKeeper itself, conditional on the version it knows
(``updates.write_isr``); a KIP-343 leader asks the controller, all of one round's
shrinks in one request (an :class:`IsrProposer`, the broker's ``IsrChangeRequests``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.broker.isr.updates import write_isr
from floodmark.reference.broker.partition import Partition
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.runtime import Runtime

Key = tuple[str, int]


class IsrProposer(Protocol):
    """KIP-343: has the controller change led partitions' ISRs (instead of writing ZooKeeper)."""

    async def propose_many(self, changes: Sequence[tuple[Partition, tuple[int, ...], str]]) -> list[bool]: ...


class IsrMaintenance:
    """The ISR changes a broker makes as leader, for the partitions ``partitions`` returns."""

    def __init__(self, runtime: Runtime, config: BrokerConfig, session: BrokerSession,
                 partitions: Callable[[], dict[Key, Partition]]) -> None:
        self.runtime = runtime
        self.config = config
        self.session = session  # the broker's: ZooKeeper session, self-fenced
        self.partitions = partitions
        # Set by the broker at the kip-343 inter-broker protocol; None: write ZooKeeper directly.
        self.proposer: IsrProposer | None = None

    async def run(self) -> None:
        """Periodically drop lagging followers from the ISR of every partition we lead."""
        while True:
            await self.runtime.sleep(self.config.isr_check_interval)
            if self.session.fenced:
                continue
            now = self.runtime.wall_time()
            partitions = self.partitions()
            proposals: list[tuple[Partition, tuple[int, ...], str]] = []  # kip-343: one request for all
            for key in sorted(partitions):
                p = partitions.get(key)
                if p is None or not p.is_leader:
                    continue
                lagging = p.followers_to_drop(now, self.config.replica_lag_time_max,
                                              self.config.replica_lag_max_records)
                if lagging:
                    new_isr = tuple(r for r in p.isr if r not in lagging)
                    self.runtime.log.info("%s-%s: shrinking ISR %s -> %s", p.topic, p.partition,
                                          p.isr, new_isr)
                    if self.proposer is not None:
                        proposals.append((p, new_isr, "shrink"))
                    else:
                        await self._write(p, new_isr, "shrink")
            if proposals and self.proposer is not None:
                await self.proposer.propose_many(proposals)

    def expand(self, p: Partition, joining: int) -> None:
        """Write the ISR with ``joining`` added (in the background: the fetch goes on)."""
        if self.session.fenced:
            return
        new_isr = p.begin_expansion(joining)
        self.runtime.spawn(self._write(p, new_isr, "expand"), name=f"isr-{p.topic}-{p.partition}")

    async def _write(self, p: Partition, new_isr: tuple[int, ...], change: str) -> None:
        if self.proposer is not None:
            await self.proposer.propose_many([(p, new_isr, change)])
            return
        zk_client = self.session.zk
        if zk_client is None:
            p.end_isr_update()
            return
        await write_isr(self.runtime, zk_client, p, new_isr, change)
