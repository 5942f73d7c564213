"""The controller's view of the cluster: who may lead a partition right now."""

from __future__ import annotations

from floodmark.reference.controller.context import STOPPING, BrokerLiveness, ControllerContext
from floodmark.reference.protocol.messages import TopicPartition
from floodmark.reference.protocol.zk_layout import BrokerRegistration


class CountingPartition(TopicPartition):
    """A partition that counts how often it is hashed (set lookups)."""

    hashed = 0

    def __hash__(self) -> int:
        CountingPartition.hashed += 1
        return super().__hash__()


def test_who_may_lead_without_hashing_the_partition_when_no_replica_is_offline() -> None:
    ctx = ControllerContext(1)
    for b in (1, 2, 3, 4):
        ctx.brokers[b] = BrokerLiveness(BrokerRegistration(b, f"h:{b}", 10 + b))
    ctx.brokers[3].fenced = True
    ctx.brokers[4].state = STOPPING
    tp, other = CountingPartition("t", 0), TopicPartition("t", 1)
    ctx.offline_replicas[2] = {other}
    assert [ctx.may_lead(b, tp) for b in (1, 2, 3, 4, 5)] == [True, True, False, False, False]
    assert not ctx.may_lead(2, other)
    # A failover asks 60,000 times, mostly about brokers with no offline replica at all.
    CountingPartition.hashed = 0
    assert ctx.may_lead(1, tp)
    assert CountingPartition.hashed == 0
