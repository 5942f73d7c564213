"""Tests of the simulated world and runtimes (floodmark.reference.sim.world, .runtime, .node)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from floodmark.contracts.node_events import BecameLeader, Started, Stopped, iter_events
from floodmark.reference.protocol import messages as m
from floodmark.reference.sim import SimRuntime, SimWorld
from floodmark.reference.sim.world import VIRTUAL_EPOCH

pytestmark = pytest.mark.sim_world(seed=5)


def test_clocks_are_virtual_and_clock_offsets_move_only_wall_time(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    n2 = world.add_node("n2")
    world.run(n1.sleep(10.0))
    assert n1.monotonic() == pytest.approx(10.0)
    world.set_clock_offset("n2", -30.0)
    assert n1.wall_time() == pytest.approx(VIRTUAL_EPOCH + 10.0)
    assert n2.wall_time() == pytest.approx(VIRTUAL_EPOCH - 20.0)
    assert n2.monotonic() == n1.monotonic()


def test_events_are_numbered_per_node_and_survive_restart(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    n1.emit(Started())
    leading = BecameLeader(topic="t", partition=0, leader_epoch=1, isr=(1,), log_end=0, high_watermark=0)
    n1.emit(leading)
    world.crash("n1")
    n1.emit(Stopped())  # a dead incarnation's event is not recorded
    again = world.restart("n1")
    again.emit(Started())
    events = world.events("n1")
    assert [(e.seq, e.body) for e in events] == [(0, Started()), (1, leading), (2, Started())]
    assert events[1].node == "n1" and events[1].wall == pytest.approx(VIRTUAL_EPOCH)


def test_event_lines_are_the_events_file_of_the_node(world: SimWorld, tmp_path: Path) -> None:
    n1 = world.add_node("n1")
    n1.emit(Started())
    world.run(n1.sleep(1.5))
    n1.emit(BecameLeader(topic="t", partition=0, leader_epoch=1, isr=(1, 2), log_end=0, high_watermark=0))
    lines = world.event_lines("n1")
    assert lines == b"".join(orjson.dumps(e.to_dict(), option=orjson.OPT_APPEND_NEWLINE) for e in world.events("n1"))
    (tmp_path / "n1.jsonl").write_bytes(lines)
    assert list(iter_events(tmp_path / "n1.jsonl")) == world.events("n1")


def test_crash_cancels_the_nodes_tasks_and_restart_keeps_the_disk(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    n2 = world.add_node("n2")
    ticks = {"n1": 0, "n2": 0}

    async def ticker(rt: SimRuntime) -> None:
        while True:
            await rt.sleep(1.0)
            ticks[rt.node] += 1

    n1.spawn(ticker(n1), "ticker")
    n2.spawn(ticker(n2), "ticker")
    n1.storage.make_dirs("/data")
    f = n1.storage.open_append("/data/durable")
    f.write(b"synced")
    f.fsync()
    f.write(b"+lost")
    world.run_for(3.5)
    world.crash("n1")
    world.run_for(3.0)
    assert ticks == {"n1": 3, "n2": 6}
    restarted = world.restart("n1")
    assert restarted is world.runtime("n1") and restarted is not n1
    assert restarted.storage.read("/data/durable") == b"synced"
    assert world.failures == []


def test_pause_stops_progress_and_resume_continues(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            await n1.sleep(1.0)
            ticks.append(n1.monotonic())

    n1.spawn(ticker(), "ticker")
    world.run_for(2.5)
    world.pause("n1")
    world.run_for(10.0)
    assert len(ticks) == 2
    world.resume("n1")
    world.run_for(2.0)
    # The sleep that was due during the pause completes at resume time (12.5), then 13.5, 14.5.
    assert ticks[2:] == pytest.approx([12.5, 13.5, 14.5])


def test_a_failing_background_task_is_recorded(world: SimWorld) -> None:
    n1 = world.add_node("n1")

    async def fail() -> None:
        await n1.sleep(0.5)
        raise RuntimeError("bug")

    n1.spawn(fail(), "buggy")
    world.run_for(1.0)
    assert [(node, what, str(e)) for node, what, e in world.failures] == [("n1", "n1:buggy", "bug")]


def test_run_until_reports_whether_the_predicate_held(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    done: list[bool] = []

    async def later() -> None:
        await n1.sleep(4.0)
        done.append(True)

    n1.spawn(later(), "later")
    assert world.run_until(lambda: bool(done), timeout=10.0)
    assert world.now() == pytest.approx(4.0, abs=0.02)
    assert not world.run_until(lambda: False, timeout=2.0)


def test_crash_expires_the_zookeeper_session_after_its_timeout(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    n2 = world.add_node("n2")

    async def register() -> Any:
        zk = await n1.coordination(session_timeout=6.0)
        await zk.create("/brokers/ids/1", b"n1", ephemeral=True, makepath=True)
        watcher = await n2.coordination(session_timeout=6.0)
        seen: list[Any] = []
        await watcher.exists("/brokers/ids/1", watch=seen.append)
        return seen

    seen = world.run(register())
    world.crash("n1")
    world.run_for(5.0)
    assert world.zk.exists("/brokers/ids/1") is not None  # not yet: the session is still alive
    world.run_for(2.0)
    assert world.zk.exists("/brokers/ids/1") is None
    assert [e.type for e in seen] == ["DELETED"]


def trace_of_a_busy_world(seed: int) -> list[tuple[Any, ...]]:
    """A small chaotic scenario whose every observable step is recorded."""
    trace: list[tuple[Any, ...]] = []
    with SimWorld(seed=seed) as world:
        runtimes = [world.add_node(f"n{i}") for i in range(1, 4)]

        def handler_for(rt: SimRuntime) -> Any:
            async def handle(sender: str, message: Any) -> Any:
                await rt.sleep(rt.random.uniform(0, 0.01))
                trace.append((round(world.now(), 9), rt.node, "handled", sender, message.partition))
                return m.ProduceResponse(None, base_offset=message.partition)
            return handle

        async def chatter(rt: SimRuntime) -> None:
            zk = await rt.coordination(4.0)
            for i in range(20):
                peer = f"n{rt.random.randint(1, 3)}"
                try:
                    r = await rt.network.request(peer, m.ProduceRequest("t", i, ()), 0.5)
                    trace.append((round(world.now(), 9), rt.node, "reply", peer, r.base_offset))
                    path = await zk.create(f"/seq/{rt.node}-", b"", sequential=True, makepath=True)
                    trace.append((round(world.now(), 9), rt.node, "created", path))
                except Exception as e:
                    trace.append((round(world.now(), 9), rt.node, "error", type(e).__name__))
                await rt.sleep(rt.random.expovariate(10))

        for rt in runtimes:
            world.run(rt.network.serve(handler_for(rt)))
            rt.spawn(chatter(rt), "chatter")
        world.run_for(0.5)
        world.partition({"n1"}, {"n2", "zk"})
        world.run_for(1.0)
        world.heal()
        world.run_for(3.0)
    return trace


def test_same_seed_gives_the_same_trace_and_another_seed_does_not() -> None:
    first = trace_of_a_busy_world(42)
    assert len(first) > 60
    assert any(step[2] == "error" for step in first)  # the partition really bit
    assert trace_of_a_busy_world(42) == first
    assert trace_of_a_busy_world(43) != first


def test_tasks_of_a_crashed_or_paused_node_start_only_when_they_may(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    started: list[str] = []

    async def note(name: str) -> None:
        started.append(name)

    world.pause("n1")
    n1.spawn(note("spawned while paused"), "a")
    world.run_for(1.0)
    assert started == []
    world.resume("n1")
    world.run_for(0.1)
    assert started == ["spawned while paused"]
    world.pause("n1")
    n1.spawn(note("never: crashed before it could start"), "b")
    world.crash("n1")
    n1.spawn(note("never: spawned by a dead incarnation"), "c")
    world.run_for(1.0)
    assert started == ["spawned while paused"]


def test_a_deadlock_names_the_tasks_that_wait(world: SimWorld) -> None:
    from floodmark.reference.sim import SimulationDeadlock

    n1 = world.add_node("n1")
    never: asyncio.Future[None] = world.loop.create_future()

    async def stuck() -> None:
        await never

    n1.spawn(stuck(), "stuck-forever")
    with pytest.raises(SimulationDeadlock, match="n1:stuck-forever"):
        world.run(never)


# ------------------------------------------------------------------ kill and power loss


def write_synced_then_unsynced(rt: SimRuntime) -> None:
    rt.storage.make_dirs("/data")
    f = rt.storage.open_append("/data/log")
    f.write(b"synced")
    f.fsync()
    f.write(b"+cached")
    rt.storage.make_dirs("/data/new-dir")  # a metadata change not yet committed
    rt.storage.defer_syncs()
    rt.storage.write_atomic("/data/checkpoint", b"deferred")  # a group commit left open


def test_kill_loses_the_process_but_nothing_it_wrote(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    write_synced_then_unsynced(n1)
    n1.spawn(n1.sleep(100.0), "sleeper")
    death = world.kill("n1")
    assert (death.was_running, death.tasks_cancelled, death.incarnation) == (True, 1, 0)
    assert (death.disk.unsynced_bytes, death.disk.uncommitted_changes, death.disk.deferred_writes) == (0, 0, 1)
    again = world.restart("n1")
    assert again.storage.read("/data/log") == b"synced+cached"  # the page cache survived
    assert again.storage.is_dir("/data/new-dir")
    assert not again.storage.exists("/data/checkpoint")  # its rename never happened
    # What the page cache holds is still not durable: a power loss now takes it.
    later = world.power_loss("n1")
    assert later.disk.unsynced_bytes == len(b"+cached") and later.disk.uncommitted_changes >= 1
    world.restart("n1")
    assert world.runtime("n1").storage.read("/data/log") == b"synced"
    assert world.failures == []


def test_power_loss_drops_every_unsynced_write_and_crash_is_a_power_loss(world: SimWorld) -> None:
    for name, stop in (("n1", world.power_loss), ("n2", world.crash)):
        rt = world.add_node(name)
        write_synced_then_unsynced(rt)
        death = stop(name)
        assert death.disk.unsynced_bytes == len(b"+cached") and death.disk.deferred_writes == 1
        again = world.restart(name)
        assert again.storage.read("/data/log") == b"synced"
        assert not again.storage.exists("/data/new-dir") and not again.storage.exists("/data/checkpoint")
    assert world.disk("n1").crashes == 1 and world.disk("n1").kills == 0


def test_killing_a_dead_node_changes_nothing(world: SimWorld) -> None:
    world.add_node("n1")
    world.kill("n1")
    death = world.kill("n1")
    assert not death.was_running and death.tasks_cancelled == 0
    assert world.disk("n1").kills == 1


# ------------------------------------------------------------------ clock rates


def test_a_clock_rate_runs_from_the_change_without_a_jump_and_reset_restores_real_time(world: SimWorld) -> None:
    n1 = world.add_node("n1")
    world.run_for(10.0)
    world.set_clock_offset("n1", 5.0)
    assert n1.wall_time() == pytest.approx(VIRTUAL_EPOCH + 15.0)
    world.set_clock_rate("n1", 2.0)
    assert n1.wall_time() == pytest.approx(VIRTUAL_EPOCH + 15.0)  # no jump at the change
    world.run_for(4.0)
    assert n1.wall_time() == pytest.approx(VIRTUAL_EPOCH + 23.0)  # 4 real seconds, 8 on its clock
    assert world.clock_skew("n1") == pytest.approx(9.0)
    world.set_clock_rate("n1", 0.5)
    world.run_for(4.0)
    assert n1.wall_time() == pytest.approx(VIRTUAL_EPOCH + 25.0)
    assert n1.monotonic() == pytest.approx(18.0)  # monotonic time never skews
    world.reset_clock("n1")
    assert n1.wall_time() == pytest.approx(VIRTUAL_EPOCH + 18.0)
    world.run_for(1.0)
    assert world.clock_skew("n1") == 0.0


def test_a_stopped_clock_and_a_clock_that_survives_a_restart(world: SimWorld) -> None:
    world.add_node("n1")
    world.set_clock_rate("n1", 0.0)
    world.run_for(3.0)
    world.kill("n1")
    again = world.restart("n1")
    assert again.wall_time() == pytest.approx(VIRTUAL_EPOCH)  # the machine's clock, not the process's
    with pytest.raises(ValueError, match="negative"):
        world.set_clock_rate("n1", -1.0)
