"""The leader's acks=all wait (``floodmark.reference.broker.produce.handle_produce``) ends in an
acknowledgement only if the replica still leads in the epoch it appended in.

After the wait, the HW alone does not say the batch was committed: a replica that stopped
leading meanwhile truncates as a follower and copies its new leader's records, and its HW
then covers those, at the batch's offsets. Acknowledging on the HW would report a record
the log no longer holds. In a running broker the replica manager wakes the waiting request
at the role change, before any follower fetch can move the HW, so the HW check that follows
refuses it too; this drives the handler directly to hold the epoch rule on its own (a
mutation that dropped it passed every broker test and 60 explored seeds: 86 requests reached
it, none with the HW past the batch).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from floodmark.contracts.node_events import Acked, KnownKind
from floodmark.reference.broker.offset_waiters import OffsetWaiters
from floodmark.reference.broker.partition import Partition
from floodmark.reference.broker.produce import handle_produce
from floodmark.reference.log.partition_log import PartitionLog
from floodmark.reference.protocol.messages import (
    ACKS_ALL,
    Errors,
    PartitionState,
    ProduceRequest,
    ProduceResponse,
    Record,
)
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.reference.sim.disk import SimDisk

T = TypeVar("T")


class OneReplica:
    """Enough of ``ReplicaManager`` for ``handle_produce``: one replica of t-0."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.high_watermark_waiters = {("t", 0): OffsetWaiters()}

    def leader_error(self, topic: str, number: int) -> tuple[Partition | None, str | None]:
        return (self.partition, None) if self.partition.is_leader else (None, Errors.NOT_LEADER)

    def get(self, topic: str, number: int) -> Partition:
        return self.partition

    async def min_insync_replicas(self, topic: str) -> int:
        return 1

    def guarded(self, p: Partition, action: Callable[[], T]) -> T:
        return action()


class Runtime:
    """Enough of a runtime for ``handle_produce``: it only emits node events."""

    def __init__(self) -> None:
        self.events: list[KnownKind] = []

    def emit(self, event: KnownKind) -> None:
        self.events.append(event)


def state(leader: int, epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState("t", 0, leader, epoch, isr, 0, (1, 2), controller_epoch=1)


def test_a_leader_that_lost_its_epoch_while_waiting_never_acknowledges_what_its_hw_now_covers() -> None:
    runtime = Runtime()
    log = PartitionLog.open(SimDisk(), "/data/t-0")
    p = Partition("t", 0, 1, log, high_watermark=0, variant=VARIANTS["default"], emit=runtime.emit)
    assert p.make_leader(state(1, 1, (1, 2)), now_wall=0.0)
    replicas = OneReplica(p)

    async def scenario() -> ProduceResponse:
        waiting = asyncio.ensure_future(handle_produce(
            runtime, replicas,  # type: ignore[arg-type]
            ProduceRequest("t", 0, ("a",), ACKS_ALL, timeout=5.0, current_leader_epoch=1)))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done() and p.log_end == 1  # appended at 0, waiting for broker 2
        # Broker 2 leads epoch 2 without "a": this replica follows, truncates, copies "b"
        # to offset 0 and learns the leader's HW, 1, which covers the batch's offset.
        assert p.make_follower(state(2, 2, (2,)))
        p.truncate(0, "leader_epoch")
        p.append_as_follower([Record(0, 2, "b")], 1)
        assert p.high_watermark == 1
        replicas.high_watermark_waiters[("t", 0)].advance(p.high_watermark)  # a late wake
        return await waiting

    response = asyncio.run(scenario())
    assert response.error == Errors.REQUEST_TIMED_OUT  # ambiguous: "a" may or may not survive
    assert response.error not in Errors.DEFINITELY_NOT_WRITTEN
    assert [e for e in runtime.events if isinstance(e, Acked)] == []
