"""The upgrade fault: a double roll from legacy to KIP-343, planned, refused, applied with evidence."""

from __future__ import annotations

import asyncio
import io
import random
from pathlib import Path
from typing import Any

import pytest
from cluster_fixtures import FakeCluster, view_of

from floodmark.backends.node_faults import NodeFaultApplier
from floodmark.backends.sim import SimBackend
from floodmark.checkers.fault_coverage import TOOK_EFFECT, fault_coverage
from floodmark.contracts.history import read_history
from floodmark.contracts.run_config import ConfigError
from floodmark.harness.cluster import ClusterSpec, option_value, with_option
from floodmark.harness.config import ALL_KINDS, make_config
from floodmark.harness.faults import UPGRADE_TARGET, DoubleRoll, ProcessCrash, ProcessPause
from floodmark.harness.schedule import generate
from floodmark.nemesis.base import NemesisError
from floodmark.nemesis.compose import Composite
from floodmark.nemesis.upgrade import ROLL_SECONDS, UpgradeNemesis
from floodmark.reference.protocol import inter_broker_protocol as ibp
from floodmark.reference.protocol import zk_layout
from floodmark.run import assemble, digest
from floodmark.run.runner import Runner
from floodmark.run.swarm import SWARM_KINDS, swarm_config

SMALL = {"cluster": "sim", "time_limit": 12.0, "rate": 50.0, "concurrency": 4, "topics": 1,
         "partitions": 2, "fault_duration": [2.0, 4.0], "quiet_period": [1.0, 2.0]}

# ---------------------------------------------------------------- planning


def test_the_double_roll_restarts_every_broker_twice_the_controller_last() -> None:
    view = view_of(FakeCluster(3), controller=2, protocol="legacy")
    plan, choice = UpgradeNemesis().plan(random.Random(0), view, "double-roll", 30.0)
    assert plan.steps == ((1, "n1", 1, "legacy"), (1, "n3", 3, "legacy"), (1, "n2", 2, "legacy"),
                          (2, "n1", 1, "kip-343"), (2, "n3", 3, "kip-343"), (2, "n2", 2, "kip-343"))
    assert choice == {"shape": "double-roll", "from": {"n1": "legacy", "n2": "legacy", "n3": "legacy"},
                      "controller": 2}
    assert plan.kind == "upgrade" and plan.nodes == ("n1", "n3", "n2")
    assert plan.describe()["steps"][0] == {"roll": 1, "node": "n1", "version": "legacy"}
    assert UPGRADE_TARGET == ibp.KIP_343  # the contract's name for it is the reference's


def test_a_cluster_at_kip_343_already_cannot_be_upgraded() -> None:
    view = view_of(FakeCluster(3), protocol="kip-343")
    with pytest.raises(NemesisError, match="every broker is at kip-343 already"):
        UpgradeNemesis().plan(random.Random(0), view, "double-roll", 30.0)


def test_an_upgrade_lasts_long_enough_for_its_roll_and_happens_once_a_run() -> None:
    nemesis = UpgradeNemesis()
    assert nemesis.duration("double-roll", 3.0, 6.0, random.Random(0)) == ROLL_SECONDS
    assert nemesis.duration("double-roll", 40.0, 6.0, random.Random(0)) == 40.0
    composite = Composite(["upgrade", "kill", "partition"])
    for seed in range(20):
        schedule = generate(random.Random(seed), composite.kinds, composite.shapes(), 120.0, (3.0, 12.0),
                            (1.0, 3.0), lambda k, s, d, r: composite.duration(k, s, d, 6.0, r),
                            lambda k, shapes: composite.recovery(k, 6.0, shapes))
        upgrades = [f for f in schedule.faults if f.kind == "upgrade"]
        assert len(upgrades) <= 1
        assert all(f.duration >= ROLL_SECONDS and f.end <= 120.0 for f in upgrades)


# ---------------------------------------------------------------- configuration


def test_upgrade_is_named_only_on_every_backend_and_starts_brokers_at_legacy() -> None:
    assert "upgrade" in ALL_KINDS and "upgrade" not in SWARM_KINDS
    for cluster in ("sim", "local", "docker"):
        assert "upgrade" not in make_config({"cluster": cluster, "nemesis": "all"}).nemesis
        config = make_config({"cluster": cluster, "nemesis": "upgrade,kill,partition"})
        assert config.nemesis == ("partition", "kill", "upgrade")
        assert config.inter_broker_protocol == "legacy"
    chosen = make_config({"cluster": "local", "nemesis": "upgrade", "inter_broker_protocol": "heartbeats"})
    assert chosen.inter_broker_protocol == "heartbeats"
    assert make_config({"cluster": "sim", "nemesis": "kill"}).inter_broker_protocol == "heartbeats"


def test_an_upgrade_of_brokers_at_kip_343_is_refused_before_the_run_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        make_config({"cluster": "docker", "nemesis": "upgrade,kill", "inter_broker_protocol": "kip-343"})
    message = str(refused.value)
    assert "\n" not in message and "inter_broker_protocol" in message and "kip-343" in message
    # Nor may it take brokers back from the newer protocol.
    with pytest.raises(ConfigError, match="older than the truncate-on-fetch they run"):
        make_config({"cluster": "sim", "nemesis": "upgrade", "inter_broker_protocol": "truncate-on-fetch"})


def test_real_backends_apply_upgrades() -> None:
    composite = Composite(["upgrade"])
    schedule = generate(random.Random(1), ["upgrade"], composite.shapes(), 60.0, (3.0, 6.0), (1.0, 2.0),
                        lambda k, s, d, r: composite.duration(k, s, d, 6.0, r), lambda k, shapes: composite.recovery(k, 6.0, shapes))
    assert len(schedule.faults) == 1
    for cluster in ("local", "docker", "sim"):
        assert assemble.refusals(cluster, schedule, composite) == []


def test_a_schedule_with_a_second_upgrade_is_refused_before_the_run() -> None:
    from floodmark.harness.schedule import Fault, Schedule

    composite = Composite(["upgrade", "kill"])
    twice = Schedule((Fault(0, "upgrade", "double-roll", 1.0, 24.0, 1), Fault(1, "kill", "leader", 5.0, 3.0, 2),
                      Fault(2, "upgrade", "double-roll", 30.0, 24.0, 3)), 60.0)
    assert assemble.refusals("sim", twice, composite) == [
        "fault 2 (upgrade): fault 0 upgrades every broker to kip-343 already; an upgrade happens once a run"]


def test_swarm_configs_do_not_change_with_the_upgrade_kind() -> None:
    # SWARM_KINDS leaves upgrade out, so every seed draws what it drew before the kind existed.
    before = ("partition", "clock", "pause", "disk", "kill", "power", "session", "message")
    assert before == SWARM_KINDS
    assert all("upgrade" not in swarm_config(seed).nemesis for seed in range(1, 50))


def test_the_protocol_option_of_a_command_line_is_read_and_rewritten() -> None:
    argv = ["python3", "-c", "x", "--id", "1", "--inter-broker-protocol", "legacy", "--variant", "default"]
    assert option_value(argv, "--inter-broker-protocol") == "legacy"
    rewritten = with_option(argv, "--inter-broker-protocol", "kip-343")
    assert rewritten == [*argv[:6], "kip-343", *argv[7:]]
    assert with_option(["b"], "--inter-broker-protocol", "kip-343") == ["b", "--inter-broker-protocol", "kip-343"]
    assert option_value(["b"], "--inter-broker-protocol") is None


# ---------------------------------------------------------------- the simulator applies it


@pytest.fixture
def backend() -> Any:
    sim = SimBackend(make_config({**SMALL, "seed": 3, "nodes": 3, "nemesis": "upgrade"}), ClusterSpec(brokers=3, seed=5))
    sim.setup()
    yield sim
    sim.force_cleanup()


def planned(backend: Any) -> DoubleRoll:
    view = backend.run(backend.observe())
    plan, _ = UpgradeNemesis().plan(random.Random(0), view, "double-roll", 30.0)
    return plan


def registration(backend: Any, broker_id: int) -> zk_layout.BrokerRegistration:
    zk = backend.world.zk
    path = zk_layout.broker_path(broker_id)
    return zk_layout.decode_broker(broker_id, zk.get(path)[0], zk.exists(path).czxid)


def test_the_simulator_rolls_twice_and_each_restart_registers_at_its_new_version(backend: Any) -> None:
    assert {registration(backend, b).info_version for b in (1, 2, 3)} == {4}
    plan = planned(backend)

    async def roll() -> tuple[dict[str, Any], dict[str, Any]]:
        started = await backend.faults.apply(plan)
        return started, await backend.faults.heal(plan)

    started, healed = backend.run(roll())
    assert started == {"rolling": 6}
    steps = healed["steps"]
    assert healed["complete"] is True and len(steps) == 6
    assert [(s["roll"], s["node"], s["registration"]["info_version"]) for s in steps] == [
        (roll, node, 4 if roll == 1 else 5) for roll, node, _, _ in plan.steps]
    assert all(s["seen"] and s["restarted"]["pid"] != s["restarted"]["pid_before"] for s in steps)
    # Each broker was back in every ISR before the next one restarted.
    assert all(s["out_of_isr"] == [] for s in steps)
    assert {registration(backend, b).info_version for b in (1, 2, 3)} == {5}
    # The version sticks: a broker killed and restarted later comes back at kip-343.
    backend.run(backend.faults.apply(ProcessCrash("n1", "kill")))
    backend.run(asyncio.sleep(backend.config.zk_session_timeout + 1))
    backend.run(backend.faults.heal(ProcessCrash("n1", "kill")))
    backend.run(asyncio.sleep(2.0))
    assert registration(backend, 1).info_version == 5
    assert backend.cluster.broker_node("n1").broker.config.inter_broker_protocol == "kip-343"
    view = backend.run(backend.observe())
    assert set(view.protocols.values()) == {"kip-343"}


def test_a_broker_another_fault_holds_is_waited_for_and_started_by_its_heal(backend: Any) -> None:
    plan = planned(backend)
    first = plan.steps[0][1]
    kill = ProcessCrash(first, "kill")

    async def roll_while_killed() -> dict[str, Any]:
        await backend.faults.apply(kill)
        await backend.faults.apply(plan)
        await asyncio.sleep(3.0)  # the roll waits for the killed broker
        await backend.faults.heal(kill)  # restarted at the version the roll set
        return await backend.faults.heal(plan)  # type: ignore[no-any-return]

    healed = backend.run(roll_while_killed())
    step = healed["steps"][0]
    assert step["node"] == first and "restarted" not in step
    assert step["started_by_another_fault"]["pid_before"] is None
    assert step["seen"] is True and healed["complete"] is True


def test_a_broker_held_past_the_wait_is_left_to_start_at_the_new_version(backend: Any) -> None:
    plan = planned(backend)
    first = plan.steps[0][1]
    pause = ProcessPause(first, 60.0, 6.0)

    async def roll_while_paused() -> dict[str, Any]:
        await backend.faults.apply(pause)
        await backend.faults.apply(plan)
        healed: dict[str, Any] = await backend.faults.heal(plan)
        await backend.faults.heal(pause)
        return healed

    healed = backend.run(roll_while_paused())
    held = [s for s in healed["steps"] if s["node"] == first]
    assert [s["held"] for s in held] == ["paused", "paused"] and not any(s["seen"] for s in held)
    assert all(s["seen"] for s in healed["steps"] if s["node"] != first)
    assert backend.cluster.broker_node(first).config.inter_broker_protocol == "kip-343"


def test_heal_all_ends_a_running_roll_with_every_broker_running(backend: Any) -> None:
    plan = planned(backend)

    async def heal_all_midway() -> dict[str, Any]:
        await backend.faults.apply(plan)
        await asyncio.sleep(0.3)
        return await backend.faults.heal_all(("kill", "upgrade"))  # type: ignore[no-any-return]

    report = backend.run(heal_all_midway())
    rolls = report["upgrade"]["rolls"]
    assert len(rolls) == 1 and rolls[0]["complete"] is True
    assert all(n.is_running() for n in backend.cluster.broker_nodes)


# ---------------------------------------------------------------- real nodes: the command line


def test_real_nodes_restart_with_the_new_protocol_on_their_command_line() -> None:
    cluster = FakeCluster(3)
    incarnation = iter(range(100, 200))

    def read(broker_id: int) -> zk_layout.BrokerRegistration | None:
        version = cluster.node(f"n{broker_id}").inter_broker_protocol
        return zk_layout.BrokerRegistration(broker_id, "a:1", next(incarnation),
                                            info_version=ibp.features(version).registration_version)

    polls: list[int] = []

    def out_of_isr(broker_id: int) -> list[tuple[str, int]]:  # rejoins at the second look
        polls.append(broker_id)
        return [("t0", 1)] if len(polls) % 2 else []

    applier = NodeFaultApplier(cluster, registration=read, out_of_isr=out_of_isr)
    plan = DoubleRoll(((1, "n1", 1, "heartbeats"), (2, "n1", 1, "kip-343")))

    async def roll() -> dict[str, Any]:
        await applier.apply(plan)
        return await applier.heal(plan)

    healed = asyncio.run(roll())
    assert [s["seen"] for s in healed["steps"]] == [True, True]
    assert [s["out_of_isr"] for s in healed["steps"]] == [[], []] and polls == [1, 1, 1, 1]
    node = cluster.node("n1")
    assert node.inter_broker_protocol == "kip-343" and node.signals == ["TERM", "START", "TERM", "START"]
    assert cluster.node("n2").signals == []


# ---------------------------------------------------------------- coverage


def test_coverage_counts_an_upgrade_only_when_every_step_was_seen(tmp_path: Path) -> None:
    config = make_config({**SMALL, "seed": 5, "time_limit": 40.0, "nemesis": "upgrade"})
    runner = Runner(config, tmp_path / "store", out=io.StringIO(), report=False)
    runner.run()
    coverage = fault_coverage(read_history(runner.run_dir.history))
    assert coverage["upgrade"].planned == 1 and coverage["upgrade"].took_effect == 1
    stops = [op for op in read_history(runner.run_dir.history) if op.f == "stop-upgrade" and op.type == "ok"]
    value = dict(stops[0].value)
    value["steps"] = [dict(s, seen=False) if i == 3 else s for i, s in enumerate(value["steps"])]
    starts = [op for op in read_history(runner.run_dir.history) if op.f == "start-upgrade" and op.type == "ok"]
    assert TOOK_EFFECT["upgrade"](starts[0].value, value) is not None
    assert TOOK_EFFECT["upgrade"](starts[0].value, None) is not None
    assert TOOK_EFFECT["upgrade"](starts[0].value, stops[0].value) is None


# ---------------------------------------------------------------- whole simulated runs


# Seeds whose schedules draw the upgrade alongside other faults: a partition during the roll
# (2, 4), a broker killed when it starts (12).
@pytest.mark.parametrize("seed", [2, 4, 12])
def test_simulated_runs_with_upgrade_kill_and_partition_are_valid(seed: int, tmp_path: Path) -> None:
    config = make_config({"cluster": "sim", "seed": seed, "nemesis": "upgrade,kill,partition"})
    runner = Runner(config, tmp_path / "store", out=io.StringIO(), report=False)
    runner.run()
    assert runner.outcome.error is None and runner.outcome.valid is True
    coverage = fault_coverage(read_history(runner.run_dir.history))
    assert coverage["upgrade"].took_effect == coverage["upgrade"].planned == 1, coverage["upgrade"].missed


def test_a_simulated_upgrade_run_replays_byte_for_byte(tmp_path: Path) -> None:
    config = make_config({"cluster": "sim", "seed": 2, "nemesis": "upgrade,kill,partition"})
    digests = []
    for name in ("a", "b"):
        runner = Runner(config, tmp_path / name, out=io.StringIO(), report=False)
        runner.run()
        assert runner.outcome.digest is not None
        digests.append(runner.outcome.digest)
    assert digest.differences(digests[0], digests[1]) == []


# ---------------------------------------------------------------- the driver heals it in the background


def test_the_driver_heals_an_upgrade_in_the_background_so_the_schedule_goes_on(tmp_path: Path) -> None:
    from floodmark.harness.recorder import Recorder
    from floodmark.harness.schedule import Fault, Schedule, ScheduleLog
    from floodmark.run.fault_driver import FaultDriver

    class SlowRoll:
        def refuses(self, kind: str, shape: str) -> str | None:
            return None

        async def apply(self, plan: Any) -> dict[str, Any]:
            return {"applied": plan.kind}

        async def heal(self, plan: Any) -> dict[str, Any]:
            if isinstance(plan, DoubleRoll):
                await asyncio.sleep(0.5)  # the rest of the roll
            return {"healed": plan.kind}

        async def heal_all(self, kinds: tuple[str, ...]) -> dict[str, dict[str, Any]]:
            return {k: {} for k in kinds}

    view = view_of(FakeCluster(), controller=1, protocol="legacy")

    async def observe() -> Any:
        return view

    faults = (Fault(0, "upgrade", "double-roll", 0.0, 0.05, 1), Fault(1, "kill", "random", 0.1, 0.1, 2))
    recorder = Recorder(tmp_path / "history.jsonl")
    driver = FaultDriver(recorder, Composite(["upgrade", "kill"]), SlowRoll(), observe,
                         ScheduleLog(tmp_path / "schedule.json", 5, Schedule(faults, 1.0)))

    async def go() -> None:
        await driver.run(recorder.seconds(), asyncio.Event())
        await driver.heal_all()

    asyncio.run(go())
    recorder.close()
    done = [(op.f, round(op.time / 1e9, 1)) for op in read_history(tmp_path / "history.jsonl") if op.type == "ok"]
    assert [f for f, _ in done] == ["start-upgrade", "start-kill", "stop-kill", "stop-upgrade", "heal-all"]
    assert dict(done)["start-kill"] < 0.3  # on time, not after the roll
