"""The sim backend: whole runs on virtual time, every fault applied with evidence, exact replay."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from floodmark.backends.sim import SimBackend
from floodmark.checkers import registry
from floodmark.cli import main
from floodmark.contracts.history import read_history
from floodmark.contracts.node_event_fields import NodeEventError
from floodmark.contracts.node_events import read_events_dir
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import make_config
from floodmark.harness.faults import (
    ClockSkew,
    ClockStrobe,
    DiskFault,
    FaultPlan,
    MessageFault,
    NetworkCut,
    ProcessCrash,
    ProcessPause,
    SessionExpiry,
)
from floodmark.harness.schedule import Fault, Schedule
from floodmark.reference.broker.broker import START_GRACE
from floodmark.run import digest
from floodmark.run.runner import Runner

SMALL = {"cluster": "sim", "time_limit": 12.0, "rate": 50.0, "concurrency": 4, "topics": 1,
         "partitions": 2, "fault_duration": [2.0, 4.0], "quiet_period": [1.0, 2.0]}


def run(tmp_path: Path, schedule: Schedule | None = None, **values: Any) -> Runner:
    config = make_config({**SMALL, "seed": 7, **values})
    runner = Runner(config, tmp_path / "store", schedule=schedule, out=io.StringIO(), report=False)
    runner.run()
    return runner


def test_a_simulated_run_leaves_a_whole_run_directory_and_a_verdict(tmp_path: Path) -> None:
    runner = run(tmp_path, nemesis="kill,partition")
    path = runner.run_dir.path
    assert runner.outcome.error is None and runner.outcome.valid is True
    for name in ("test.yaml", "schedule.json", "history.jsonl", "results.json", "digest.json"):
        assert (path / name).is_file(), name
    assert sorted(p.name for p in (path / "events").iterdir()) == ["n1.jsonl", "n2.jsonl", "n3.jsonl"]
    assert (path / "logs" / "n1" / "broker.log").is_file()
    ops = read_history(path / "history.jsonl")
    assert sum(op.type == "ok" and op.f == "send" for op in ops) > 100
    assert ops[-1].time < 60e9  # virtual nanoseconds since the test started
    executed = json.loads((path / "schedule.json").read_text())["executed"]
    assert executed and all(e["error"] is None for e in executed)


def test_the_same_seed_replays_byte_for_byte(tmp_path: Path) -> None:
    first = run(tmp_path / "a", nemesis="all")
    second = run(tmp_path / "b", nemesis="all")
    assert first.outcome.digest is not None
    assert digest.differences(first.outcome.digest, second.outcome.digest or {}) == []
    other = run(tmp_path / "c", nemesis="all", seed=8)
    assert other.outcome.digest is not None and other.outcome.digest["run"] != first.outcome.digest["run"]


SCRIPT = """
import io, sys
from floodmark.harness.config import make_config
from floodmark.run.runner import Runner
config = make_config({**%r, "seed": 11, "nemesis": "all"})
runner = Runner(config, sys.argv[1], out=io.StringIO(), check=False)
runner.run()
print(runner.outcome.digest["run"])
"""


def test_replay_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", SCRIPT % SMALL, str(tmp_path / hash_seed)],
                             capture_output=True, text=True, env=env, timeout=300, check=True)
        digests.add(out.stdout.strip().splitlines()[-1])
    assert len(digests) == 1, digests


def test_a_run_whose_own_record_its_checkers_refuse_is_unknown_saying_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Explore seed 69,386's own node events broke a reader's contract: floodmark run exited
    # with the refusal as if the user's input were bad, and kept no verdict.
    def refuse(run_dir: str, ops: Any = None) -> Any:
        raise NodeEventError(f"{run_dir}/events/n3.jsonl", 491, "broker_state after the clean stop on line 490")

    monkeypatch.setattr(registry, "check_run", refuse)
    store = tmp_path / "store"
    code = main(["run", "--cluster", "sim", "--seed", "7", "--time-limit", "6", "--nemesis", "kill",
                 "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "verdict: UNKNOWN (its own record was refused: " in err and "n3.jsonl:491: broker_state" in err
    assert "Traceback" not in err
    (results,) = store.glob("*/*/results.json")
    saved = json.loads(results.read_text())
    assert saved["valid"] == "unknown" and "n3.jsonl:491" in saved["error"]


def test_a_hand_written_schedule_is_replayed_as_written(tmp_path: Path) -> None:
    schedule = Schedule((Fault(0, "power", "leader", 3.0, 2.0, 1),
                         Fault(1, "message", "delay-leader-and-isr", 6.0, 3.0, 2)), 12.0)
    runner = run(tmp_path, schedule=schedule, nemesis="power,message")
    executed = json.loads(runner.run_dir.schedule.read_text())["executed"]
    assert [(e["kind"], e["shape"], e["start"]) for e in executed] == [
        ("power", "leader", 3.0), ("message", "delay-leader-and-isr", 6.0)]
    assert executed[0]["start_result"]["mode"] == "power-loss"
    assert executed[1]["stop_result"]["rule"]["action"] == "delay"


@pytest.fixture
def backend() -> Any:
    sim = SimBackend(make_config({**SMALL, "seed": 3, "nodes": 3}), ClusterSpec(brokers=3, seed=5))
    sim.setup()
    yield sim
    sim.force_cleanup()


def applied(backend: Any, plan: FaultPlan) -> tuple[dict[str, Any], dict[str, Any]]:
    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        evidence = await backend.faults.apply(plan)
        await asyncio.sleep(1.0)
        return evidence, await backend.faults.heal(plan)

    return backend.run(both())  # type: ignore[no-any-return]


def test_a_broker_killed_during_its_clean_restart_is_down_not_an_error(backend: Any) -> None:
    # Explore seeds overlap faults: a kill can land while a clean restart's controlled
    # shutdown is under way on the same broker. The shutdown then ends with the broker down.
    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        terminating = asyncio.ensure_future(backend.faults.apply(ProcessCrash("n2", "terminate")))
        await asyncio.sleep(0.05)
        killed = await backend.faults.apply(ProcessCrash("n2", "kill"))
        return await terminating, killed

    terminated, killed = backend.run(both())
    assert terminated["running"] is False and killed["running"] is False
    assert not backend.cluster.broker_node("n2").is_running()


def test_a_broker_killed_and_started_again_during_its_clean_restart_is_no_error(backend: Any) -> None:
    # A hand-written schedule of overlapping restarts: a kill's heal started the broker's next
    # process before the clean restart's controlled shutdown, asleep, heard of the crash; the
    # shutdown then met a running broker and took the crash for the harness's own
    # cancellation ("run failed: CancelledError: node n1 crashed", an unknown run).
    node = backend.cluster.broker_node("n2")

    async def both() -> tuple[dict[str, Any], bool]:
        terminating = asyncio.ensure_future(backend.faults.apply(ProcessCrash("n2", "terminate")))
        await asyncio.sleep(0.05)
        node.kill()
        node.start()  # at the same instant: the shutdown's sleep has not ended yet
        return await terminating, node.is_running()

    terminated, running = backend.run(both())
    assert terminated["stopped_cleanly"] is False and running


def test_a_broker_told_to_stop_before_its_start_ran_starts_first_and_stops_cleanly(backend: Any,
                                                                                    tmp_path: Path) -> None:
    # Explore seed 69,386: a disk fault's heal restarted n3 and the next one's heal, at the
    # same virtual instant, stopped it before its start had run. Its event file then held a
    # "Stopping" after its "stopped" and before its "started", which every reader refuses.
    node = backend.cluster.broker_node("n2")

    async def restart_then_stop_at_once() -> bool:
        assert await node.shut_down() is True
        node.start()
        return await node.shut_down()

    assert backend.run(restart_then_stop_at_once()) is True and not node.is_running()
    kinds = [event.body.kind for event in backend.cluster.world.events("n2")]
    last_start = len(kinds) - 1 - kinds[::-1].index("started")
    assert kinds.count("started") == 2 and kinds[-1] == "stopped" and "stopped" not in kinds[last_start:-1]
    (tmp_path / "n2.jsonl").write_bytes(backend.cluster.world.event_lines("n2"))
    assert len(read_events_dir(tmp_path)["n2"]) == len(kinds)  # its readers take the whole story


def test_a_stop_waits_out_a_stuck_start_for_the_grace_then_abandons_it(backend: Any) -> None:
    # As floodmark broker does when told to stop while ZooKeeper is unreachable.
    node = backend.cluster.broker_node("n2")
    world = backend.cluster.world

    async def stop_a_start_that_cannot_finish() -> tuple[bool, float]:
        assert await node.shut_down() is True
        world.cut("n2", "zk")
        node.start()
        await asyncio.sleep(0.5)
        started_at = world.now()
        clean = await node.shut_down(grace=60.0)
        return clean, world.now() - started_at

    clean, took = backend.run(stop_a_start_that_cannot_finish())
    assert clean is False and not node.is_running()
    assert START_GRACE - 0.5 <= took < START_GRACE + 0.5, took
    assert [e.body.kind for e in world.events("n2")][-1] == "started"  # no clean stop is claimed


def test_a_pause_longer_than_the_session_confirms_the_session_expired(backend: Any) -> None:
    timeout = backend.config.zk_session_timeout
    plan = ProcessPause("n2", 2.5 * timeout, timeout)

    async def pause() -> dict[str, Any]:
        await backend.faults.apply(plan)
        await asyncio.sleep(plan.seconds)
        return await backend.faults.heal(plan)  # type: ignore[no-any-return]

    assert backend.run(pause())["resumed"]["session_expired"] is True
    short = ProcessPause("n2", 0.3 * timeout, timeout)
    _, resumed = applied(backend, short)
    assert "session_expired" not in resumed["resumed"]  # a short pause promises no expiry


def test_every_plan_takes_effect_and_heals_with_evidence(backend: Any) -> None:
    world = backend.world
    cut, healed = applied(backend, NetworkCut((("n1", ("n2", "zk")),)))
    assert cut == {"links_down": 2, "links": 2} and healed == {"links_up": 2, "links": 2}
    expired, _ = applied(backend, SessionExpiry("n2"))  # while n2 is registered: before it restarts
    assert expired["ephemerals_deleted"] and "/brokers/ids/2" in expired["ephemerals_deleted"]
    killed, restarted = applied(backend, ProcessCrash("n2", "kill"))
    assert killed["running"] is False and killed["lost_unsynced_bytes"] == 0
    assert restarted["restarted"]["n2"] != killed["pid"]
    powered, _ = applied(backend, ProcessCrash("n3", "power-loss"))
    assert powered["running"] is False
    paused, resumed = applied(backend, ProcessPause("n1", 1.0, 6.0))
    assert paused["stopped"] is True and resumed["resumed"]["paused_for"] >= 1.0
    skew, reset = applied(backend, ClockSkew((("n1", 30.0, 1.0), ("n2", 0.0, 2.0))))
    assert skew["skew"] == {"n1": 30.0, "n2": 0.0} and reset["skew"] == {"n1": 0.0, "n2": 0.0}
    strobe, _ = applied(backend, ClockStrobe(("n3",), 50.0, 0.3))
    assert strobe == {"strobing": ["n3"]} and world.clock_skew("n3") == 0.0
    disk, usable = applied(backend, DiskFault("n1", "/data/logdir1", "replace-with-file"))
    assert disk == {"unusable": True} and usable["usable"] is True
    assert usable["restarted"]["node"] == "n1" and backend.cluster.broker_node("n1").is_running()
    _, rule = applied(backend, MessageFault("BrokerHeartbeatRequest", "drop"))
    assert rule["rule"]["dropped"] > 0
    assert backend.faults.refuses("message", "drop-fetch-response") is None


def test_the_brokers_speak_the_tests_inter_broker_protocol() -> None:
    sim = SimBackend(make_config({**SMALL, "seed": 3, "inter_broker_protocol": "kip-343"}),
                     ClusterSpec(brokers=3, seed=5))
    assert {node.config.inter_broker_protocol for node in sim.cluster.broker_nodes} == {"kip-343"}


def test_a_run_that_never_ends_is_cancelled_at_its_virtual_time_budget(backend: Any) -> None:
    # A hang whose clock runs on (timers firing while the harness waits for what will not
    # happen) is no deadlock the loop could see; the budget ends it instead of explore
    # waiting forever on the seed.
    from floodmark.backends.sim.backend import SimulationOverrun, virtual_time_budget

    budget = virtual_time_budget(backend.config)
    assert budget >= 3 * (backend.config.time_limit + backend.config.recovery_time)
    started_at = backend.world.now()

    async def waits_for_nothing() -> None:
        try:
            await asyncio.Event().wait()  # nothing will ever set it; broker timers still run
        finally:
            await asyncio.Event().wait()  # and its clean-up hangs too

    with pytest.raises(SimulationOverrun, match=f"still going {budget:.0f} virtual seconds in"):
        backend.run(waits_for_nothing())
    assert budget <= backend.world.now() - started_at <= budget + 61.0

    async def cleans_up_at_once() -> None:
        await asyncio.Event().wait()

    with pytest.raises(SimulationOverrun):
        backend.run(cleans_up_at_once())
    # Nothing of an overrun is left to stop a later run.
    assert backend.run(asyncio.sleep(120.0, result="alive")) == "alive"


def test_the_collector_runs_less_often_only_while_the_world_runs(backend: Any) -> None:
    import gc

    from floodmark.backends.sim.backend import COLLECTOR_THRESHOLDS

    async def thresholds() -> tuple[int, ...]:
        return gc.get_threshold()

    before = gc.get_threshold()
    assert before != COLLECTOR_THRESHOLDS
    assert backend.run(thresholds()) == COLLECTOR_THRESHOLDS
    assert gc.get_threshold() == before

    async def broken() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError):
        backend.run(broken())
    assert gc.get_threshold() == before
