"""Broker-side protocol variants: each historical flaw, driven to the data loss it caused.

Every test runs one exact sequence of crashes, partitions and messages on the deterministic
simulated runtime twice: with the ``default`` variant (every fix on), where nothing
acknowledged is lost and replicas agree, and with the flawed variant, where the same
sequence loses an acknowledged record or leaves replicas with different records at the same
committed offset. Broker 1 (node n1) is the controller in every test (it starts first) and
never holds a replica, so the faults below never hit the controller.
"""

from __future__ import annotations

from broker_fixtures import SimCluster

from floodmark.checkers.white_box.epoch_invariants import admissions_lacking_committed
from floodmark.contracts.node_events import Fenced, IsrChanged
from floodmark.reference.protocol.messages import (
    ACKS_ALL,
    Errors,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
)


def start(variant: str, nodes: int, replicas: tuple[int, ...], min_isr: int = 2,
          node_config: dict[str, dict[str, object]] | None = None, **config: object) -> SimCluster:
    cluster = SimCluster(seed=11, nodes=nodes, variant=variant, node_config=node_config, **config)
    assert cluster.brokers["n1"].controller.is_active
    cluster.create_topic("t", 1, len(replicas), min_isr=min_isr, assignment={0: replicas})
    return cluster


def produce(cluster: SimCluster, node: str, values: tuple[str, ...], acks: int = ACKS_ALL,
            timeout: float = 5.0) -> ProduceResponse:
    response = cluster.run(cluster.client.network.request(
        node, ProduceRequest("t", 0, values, acks=acks, timeout=timeout), timeout + 5.0))
    assert isinstance(response, ProduceResponse)
    return response


def readable_again(cluster: SimCluster, name: str) -> None:
    """Restart ``name`` and wait until the ISR is back at min.insync.replicas (2), so that
    the HW moves again (it stands still below it, KIP-966) and consumers see the log."""
    cluster.restart(name)
    assert cluster.world.run_until(lambda: len(cluster.state("t", 0).isr) >= 2, 30.0)  # type: ignore[union-attr]
    cluster.world.run_for(1.0)


def finish(cluster: SimCluster) -> None:
    assert cluster.world.failures == [], cluster.world.failures
    cluster.close()


# ----------------------------------------------------------------------------- truncate-to-hw


def truncate_to_hw_scenario(variant: str) -> tuple[list[str], list[str]]:
    """KIP-101 scenario 1: a follower truncates to its lagging HW, then is elected.

    Replicas n2 (leader), n3, n4. m1 is acknowledged; the followers have it but their HW
    (learnt one fetch late) is still 1. The leader dies. n3 and n4 cannot reach each other.
    The one elected first leads; the other becomes its follower and, under the variant,
    truncates m1 away before it can fetch. The first new leader dies too, and the second
    is elected without m1.
    """
    cluster = start(variant, 4, (2, 3, 4))
    assert produce(cluster, "n2", ("m0",)).error is None
    cluster.world.run_for(2.0)
    assert produce(cluster, "n2", ("m1",)).error is None
    for name in ("n3", "n4"):
        follower = cluster.replica(name, "t", 0)
        assert follower is not None and follower.log_end == 2 and follower.high_watermark == 1
    cluster.world.partition({"n3"}, {"n4"})
    cluster.kill("n2")
    first = cluster.wait_leader("t", 0, 1)
    second = "n4" if first == "n3" else "n3"
    follower = cluster.replica(second, "t", 0)
    assert cluster.world.run_until(lambda: follower.role == "follower" and follower.leader_epoch >= 1, 10.0)  # type: ignore[union-attr]
    cluster.world.run_for(0.5)
    cluster.kill(first)
    survivor = cluster.wait_leader("t", 0, 2)
    assert survivor == second
    readable_again(cluster, "n2")
    result = cluster.values(survivor, "t", 0), cluster.consume_all("t", 0)
    finish(cluster)
    return result


def test_truncate_to_hw_default_keeps_acked_records() -> None:
    log, consumed = truncate_to_hw_scenario("default")
    assert log == ["m0", "m1"] and consumed == ["m0", "m1"]


def test_truncate_to_hw_variant_loses_an_acked_record() -> None:
    log, consumed = truncate_to_hw_scenario("truncate-to-hw")
    assert "m1" not in log and "m1" not in consumed  # acknowledged with acks=all, then lost


# ----------------------------------------------------------------------------- no-kip-279


def kip279_scenario(variant: str) -> tuple[list[str], list[str], int]:
    """KAFKA-6361 (fixed by KIP-279): two fast fail-overs leave an epoch the new leader never had.

    Replicas n2 (A, leader), n3 (B), n4 (C). B lags: a1 reaches A and C only. A dies; B is
    elected (epoch 1) and writes b1 at offset 1, which C (cut off from B) never sees. B dies;
    C is elected (epoch 2) and writes x2. B returns and asks C where its epoch 1 ends.
    C never had epoch 1. With KIP-279 it answers "epoch 0 ends at 2", B sees that its own
    epoch 0 ends at 1 and truncates b1. Without it C answers "2" and B keeps b1: offset 1
    holds b1 on B and a1 on C, below the HW.
    """
    cluster = start(variant, 4, (2, 3, 4), min_isr=1)
    assert produce(cluster, "n2", ("a0",)).error is None
    cluster.world.partition({"n3"}, {"n2", "n4"})
    assert produce(cluster, "n2", ("a1",), acks=1).error is None
    assert cluster.world.run_until(lambda: cluster.values("n4", "t", 0) == ["a0", "a1"], 5.0)
    cluster.kill("n2")
    assert cluster.wait_leader("t", 0, 1) == "n3"
    assert produce(cluster, "n3", ("b1",), acks=1).error is None
    cluster.kill("n3")
    assert cluster.wait_leader("t", 0, 2) == "n4"
    assert produce(cluster, "n4", ("x2",), acks=1).error is None
    cluster.world.heal()
    cluster.restart("n3")
    assert cluster.world.run_until(lambda: len(cluster.values("n3", "t", 0)) >= 3, 30.0)
    leader = cluster.replica("n4", "t", 0)
    assert cluster.world.run_until(lambda: 3 in leader.isr and leader.high_watermark >= 3, 30.0)  # type: ignore[union-attr]
    result = cluster.values("n3", "t", 0), cluster.values("n4", "t", 0), leader.high_watermark  # type: ignore[union-attr]
    finish(cluster)
    return result


def test_kip279_default_follower_converges_on_the_leaders_log() -> None:
    follower, leader, high_watermark = kip279_scenario("default")
    assert follower == leader == ["a0", "a1", "x2"] and high_watermark == 3


def test_no_kip279_variant_leaves_diverged_committed_offsets() -> None:
    follower, leader, high_watermark = kip279_scenario("no-kip-279")
    assert high_watermark == 3  # offsets 0..2 are committed ...
    assert follower == ["a0", "b1", "x2"] and leader == ["a0", "a1", "x2"]  # ... and differ at 1


# ----------------------------------------------------------------------------- unfenced-fetch


def unfenced_fetch_scenario(variant: str) -> tuple[ProduceResponse, list[str]]:
    """KIP-320: a follower's fetch from an older leader epoch counted by the new leader.

    Replicas n2 (A, leader), n3 (B), n4 (C). B lags (a1, a2 reach A and C only). A dies and
    B is elected (epoch 1), still cut off from C. A producer sends b1, b2 to B (acks=all).
    Then a fetch from C's epoch-0 fetcher arrives at B, at offset 3 (C's log end, made of
    a1, a2, which B does not have). Unfenced, B takes it as "C has everything below 3",
    advances the HW over b1, b2 and acknowledges them. B dies; C is elected without them.
    With KIP-320 the fetch is refused (FENCED_LEADER_EPOCH) and nothing is acknowledged.
    """
    cluster = start(variant, 4, (2, 3, 4))
    assert produce(cluster, "n2", ("a0",)).error is None
    cluster.world.partition({"n3"}, {"n2", "n4"})
    assert produce(cluster, "n2", ("a1", "a2"), acks=1).error is None
    assert cluster.world.run_until(lambda: cluster.values("n4", "t", 0) == ["a0", "a1", "a2"], 5.0)
    cluster.kill("n2")
    assert cluster.wait_leader("t", 0, 1) == "n3"
    c_incarnation = cluster.brokers["n4"].incarnation
    send = cluster.client.spawn(cluster.client.network.request(
        "n3", ProduceRequest("t", 0, ("b1", "b2"), timeout=3.0), 10.0), name="produce")
    cluster.world.run_for(0.1)
    zombie = cluster.run(cluster.client.network.request("n3", FetchRequest(
        "t", 0, 3, replica_id=4, current_leader_epoch=0, last_fetched_epoch=0,
        broker_incarnation=c_incarnation), 5.0))
    assert isinstance(zombie, FetchResponse)
    cluster.world.run_until(send.done, 10.0)
    response = send.result()
    cluster.kill("n3")
    leader = cluster.wait_leader("t", 0, 2)
    assert leader == "n4"
    readable_again(cluster, "n2")
    result = response, cluster.consume_all("t", 0)
    finish(cluster)
    return result


def test_fenced_fetch_default_acks_nothing_the_new_leader_lacks() -> None:
    response, consumed = unfenced_fetch_scenario("default")
    assert response.error == Errors.REQUEST_TIMED_OUT  # ambiguous, never acknowledged
    assert consumed == ["a0", "a1", "a2"]


def test_unfenced_fetch_variant_loses_acked_records() -> None:
    response, consumed = unfenced_fetch_scenario("unfenced-fetch")
    assert response.error is None  # acknowledged with acks=all ...
    assert "b1" not in consumed and "b2" not in consumed  # ... and lost


# ----------------------------------------------------------------------------- isr admission


def isr_admission_scenario(variant: str) -> tuple[str, list[str], list[tuple[str, int]]]:
    """KAFKA-7128: a follower admitted at a lagging HW, below the leader's epoch start.

    Replicas n2 (A, leader), n3 (B), n4 (C), n5 (D). C is cut off and leaves the ISR. a0 is
    acknowledged by A, B and D; A dies before B and D learn the new HW, so B, elected in
    epoch 1 at log end 1, starts with HW 0, and D (in the ISR, cut off from B) never
    reports. C comes back empty and fetches at 0: it has "reached the HW". The V3 rule
    admits it; B's answers never reach C. B dies; C, now in the ISR, is elected without a0.
    With the fix C must also reach B's epoch start (1) and stays out; D is elected with a0.
    """
    cluster = start(variant, 5, (2, 3, 4, 5))
    cluster.world.partition({"n4"}, {"n2", "n3", "n5"})
    assert cluster.world.run_until(lambda: 4 not in cluster.state("t", 0).isr, 30.0)  # type: ignore[union-attr]
    cluster.world.partition({"n5"}, {"n3"})
    assert produce(cluster, "n2", ("a0",)).error is None
    cluster.kill("n2")
    assert cluster.wait_leader("t", 0, 1) == "n3"
    leader = cluster.replica("n3", "t", 0)
    assert leader is not None and leader.high_watermark == 0 and leader.epoch_start_offset == 1
    cluster.world.heal()
    cluster.world.partition({"n5"}, {"n3"})
    cluster.world.cut("n3", "n4")  # C's fetches reach B; B's answers are lost
    assert cluster.world.run_until(lambda: leader.followers[4].log_end == 0, 10.0)
    cluster.world.run_for(0.2)  # time for an ISR write to reach ZooKeeper
    assert 5 in leader.isr and leader.high_watermark == 0  # D never reported: the HW lags
    admitted = admissions_lacking_committed({n: cluster.world.events(n) for n in ("n2", "n3", "n4", "n5")})
    cluster.kill("n3")
    new = cluster.wait_leader("t", 0, 2)
    result = new, cluster.consume_all("t", 0), [(a.type, a.details["joined"]) for a in admitted]
    finish(cluster)
    return result


def test_isr_admission_default_needs_the_epoch_start() -> None:
    leader, consumed, admitted = isr_admission_scenario("default")
    assert leader == "n5" and consumed == ["a0"] and admitted == []


def test_isr_admission_below_epoch_start_variant_loses_an_acked_record() -> None:
    leader, consumed, admitted = isr_admission_scenario("isr-admission-below-epoch")
    assert leader == "n4" and consumed == []  # a0 was acknowledged with acks=all
    # StrongIsr broke when C joined, before any loss: the invariants checker sees that.
    assert admitted == [("isr-admitted-lacking-committed", 4)]


# ----------------------------------------------------------------------------- unconditional ISR write


def unconditional_isr_write_scenario(variant: str) -> tuple[ProduceResponse, list[str], int, bool]:
    """A stale leader's ISR write overwrites the controller's newer leader and ISR.

    Replicas n2 (A, leader), n3 (B), n4 (C). A is cut off from the controller and its
    followers but not from ZooKeeper, and (in this test) never fences itself. The controller
    stops hearing A's heartbeats, elects B (epoch 1, ISR {B, C}), and b1 is acknowledged.
    A, still leader of epoch 0 in its own view, drops its silent followers from the ISR.
    Conditional on the version it last saw, that write fails and A stops leading. Without
    the check it lands: ZooKeeper says "leader A, epoch 0, ISR {A}". B then dies; the only
    ISR member left is A, which has no b1, and it is elected once it is reachable again.
    """
    cluster = start(variant, 4, (2, 3, 4), replica_lag_time_max=15.0,
                    node_config={"n2": {"broker_fence_timeout": None}})
    assert produce(cluster, "n2", ("a0",)).error is None
    cluster.world.partition({"n2"}, {"n1", "n3", "n4"})
    assert cluster.wait_leader("t", 0, 1) == "n3"
    acked = produce(cluster, "n3", ("b1",))
    stale = cluster.replica("n2", "t", 0)
    assert stale is not None
    assert cluster.world.run_until(lambda: bool(cluster.events("n2", IsrChanged)
                                                or cluster.events("n2", Fenced)), 30.0)
    cluster.world.run_for(1.0)
    written = cluster.state("t", 0)
    assert written is not None
    fenced = bool(cluster.events("n2", Fenced))
    cluster.kill("n3")
    cluster.world.heal()
    cluster.world.run_for(30.0)
    result = acked, cluster.consume_all("t", 0), written.leader, fenced
    finish(cluster)
    return result


def test_conditional_isr_write_default_fences_the_stale_leader() -> None:
    acked, consumed, leader_after_write, fenced = unconditional_isr_write_scenario("default")
    assert fenced and leader_after_write == 3
    assert acked.error is None and consumed == ["a0", "b1"]


def test_unconditional_isr_write_variant_loses_an_acked_record() -> None:
    acked, consumed, leader_after_write, fenced = unconditional_isr_write_scenario("unconditional-isr-write")
    assert not fenced and leader_after_write == 2  # the stale leader overwrote the controller
    assert acked.error is None and "b1" not in consumed


# ----------------------------------------------------------------------------- acks=all with ISR {leader}


def isr_of_one_scenario(variant: str) -> tuple[ProduceResponse, dict[str, list[str]]]:
    """Jepsen 2013: acks=all satisfied by an ISR that shrank to the leader alone.

    Replicas n2 (leader), n3, n4, min.insync.replicas=2. The followers are cut off and
    leave the ISR. v1 is sent with acks=all: the fix refuses it (NOT_ENOUGH_REPLICAS,
    nothing written); the variant appends and acknowledges it at once. The leader then
    loses power before flushing (Kafka relies on replication, not fsync), and v1, which no
    other replica had, is gone. n3 and n4 left an ISR below min.insync.replicas, so they are
    eligible leader replicas (KIP-966): one of them leads once n2 is gone, and n2, back from
    its unclean shutdown, follows it. What is left is read from the replicas' logs.
    """
    cluster = start(variant, 4, (2, 3, 4), replica_lag_time_max=3.0)
    assert produce(cluster, "n2", ("v0",)).error is None
    cluster.brokers["n2"].replicas.flush_all()
    cluster.world.partition({"n2"}, {"n3", "n4"})
    assert cluster.world.run_until(lambda: cluster.state("t", 0).isr == (2,), 30.0)  # type: ignore[union-attr]
    response = produce(cluster, "n2", ("v1",))
    cluster.crash("n2")
    cluster.world.heal()
    cluster.restart("n2")
    assert cluster.world.run_until(lambda: cluster.state("t", 0).isr == (2, 3, 4), 30.0)  # type: ignore[union-attr]
    assert cluster.state("t", 0).leader in (3, 4)  # type: ignore[union-attr]
    result = response, {name: cluster.values(name, "t", 0) for name in ("n2", "n3", "n4")}
    finish(cluster)
    return result


def test_min_insync_default_refuses_acks_all_with_isr_of_one() -> None:
    response, logs = isr_of_one_scenario("default")
    assert response.error == Errors.NOT_ENOUGH_REPLICAS
    assert logs == {"n2": ["v0"], "n3": ["v0"], "n4": ["v0"]}


def test_acks_all_isr_of_one_variant_loses_an_acked_record() -> None:
    response, logs = isr_of_one_scenario("acks-all-isr-of-one")
    assert response.error is None  # v1 was acknowledged ...
    assert logs == {"n2": ["v0"], "n3": ["v0"], "n4": ["v0"]}  # ... and no replica has it
