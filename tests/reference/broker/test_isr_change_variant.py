"""The ``stale-isr-change-accepted`` variant: a controller that accepts a deposed leader's ISR.

At the ``kip-343`` inter-broker protocol leaders propose ISR changes to the controller. The
scenario: replicas n2 (A, leader in epoch 0), n3 (B), n4 (C); n1 is the controller. A is
cut off from its followers, so it proposes the ISR {A}; that request is delayed in the
network (15 s). Meanwhile A's ZooKeeper session expires: it re-registers as a new
incarnation, the controller elects B (epoch 1, ISR {B, C}) and b1 is acknowledged with
acks=all. A, still cut off from B and C, follows B without getting b1. Then the delayed
request arrives: a stale incarnation proposing in a stale epoch. The fix refuses it
(INVALID_INCARNATION_ID). The variant writes ISR {A} over B's state; B dies, the
controller elects A, the only ISR member left, and b1 is lost.
"""

from __future__ import annotations

from broker_fixtures import SimCluster

from floodmark.reference.protocol.messages import (
    ACKS_ALL,
    IsrChangeRequest,
    IsrChangeResponse,
    ProduceRequest,
    ProduceResponse,
)
from floodmark.reference.sim.message_faults import MessageRule


def produce(cluster: SimCluster, node: str, values: tuple[str, ...]) -> ProduceResponse:
    response = cluster.run(cluster.client.network.request(
        node, ProduceRequest("t", 0, values, acks=ACKS_ALL, timeout=5.0), 10.0))
    assert isinstance(response, ProduceResponse)
    return response


Answers = list[tuple[IsrChangeRequest, IsrChangeResponse]]


def stale_isr_change_scenario(variant: str) -> tuple[ProduceResponse, tuple[int, ...], list[str], Answers]:
    cluster = SimCluster(seed=11, nodes=4, variant=variant, replica_lag_time_max=3.0,
                         inter_broker_protocol="kip-343")
    try:
        controller = cluster.brokers["n1"].controller
        assert controller is not None and controller.is_active
        answers: Answers = []
        handle = controller.handle_isr_change

        async def recorded(request: IsrChangeRequest) -> IsrChangeResponse:
            response = await handle(request)
            answers.append((request, response))
            return response
        controller.handle_isr_change = recorded  # type: ignore[method-assign]
        cluster.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
        assert produce(cluster, "n2", ("a0",)).error is None
        delayed = cluster.world.add_message_rule(MessageRule(
            "delay", frozenset({"IsrChangeRequest"}), sources=frozenset({"n2"}), delay=15.0))
        cluster.world.partition({"n2"}, {"n3", "n4"})
        assert cluster.world.run_until(lambda: delayed.acted > 0, 30.0)  # A proposed {A}
        old_incarnation = cluster.brokers["n2"].incarnation
        cluster.world.expire_session("n2")
        assert cluster.wait_leader("t", 0, 1) == "n3"
        assert cluster.world.run_until(lambda: cluster.brokers["n2"].incarnation > old_incarnation, 30.0)
        acked = produce(cluster, "n3", ("b1",))
        cluster.world.run_for(20.0)  # the delayed proposal reaches the controller
        cluster.world.remove_message_rule(delayed)
        state = cluster.state("t", 0)
        assert state is not None and state.leader == 3
        isr_after = state.isr
        cluster.kill("n3")
        cluster.world.heal()
        cluster.world.run_for(30.0)
        consumed = cluster.consume_all("t", 0)
        assert cluster.world.failures == [], cluster.world.failures
        return acked, isr_after, consumed, answers
    finally:
        cluster.close()


def test_default_refuses_the_stale_proposal_and_keeps_the_acknowledged_record() -> None:
    acked, isr_after, consumed, answers = stale_isr_change_scenario("default")
    stale = [response for request, response in answers if request.partitions[0].leader_epoch == 0]
    assert [r.error for r in stale] == ["INVALID_INCARNATION_ID"]
    assert acked.error is None
    assert isr_after == (3, 4)
    assert consumed == ["a0", "b1"]


def test_the_variant_writes_the_stale_isr_and_loses_the_acknowledged_record() -> None:
    acked, isr_after, consumed, answers = stale_isr_change_scenario("stale-isr-change-accepted")
    stale = [response for request, response in answers if request.partitions[0].leader_epoch == 0]
    assert [(r.error, r.partitions[0].leader, r.partitions[0].isr) for r in stale] == [(None, 3, (2,))]
    assert acked.error is None
    assert isr_after == (2,)  # the deposed leader's proposal landed on B's state
    assert "b1" not in consumed and consumed == ["a0"]

