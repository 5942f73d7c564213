"""ISR change requests (KIP-343) on the simulated runtime: every answer the controller gives,
and what the leader does with it.

Brokers run at the ``kip-343`` inter-broker protocol. Raw requests sent from the cluster's
client show each error path of the controller (top-level and per partition, in request
order, with one batched ZooKeeper transaction for the accepted changes); the real leaders
show the other side: an ISR change never touches ZooKeeper from the broker, is not acted on
before the controller accepted it, and is retried until a controller (a new one, after a
controller change) answers.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_fixtures import SimCluster, request

from floodmark.contracts.node_events import (
    BrokerState,
    ControllerResigned,
    IsrChanged,
    IsrWritten,
    Rejected,
)
from floodmark.reference.broker.isr import maintenance as isr_maintenance
from floodmark.reference.controller.controller import Controller
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    ACKS_ALL,
    Errors,
    IsrChangePartition,
    IsrChangeRequest,
    IsrChangeResponse,
    ProduceRequest,
    ProduceResponse,
)
from floodmark.reference.sim.message_faults import MessageRule

LED_BY_2 = 7  # partitions 0..6 of "t" are led by broker 2; partition 7 by broker 3


def kip343_cluster(**config: object) -> SimCluster:
    cluster = SimCluster(seed=5, nodes=4, replica_lag_time_max=3.0, inter_broker_protocol="kip-343",
                         **config)  # type: ignore[arg-type]
    assert active_controller(cluster) == "n1"
    return cluster


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimCluster]:
    def no_direct_writes(*args: object) -> None:
        raise AssertionError("a kip-343 leader wrote its ISR to ZooKeeper itself")
    monkeypatch.setattr(isr_maintenance, "write_isr", no_direct_writes)
    c = kip343_cluster()
    assignment = {p: (2, 3, 4) for p in range(LED_BY_2)}
    assignment[LED_BY_2] = (3, 2, 4)
    c.create_topic("t", LED_BY_2 + 1, 3, min_isr=2, assignment=assignment)
    yield c
    assert c.world.failures == [], c.world.failures
    c.close()


def active_controller(cluster: SimCluster) -> str:
    data, _ = cluster.world.zk.get(zk.CONTROLLER)
    return cluster.name_of(zk.decode_controller(data))


def controller_of(cluster: SimCluster, name: str) -> Controller:
    controller = cluster.brokers[name].controller
    assert controller is not None
    return controller


def ask(cluster: SimCluster, node: str, broker: int, incarnation: int,
        *proposals: tuple[str, int, int, tuple[int, ...]]) -> IsrChangeResponse:
    """Propose each ISR against the partition's current state (as an up-to-date leader does)."""
    response = request(cluster, node, IsrChangeRequest(
        broker, incarnation, tuple(IsrChangePartition(t, p, e, isr, current_version(cluster, t, p))
                                   for t, p, e, isr in proposals)))
    assert isinstance(response, IsrChangeResponse), response
    return response


def current_version(cluster: SimCluster, topic: str, partition: int) -> int:
    state = cluster.state(topic, partition)
    return -1 if state is None else state.zk_version


def epoch(cluster: SimCluster, partition: int) -> int:
    state = cluster.state("t", partition)
    assert state is not None
    return state.leader_epoch


def produce(cluster: SimCluster, node: str, value: str) -> ProduceResponse:
    response = cluster.run(cluster.client.network.request(
        node, ProduceRequest("t", 0, (value,), acks=ACKS_ALL, timeout=3.0), 8.0))
    assert isinstance(response, ProduceResponse)
    return response


# ----------------------------------------------------------------------------- top-level errors


def test_a_broker_that_is_not_controller_answers_not_controller(cluster: SimCluster) -> None:
    incarnation = cluster.brokers["n2"].incarnation
    response = ask(cluster, "n2", 2, incarnation, ("t", 0, epoch(cluster, 0), (2, 3)))
    assert response == IsrChangeResponse(Errors.NOT_CONTROLLER)
    assert cluster.state("t", 0).isr == (2, 3, 4)  # type: ignore[union-attr]


def test_an_older_incarnation_is_refused_as_a_whole(cluster: SimCluster) -> None:
    incarnation = cluster.brokers["n2"].incarnation
    response = ask(cluster, "n1", 2, incarnation - 1, ("t", 0, epoch(cluster, 0), (2, 3)))
    assert response == IsrChangeResponse(Errors.INVALID_INCARNATION_ID)
    assert cluster.state("t", 0).isr == (2, 3, 4)  # type: ignore[union-attr]


def test_a_registration_the_controller_has_not_read_is_unknown_and_retriable(cluster: SimCluster) -> None:
    incarnation = cluster.brokers["n2"].incarnation
    response = ask(cluster, "n1", 2, incarnation + 1000, ("t", 0, epoch(cluster, 0), (2, 3)))
    assert response == IsrChangeResponse(Errors.UNKNOWN_INCARNATION_ID)
    response = ask(cluster, "n1", 9, 1, ("t", 0, epoch(cluster, 0), (2, 3)))  # no such broker
    assert response == IsrChangeResponse(Errors.UNKNOWN_INCARNATION_ID)


def test_a_broker_the_controller_fenced_is_refused() -> None:
    # n2 never fences itself here, so it keeps its incarnation while the controller fences it.
    c = kip343_cluster(node_config={"n2": {"broker_fence_timeout": None}})
    try:
        c.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
        c.world.partition({"n2"}, {"n1"})
        assert c.world.run_until(lambda: any(
            e.state == "Fenced" and e.broker == 2 for e in c.events("n1", BrokerState)), 30.0)
        response = ask(c, "n1", 2, c.brokers["n2"].incarnation, ("t", 0, 0, (2, 3)))
        assert response == IsrChangeResponse(Errors.BROKER_FENCED)
        assert c.world.failures == []
    finally:
        c.close()


# ----------------------------------------------------------------------------- per partition


def test_each_partition_is_answered_in_request_order_and_the_accepted_are_written_at_once(
        cluster: SimCluster) -> None:
    incarnation = cluster.brokers["n2"].incarnation
    e = epoch(cluster, 0)
    zkw = controller_of(cluster, "n1").zkw
    before = zkw.transactions
    response = ask(
        cluster, "n1", 2, incarnation,
        ("t", LED_BY_2, epoch(cluster, LED_BY_2), (3, 2)),  # led by broker 3
        ("t", 0, e + 1, (2, 3)),  # an epoch broker 2 does not lead in
        ("t", 1, e, ()),  # empty
        ("t", 2, e, (2, 5)),  # not a replica
        ("t", 3, e, (3, 4)),  # without the leader
        ("u", 0, 0, (2,)),  # no such partition
        ("t", 4, e, (2, 3)),  # a shrink
        ("t", 5, e, (2, 4)),  # another shrink
        ("t", 6, e, (2, 3, 4)),  # already the ISR
        ("t", 4, e, (2, 4)),  # the same partition twice
    )
    assert response.error is None
    assert [(r.topic, r.partition, r.error) for r in response.partitions] == [
        ("t", LED_BY_2, Errors.NOT_LEADER_FOR_PARTITION),
        ("t", 0, Errors.NOT_LEADER_FOR_PARTITION),
        ("t", 1, Errors.INVALID_REQUEST),
        ("t", 2, Errors.INVALID_REQUEST),
        ("t", 3, Errors.INVALID_REQUEST),
        ("u", 0, Errors.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 4, None),
        ("t", 5, None),
        ("t", 6, None),
        ("t", 4, Errors.INVALID_REQUEST),
    ]
    assert zkw.transactions == before + 1  # both shrinks in one epoch-fenced multi
    for result, isr in zip(response.partitions[6:8], [(2, 3), (2, 4)]):
        state = cluster.state("t", result.partition)
        assert state is not None and state.isr == isr
        assert (result.leader, result.leader_epoch, result.isr, result.zk_version) == (2, e, isr, state.zk_version)
        assert result.zxid is not None
    unchanged = response.partitions[8]
    assert unchanged.zxid is None and unchanged.zk_version == cluster.state("t", 6).zk_version  # type: ignore[union-attr]
    for p in (0, 1, 2, 3, 6):
        assert cluster.state("t", p).isr == (2, 3, 4)  # type: ignore[union-attr]
    # The other brokers learn the new ISRs from UpdateMetadata.
    assert cluster.world.run_until(
        lambda: cluster.brokers["n3"].metadata.partitions[("t", 4)].isr == (2, 3), 5.0)


def test_adding_a_replica_the_controller_fenced_is_invalid() -> None:
    c = kip343_cluster(node_config={"n4": {"broker_fence_timeout": None}})
    try:
        c.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
        c.world.partition({"n4"}, {"n1", "n2", "n3"})
        assert c.world.run_until(lambda: c.state("t", 0).isr == (2, 3), 30.0)  # type: ignore[union-attr]
        assert c.world.run_until(lambda: any(
            e.state == "Fenced" and e.broker == 4 for e in c.events("n1", BrokerState)), 30.0)
        response = ask(c, "n1", 2, c.brokers["n2"].incarnation, ("t", 0, epoch(c, 0), (2, 3, 4)))
        assert [r.error for r in response.partitions] == [Errors.INVALID_REQUEST]
        assert c.world.failures == []
    finally:
        c.close()


# ----------------------------------------------------------------------------- the leader's side


def test_the_leader_shrinks_and_expands_through_the_controller(cluster: SimCluster) -> None:
    fault = cluster.world.partition({"n4"}, {"n2"})
    assert cluster.world.run_until(lambda: cluster.state("t", 0).isr == (2, 3), 30.0)  # type: ignore[union-attr]
    cluster.world.restore(fault)
    assert cluster.world.run_until(lambda: cluster.state("t", 0).isr == (2, 3, 4), 30.0)  # type: ignore[union-attr]
    leader = cluster.replica("n2", "t", 0)
    assert leader is not None and leader.isr == (2, 3, 4)
    assert leader.zk_version == cluster.state("t", 0).zk_version  # type: ignore[union-attr]
    changes = [(e.change, e.isr) for e in cluster.events("n2", IsrChanged) if e.partition == 0]
    assert changes == [("shrink", (2, 3)), ("expand", (2, 3, 4))]


def test_the_leader_acts_on_nothing_the_controller_has_not_accepted(cluster: SimCluster) -> None:
    lost = cluster.world.add_message_rule(MessageRule("drop", frozenset({"IsrChangeRequest"})))
    cluster.world.partition({"n4"}, {"n2"})
    assert cluster.world.run_until(lambda: lost.acted >= 2, 30.0)  # proposed, and proposed again
    leader = cluster.replica("n2", "t", 0)
    assert leader is not None and leader.isr == (2, 3, 4) and leader.isr_update_pending
    assert cluster.state("t", 0).isr == (2, 3, 4)  # type: ignore[union-attr]
    # acks=all still needs the old ISR, which includes the cut-off n4: nothing is acknowledged.
    assert produce(cluster, "n2", "v1").error is not None
    cluster.world.remove_message_rule(lost)
    assert cluster.world.run_until(lambda: leader.isr == (2, 3), 10.0)
    assert cluster.state("t", 0).isr == (2, 3)  # type: ignore[union-attr]
    assert produce(cluster, "n2", "v2").error is None


def test_the_leader_asks_the_next_controller_after_a_controller_change(cluster: SimCluster) -> None:
    unheard = cluster.world.add_message_rule(MessageRule(
        "drop", frozenset({"IsrChangeRequest"}), destinations=frozenset({"n1"})))
    cluster.world.partition({"n4"}, {"n2"})
    assert cluster.world.run_until(lambda: unheard.acted >= 1, 30.0)
    old_epoch = controller_of(cluster, "n1").epoch
    cluster.kill("n1")
    leader = cluster.replica("n2", "t", 0)
    assert leader is not None
    assert cluster.world.run_until(lambda: leader.isr == (2, 3), 40.0)
    assert active_controller(cluster) != "n1"
    state = cluster.state("t", 0)
    assert state is not None and state.isr == (2, 3) and state.zk_version == leader.zk_version
    assert state.controller_epoch > old_epoch  # written by the successor


def test_shrinks_found_by_one_isr_check_go_in_one_request(cluster: SimCluster) -> None:
    controller = controller_of(cluster, "n1")
    seen: list[IsrChangeRequest] = []
    handle = controller.handle_isr_change

    async def recorded(message: IsrChangeRequest) -> IsrChangeResponse:
        seen.append(message)
        return await handle(message)
    controller.handle_isr_change = recorded  # type: ignore[method-assign]
    writes = controller.zkw.transactions
    cluster.world.partition({"n4"}, {"n2"})
    assert cluster.world.run_until(
        lambda: all(cluster.state("t", p).isr == (2, 3) for p in range(LED_BY_2)), 30.0)  # type: ignore[union-attr]
    from_leader = [m for m in seen if m.broker_id == 2]
    assert [sorted(e.partition for e in m.partitions) for m in from_leader] == [list(range(LED_BY_2))]
    assert seen == from_leader and controller.zkw.transactions == writes + 1  # one batched write


def test_a_proposal_that_arrives_after_a_newer_change_is_refused() -> None:
    # Explore seed 183: a shrink held back in the network past the request's timeout, the
    # leader's retry accepted, then an expansion accepted; the first request landing last
    # must not shrink the ISR again behind the leader's back (it never learns of it).
    c = kip343_cluster()
    try:
        c.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
        held = c.world.add_message_rule(MessageRule("delay", frozenset({"IsrChangeRequest"}), delay=15.0, count=1))
        cut = c.world.partition({"n4"}, {"n2"})
        assert c.world.run_until(lambda: held.acted == 1, 30.0)
        assert c.world.run_until(lambda: c.state("t", 0).isr == (2, 3), 10.0)  # type: ignore[union-attr]
        c.world.restore(cut)
        assert c.world.run_until(lambda: c.state("t", 0).isr == (2, 3, 4), 5.0)  # type: ignore[union-attr]
        c.world.run_for(15.0)  # the held shrink lands
        leader = c.replica("n2", "t", 0)
        state = c.state("t", 0)
        assert leader is not None and state is not None
        assert (state.isr, state.zk_version) == (leader.isr, leader.zk_version) == ((2, 3, 4), 2)
        assert [e.isr for e in c.events("n1", IsrWritten)] == [(2, 3), (2, 3, 4)]
        assert c.world.failures == []
    finally:
        c.close()


def test_a_deposed_leader_drops_the_change_the_controller_refuses() -> None:
    # n2 never fences itself, and no LeaderAndIsr reaches it: it goes on believing it leads.
    c = kip343_cluster(node_config={"n2": {"broker_fence_timeout": None}})
    try:
        c.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
        c.world.add_message_rule(MessageRule("drop", frozenset({"LeaderAndIsrRequest"}),
                                             destinations=frozenset({"n2"})))
        cut = c.world.partition({"n2"}, {"n1"})
        assert c.wait_leader("t", 0, 1) == "n3"  # the controller fenced n2 and moved its leadership
        c.world.restore(cut)  # n2 is heard again; its followers now follow n3, so it shrinks
        deposed = c.replica("n2", "t", 0)
        assert deposed is not None and deposed.is_leader and deposed.leader_epoch == 0

        def refusals() -> list[str]:
            return [e.why for e in c.events("n2", Rejected) if e.request == "IsrChange"]
        assert c.world.run_until(lambda: any(Errors.NOT_LEADER_FOR_PARTITION in why for why in refusals()), 30.0)
        assert deposed.isr == (2, 3, 4) and not deposed.isr_update_pending  # dropped, never acted on
        assert [e for e in c.events("n2", IsrChanged) if e.partition == 0] == []
        state = c.state("t", 0)
        assert state is not None and (state.leader, state.leader_epoch) == (3, 1) and 2 not in state.isr
        assert c.world.failures == []
    finally:
        c.close()


def test_a_deposed_controller_writes_nothing_and_answers_not_controller(cluster: SimCluster) -> None:
    # Another election bumped /controller_epoch behind n1's back (n1 has not noticed yet).
    data, stat = cluster.world.zk.get(zk.CONTROLLER_EPOCH)
    bumped = zk.encode_controller_epoch(zk.decode_controller_epoch(data) + 1)
    cluster.run(cluster.admin.zk.set(zk.CONTROLLER_EPOCH, bumped, stat.version))
    before = cluster.state("t", 0)
    assert before is not None
    response = ask(cluster, "n1", 2, cluster.brokers["n2"].incarnation, ("t", 0, before.leader_epoch, (2, 3)))
    assert response == IsrChangeResponse(Errors.NOT_CONTROLLER)
    assert cluster.state("t", 0) == before  # the epoch check refused the whole multi
    resigned = cluster.events("n1", ControllerResigned)  # and n1 steps down
    assert resigned and zk.CONTROLLER_EPOCH in resigned[-1].why
