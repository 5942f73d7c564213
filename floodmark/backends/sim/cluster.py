"""Simulated nodes behind the node-control interface: start, stop, kill, pause, as on real ones.

A simulated broker node holds one :class:`~floodmark.reference.broker.broker.Broker` per
incarnation. ``start`` builds a new broker on the node's next incarnation (same disk, same
address) and starts it in the background, as launching a process returns before the process
is ready; ``stop`` is a controlled shutdown that ends the process cleanly; ``kill`` ends the
process at once (SIGKILL: what it wrote survives in the operating system's page cache);
``power_loss`` ends it and loses every write it had not synced. ``pause``/``resume`` freeze the
node as SIGSTOP would. Simulated nodes run no commands and hold no files the harness can copy:
``exec`` and the file calls say so.

ZooKeeper is the simulated server ``zk``: it takes part in partitions, but cannot be stopped.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from floodmark.harness.cluster import (
    ZOOKEEPER_NODE,
    ClusterError,
    ClusterSpec,
    ExecResult,
    NodeRoster,
    Role,
    broker_name,
)
from floodmark.reference.broker.broker import START_GRACE, Broker
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.sim.world import ProcessDeath, SimWorld
from floodmark.run_dirs.rundir import RunDir

LOG_DIRS = ("/data/logdir0", "/data/logdir1")
PID_BASE = 1000  # a node's "pid" is this plus its incarnation: new process, new pid


class SimNodeControl:
    """What every simulated node answers, and the calls no simulated node can serve."""

    def __init__(self, world: SimWorld, name: str, role: Role, broker_id: int | None,
                 log_dirs: tuple[str, ...]) -> None:
        self.world = world
        self.name = name
        self.role = role
        self.broker_id = broker_id
        self.ip = name
        self.address = name
        self.log_dirs = log_dirs
        self.clock_file: str | None = None
        self.events_path: str | None = None

    def exec(self, argv: Sequence[str], user: str | None = None, timeout: float = 30.0) -> ExecResult:
        raise ClusterError(f"{self.name}: a simulated node runs no commands ({' '.join(argv[:1])})")

    def copy_from(self, path: str, dest: Path) -> None:
        raise ClusterError(f"{self.name}: a simulated node has no files to copy")

    def copy_to(self, src: Path, path: str) -> None:
        raise ClusterError(f"{self.name}: a simulated node has no files to copy")

    def write_file(self, path: str, content: str, user: str | None = None) -> None:
        raise ClusterError(f"{self.name}: a simulated node has no files to write")

    @property
    def inter_broker_protocol(self) -> str | None:
        return None

    def set_inter_broker_protocol(self, version: str) -> None:
        raise ClusterError(f"{self.name}: only a broker speaks an inter-broker protocol")


class SimZooKeeperNode(SimNodeControl):
    def __init__(self, world: SimWorld) -> None:
        super().__init__(world, ZOOKEEPER_NODE, "zookeeper", None, ())

    def start(self) -> None:
        """Always running."""

    def stop(self, timeout: float = 10.0) -> None:
        raise ClusterError("the simulated ZooKeeper cannot be stopped")

    kill = pause = resume = stop  # type: ignore[assignment]

    def is_running(self) -> bool:
        return True

    def pid(self) -> int | None:
        return PID_BASE


class SimBrokerNode(SimNodeControl):
    def __init__(self, world: SimWorld, broker_id: int, config: BrokerConfig) -> None:
        super().__init__(world, broker_name(broker_id), "broker", broker_id, config.log_dirs)
        self.config = config
        world.add_node(self.name)
        self.broker: Broker | None = None
        self._starting: asyncio.Task[Any] | None = None  # the current process's start
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def inter_broker_protocol(self) -> str | None:
        return self.config.inter_broker_protocol

    def set_inter_broker_protocol(self, version: str) -> None:
        """From its next process on (each start builds a broker from ``config``)."""
        self.config = dataclasses.replace(self.config, inter_broker_protocol=version)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """A new process on the node's disk, started in the background."""
        node = self.world.node(self.name)
        if self.broker is not None and node.alive:
            return
        runtime = self.world.runtime(self.name) if self.broker is None else self.world.restart(self.name)
        self.broker = Broker(runtime, self.config)
        self._starting = self._background(self.broker.start(), "start")

    async def start_and_wait(self) -> None:
        """Start the first process and wait until it has registered (cluster set-up)."""
        runtime = self.world.runtime(self.name)
        self.broker = Broker(runtime, self.config)
        await self.broker.start()

    async def shut_down(self, grace: float | None = None) -> bool:
        """Controlled shutdown, then the process exits (nothing is lost): True. A process
        that has not exited after ``grace`` seconds (default: two ZooKeeper session
        timeouts, the real backends' SIGTERM grace) is killed then, as a real harness
        follows SIGTERM with SIGKILL: False. A broker whose controller's event thread is
        stuck never finishes stopping, in Kafka as here.

        Another fault may crash the node while it shuts down (a kill or a power loss aimed at
        it meanwhile), and that fault's heal may even have started its next process before the
        stop hears of it: either way the process it was stopping is gone, as it would be for
        real, and that is no error of the harness that asked for the shutdown: False, for the
        process did not stop cleanly.
        """
        if self.broker is None or not self.is_running():
            return True
        task = asyncio.current_task()
        incarnation = self.world.node(self.name).incarnation
        killed: list[bool] = []

        def kill_after_grace() -> None:  # a timer, not wait_for: no extra task, the same runs
            killed.append(True)
            self.world.kill(self.name)
            if task is not None:
                task.cancel()  # whatever the stop was waiting for will never come now

        grace_timer = self.world.loop.call_later(
            2 * self.config.zk_session_timeout if grace is None else grace, kill_after_grace)
        try:
            if not await self._start_finished():
                self.world.kill(self.name)  # the process exits without a clean stop
                return False
            await self.broker.stop()
        except asyncio.CancelledError:
            if killed:
                if task is not None and task.uncancel() > 0:
                    raise  # the harness was cancelled as well
                return False
            if task is not None and task.cancelling():
                raise  # a real cancellation of the harness, not the node's crash
            if not self.is_running() or self.world.node(self.name).incarnation != incarnation:
                return False  # crashed meanwhile (and perhaps started again by another fault's heal)
            raise
        finally:
            grace_timer.cancel()
        if killed:  # the stop swallowed the cancellation and finished anyway
            if task is not None:
                task.uncancel()
            return False
        self.world.kill(self.name)
        return True

    def stop(self, timeout: float = 10.0) -> None:
        self._background(self.shut_down(timeout), "stop")

    async def _start_finished(self) -> bool:
        """Did the process's start finish? As a real broker process told to stop while it
        starts (``reference.real.process``), it gets ``START_GRACE`` seconds to, so that the
        stop is clean; a start not finished by then is abandoned. (Stopping a broker whose
        start had not run yet once recorded its stop before its start.)"""
        starting = self._starting
        if starting is None or starting.done():  # no await: runs without such a stop keep their schedule
            return True
        await asyncio.wait([starting], timeout=START_GRACE)
        if starting.done():
            return not starting.cancelled() and starting.exception() is None
        starting.cancel()
        return False

    def kill(self) -> None:
        self.world.kill(self.name)

    def kill_process(self) -> ProcessDeath:
        """SIGKILL, with the world's account of what died."""
        return self.world.kill(self.name)

    def power_loss(self) -> ProcessDeath:
        return self.world.power_loss(self.name)

    def pause(self) -> None:
        self.world.pause(self.name)

    def resume(self) -> None:
        self.world.resume(self.name)

    def is_running(self) -> bool:
        return self.broker is not None and self.world.node(self.name).alive

    def is_paused(self) -> bool:
        return self.is_running() and self.world.node(self.name).paused

    def pid(self) -> int | None:
        return PID_BASE + self.world.node(self.name).incarnation + 1 if self.is_running() else None

    def _background(self, coro: Any, what: str) -> asyncio.Task[Any]:
        task = self.world.loop.create_task(coro, name=f"{self.name}:{what}")
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[Any]) -> None:
        """A start that fails ends the process, as ``floodmark broker`` exits when it cannot
        start (a session expired while registering, say); heal-all starts it again."""
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        self.world.runtime(self.name).log.error("%s failed: %r; the process exits", task.get_name(), task.exception())
        if self.world.node(self.name).alive:
            self.world.kill(self.name)


class SimCluster(NodeRoster):
    """``harness.cluster.Cluster`` over a simulated world."""

    def __init__(self, spec: ClusterSpec, world: SimWorld, configs: Sequence[BrokerConfig]) -> None:
        self.spec = spec
        self.world = world
        self.zookeeper_node = SimZooKeeperNode(world)
        self.broker_nodes = [SimBrokerNode(world, c.broker_id, c) for c in configs]
        self._nodes = [self.zookeeper_node, *self.broker_nodes]

    def broker_node(self, name: str) -> SimBrokerNode:
        for node in self.broker_nodes:
            if node.name == name:
                return node
        raise KeyError(f"no simulated broker {name!r}")

    def setup(self) -> None:
        """Start every broker and wait until each has registered."""
        async def start_all() -> None:
            await asyncio.gather(*(node.start_and_wait() for node in self.broker_nodes))

        self.world.run(start_all())

    def teardown(self, collect_into: RunDir | None = None) -> None:
        self.world.close()
