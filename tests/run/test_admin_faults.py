"""Admin operations as faults: planned from the cluster's view, performed through the admin client.

The plans are pure (unit tests below); applying them is tested on whole simulated runs, where
the same ``AdminFaults`` acts as on real clusters (the chaos suite runs it on Docker), and
must leave evidence of what the controller did with each request.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floodmark.backends.sim import SimBackend
from floodmark.checkers.fault_coverage import fault_coverage
from floodmark.contracts.history import NEMESIS, read_history
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import make_config
from floodmark.harness.faults import (
    BrokerSlot,
    ClusterView,
    Evidence,
    FaultPlan,
    NetworkCut,
    PartitionsAdded,
    PreferredElection,
    ProcessPause,
    Reassignment,
)
from floodmark.harness.schedule import Fault, Schedule
from floodmark.nemesis.admin import AdminNemesis, moved_replicas
from floodmark.nemesis.base import NemesisError, choose_broker
from floodmark.nemesis.compose import Composite
from floodmark.run.admin_faults import AdminFaults, FaultRouter
from floodmark.run.assemble import refusals
from floodmark.run.runner import Runner
from floodmark.workloads.clients import LibraryClients


def view(brokers: int = 4, replicas: dict[tuple[str, int], tuple[int, ...]] | None = None) -> ClusterView:
    slots = tuple(BrokerSlot(f"n{i}", i, ("/d",)) for i in range(1, brokers + 1))
    if replicas is None:
        replicas = {("t0", 0): (1, 2, 3), ("t0", 1): (2, 3, 4), ("t1", 0): (3, 4, 1)}
    return ClusterView("zk", slots, tuple(sorted(replicas)), 6.0, 1, {}, replicas)


def plan(shape: str, seed: int = 1, **kw: Any) -> tuple[FaultPlan, dict[str, Any]]:
    return AdminNemesis().plan(random.Random(seed), view(**kw), shape, 5.0)


# ---------------------------------------------------------------------- planning


@given(current=st.lists(st.integers(1, 6), min_size=1, max_size=5, unique=True), seed=st.integers(0, 10**6))
def test_a_move_never_asks_for_the_replicas_a_partition_has(current: list[int], seed: int) -> None:
    brokers = list(range(1, 7))
    moved = moved_replicas(random.Random(seed), tuple(current), brokers)
    assert moved != tuple(current)
    assert len(moved) == len(current) and len(set(moved)) == len(moved) and set(moved) <= set(brokers)


def test_reassignments_move_one_partition_and_say_whether_heal_cancels() -> None:
    move, choice = plan("reassign")
    cancel, _ = plan("reassign-cancel")
    assert isinstance(move, Reassignment) and isinstance(cancel, Reassignment)
    assert not move.cancel_on_heal and cancel.cancel_on_heal
    ((topic, partition, replicas),) = move.moves
    assert choice["from"] == {f"{topic}/{partition}": list(view().replicas[(topic, partition)])}
    assert move.describe()["moves"] == {f"{topic}/{partition}": list(replicas)}
    assert plan("reassign", seed=9) == plan("reassign", seed=9), "a pure function of the seed and the view"


def test_a_rebalance_moves_every_partition_and_is_named_only() -> None:
    rebalance, choice = plan("reassign-all")
    assert isinstance(rebalance, Reassignment) and not rebalance.cancel_on_heal
    assert [(t, p) for t, p, _ in rebalance.moves] == sorted(view().replicas)
    for topic, partition, replicas in rebalance.moves:
        assert replicas != view().replicas[(topic, partition)] and len(replicas) == 3
    assert choice["from"] == {f"{t}/{p}": list(r) for (t, p), r in sorted(view().replicas.items())}
    assert "reassign-all" not in AdminNemesis().shapes, "random schedules never draw it"
    assert "reassign-all" in AdminNemesis().every_shape


def test_a_preferred_election_covers_every_partition_and_added_partitions_grow_a_topic() -> None:
    election, _ = plan("preferred-election")
    assert election == PreferredElection((("t0", 0), ("t0", 1), ("t1", 0)))
    for seed in range(20):
        added, choice = plan("add-partitions", seed=seed)
        assert isinstance(added, PartitionsAdded)
        before = choice["partitions_before"]
        assert before == {"t0": 2, "t1": 1}[added.topic] and before < added.count <= before + 2


def test_without_known_replicas_there_is_nothing_to_plan() -> None:
    with pytest.raises(NemesisError, match="replicas are known"):
        plan("reassign", replicas={})


def test_real_backends_apply_admin_faults_through_the_harness() -> None:
    schedule = Schedule((Fault(0, "admin", "reassign-cancel", 1.0, 2.0, 1),
                         Fault(1, "message", "drop-fetch-response", 4.0, 2.0, 2)), time_limit=10)
    problems = refusals("local", schedule, Composite(["admin", "message"]))
    assert problems == ["fault 1 (message:drop-fetch-response): the local backend refuses it: "
                        "only the simulator can apply message faults"]


def test_real_backends_accept_the_named_only_shapes_a_schedule_names() -> None:
    schedule = Schedule((Fault(0, "partition", "leader-controller-cut", 1.0, 9.0, 1),
                         Fault(1, "admin", "reassign-all", 2.0, 2.0, 2),
                         Fault(2, "partition", "followers-deaf", 4.0, 2.0, 3),
                         Fault(3, "partition", "reassign-all", 5.0, 2.0, 4)), time_limit=10)
    problems = refusals("docker", schedule, Composite(["partition", "admin"]))
    assert len(problems) == 1 and problems[0].startswith("fault 3 (partition:reassign-all): unknown shape; known: ")
    assert "followers-deaf" in problems[0], "the message lists the named-only shapes too"


class Recording:
    """A backend applier that records what reached it."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def refuses(self, kind: str, shape: str) -> str | None:
        return "no" if kind == "message" else None

    async def apply(self, plan: FaultPlan) -> Evidence:
        self.seen.append(("apply", plan))
        return {}

    async def heal(self, plan: FaultPlan) -> Evidence:
        self.seen.append(("heal", plan))
        return {}

    async def heal_all(self, kinds: tuple[str, ...]) -> dict[str, Evidence]:
        self.seen.append(("heal_all", kinds))
        return {kind: {} for kind in kinds}


def test_the_router_sends_node_faults_to_the_backend_and_never_admin_ones() -> None:
    backend = Recording()

    def no_host() -> Any:
        raise RuntimeError("admin faults need the client host")

    router = FaultRouter(backend, AdminFaults(no_host))
    cut = NetworkCut((("n1", ("n2",)),))
    asyncio.run(router.apply(cut))
    asyncio.run(router.heal(cut))
    healed = asyncio.run(router.heal_all(("admin", "partition")))
    assert backend.seen == [("apply", cut), ("heal", cut), ("heal_all", ("partition",))]
    assert healed["partition"] == {} and "RuntimeError" in healed["admin"]["error"]
    assert router.refuses("admin", "reassign") is None and router.refuses("message", "x") == "no"


# ---------------------------------------------------------------------- on the simulator


def nemesis_values(path: Path, f: str) -> list[dict[str, Any]]:
    return [op.value for op in read_history(path / "history.jsonl")
            if op.process == NEMESIS and op.f == f and op.type == "ok"]


def test_admin_faults_under_load_take_effect_and_cancellations_are_accounted_for(tmp_path: Path) -> None:
    """Four brokers, replication factor 3, every admin operation under load: each takes
    effect, and each cancellation says whether the move went back or had completed first."""
    config = make_config({"cluster": "sim", "seed": 3, "nodes": 4, "topics": 1, "partitions": 3,
                          "time_limit": 40.0, "rate": 200.0, "nemesis": "admin"})
    faults = [Fault(i, "admin", "reassign-cancel", 5.0 + 3 * i, 0.01, 100 + i) for i in range(8)]
    faults += [Fault(8, "admin", "preferred-election", 30.0, 1.0, 7),
               Fault(9, "admin", "add-partitions", 33.0, 1.0, 8)]
    runner = Runner(config, tmp_path / "store", schedule=Schedule(tuple(faults), time_limit=40.0),
                    out=io.StringIO(), report=False)
    outcome = runner.run()
    path = runner.run_dir.path
    assert outcome.error is None and outcome.valid is True, json.dumps(outcome.__dict__, default=str)[:2000]
    coverage = fault_coverage(read_history(path / "history.jsonl"))["admin"]
    assert (coverage.planned, coverage.took_effect) == (10, 10), coverage.missed
    starts, stops = nemesis_values(path, "start-admin"), nemesis_values(path, "stop-admin")
    outcomes = [stop["cancel_outcome"] for stop in stops if stop.get("cancel") == "sent"]
    assert outcomes and set(outcomes) <= {"reverted", "completed before the cancellation"}, stops
    for start, stop in zip(starts, stops, strict=False):
        if stop.get("cancel_outcome") == "reverted":
            assert stop["replicas_after_cancel"] == start["original"]
    election = next(s for s in starts if s["shape"] == "preferred-election")
    assert election["consumed"] is True
    added = next(s for s in starts if s["shape"] == "add-partitions")
    assert added["partitions"] > 3 and added["led"] == added["partitions"]


def test_a_move_cancelled_before_it_completes_goes_back_to_the_original_replicas() -> None:
    """The new replica is paused, so the move cannot complete; healing cancels it (KIP-236)."""
    config = make_config({"cluster": "sim", "seed": 3, "nodes": 4, "topics": 1, "partitions": 1})
    sim = SimBackend(config, ClusterSpec(brokers=4, seed=5))
    sim.setup()

    async def scenario() -> tuple[tuple[int, ...], Evidence, Evidence, dict[tuple[str, int], tuple[int, ...]]]:
        clients = LibraryClients(config, sim.client_host(), sim.cluster.bootstrap_addresses)
        await clients.create_topics()
        (((topic, partition), current),) = (await sim.observe()).replicas.items()
        spare = next(b for b in range(1, 5) if b not in current)
        pause = ProcessPause(f"n{spare}", 3.0, config.zk_session_timeout)
        await sim.faults.apply(pause)
        admin = AdminFaults(sim.client_host)
        move = Reassignment(((topic, partition, (spare, *current[1:])),), cancel_on_heal=True)
        started = await admin.apply(move)
        healed = await admin.heal(move)
        await sim.faults.heal(pause)
        return current, started, healed, dict((await sim.observe()).replicas)

    try:
        current, started, healed, after = sim.run(scenario())
    finally:
        sim.force_cleanup()
    assert started["taken_up"] is True and started["status"] == {"t0/0": "in progress"}
    assert healed["cancel"] == "sent" and healed["cancel_outcome"] == "reverted", healed
    assert healed["replicas_after_cancel"] == {"t0/0": list(current)} and after == {("t0", 0): current}


def test_the_cluster_view_names_added_partitions_with_their_leaders_so_faults_can_aim_at_them() -> None:
    # The view listed only test.yaml's partitions: "a partition's leader" and failover's roles
    # never fell on a partition an admin fault had added.
    config = make_config({"cluster": "sim", "seed": 3, "nodes": 3, "topics": 1, "partitions": 2})
    sim = SimBackend(config, ClusterSpec(brokers=3, seed=5))
    sim.setup()

    async def scenario() -> tuple[ClusterView, ClusterView]:
        clients = LibraryClients(config, sim.client_host(), sim.cluster.bootstrap_addresses)
        await clients.create_topics()
        before = await sim.observe()
        await AdminFaults(sim.client_host).apply(PartitionsAdded("t0", 4))
        for _ in range(100):  # until the controller has elected the new partitions' leaders
            after = await sim.observe()
            if len(after.leaders) == 4:
                break
            await asyncio.sleep(0.1)
        return before, after

    try:
        before, after = sim.run(scenario())
    finally:
        sim.force_cleanup()
    assert before.partitions == (("t0", 0), ("t0", 1))
    assert after.partitions == (("t0", 0), ("t0", 1), ("t0", 2), ("t0", 3))
    assert set(after.leaders) == set(after.partitions) == set(after.replicas)
    rng = random.Random(0)
    aimed = {tuple(choose_broker(rng, after, "leader")[1]["partition"]) for _ in range(40)}
    assert {("t0", 2), ("t0", 3)} <= aimed
