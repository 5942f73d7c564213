"""The simulator as a run drives it: one world, its virtual clock and loop, hands and clients.

The runner's coroutines run on the world's virtual-time loop, so the workload, the fault
driver and the cluster all share one clock that moves only when nothing else can happen: a
60-second test takes as long as its computation, and nothing depends on real time. The
history is stamped with that clock; node events are the world's, written into ``events/`` at
teardown, and each node's log lines into ``logs/<node>/``.

Everything random flows from the run's seed: the world's network and nodes from the
cluster seed, the workload and the schedule from their own streams, so the same seed and
configuration give the same run, byte for byte, whatever ``PYTHONHASHSEED`` is.

A simulated run can also never end while its clock runs on: timers keep firing while the
harness waits for something that will not happen (a clean stop that never finishes, say).
The loop reports a deadlock by itself, but not that; so each call of :meth:`SimBackend.run`
has a budget of virtual time, a generous multiple of what the test's phases may take, and a
run past it is cancelled and fails with :class:`SimulationOverrun`: its verdict is unknown
with the reason, and ``floodmark explore`` goes on to the next seed instead of hanging.

While the world runs, the garbage collector's young collections come every
:data:`COLLECTOR_THRESHOLDS` allocations instead of 700, as in a real broker process
(``floodmark.reference.real.process``): a simulated minute allocates millions of short-lived
messages, futures and frames and keeps few cycles, and collecting every 700 allocations
walked them for a hundredth of the run's CPU. What the collector frees and when is no part
of the run: nothing in the simulation finalises or weakly references protocol state.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from floodmark.backends.interrupts import cancelled_on_interrupt, quiet_about_interrupts
from floodmark.backends.sim.clients import SimClientHost
from floodmark.backends.sim.cluster import LOG_DIRS, SimCluster
from floodmark.backends.sim.faults import SimFaultApplier
from floodmark.backends.zk_view import read_snapshot
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import TestConfig
from floodmark.harness.faults import BrokerSlot, ClusterView
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.reference.sim.cpu import CpuCosts
from floodmark.reference.sim.world import SimWorld
from floodmark.run_dirs.rundir import RunDir

T = TypeVar("T")

COLLECTOR_THRESHOLDS = (100_000, 20, 10)  # while the world runs (see the module docstring)


class SimulationOverrun(RuntimeError):
    """A simulated run went on far longer in virtual time than its test can take."""


def virtual_time_budget(config: TestConfig) -> float:
    """Virtual seconds one call of ``SimBackend.run`` may take: three times what the run's
    phases may (workload, recovery, drain, a last op), plus five minutes for set-up and
    heals that wait out their grace periods."""
    return 3 * (config.time_limit + config.recovery_time + config.drain_timeout + config.op_timeout) + 300.0


class NodeLogs(logging.Handler):
    """Collects each simulated node's log lines, stamped with virtual time, for ``logs/``."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__(logging.INFO)
        self.world = world
        self.lines: dict[str, list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        node = record.name.rsplit(".", 1)[-1]
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        self.lines.setdefault(node, []).append(
            f"{self.world.now():12.6f} {record.levelname:7} {message}")


class SimBackend:
    name = "sim"
    deterministic = True

    def __init__(self, config: TestConfig, spec: ClusterSpec) -> None:
        self.config = config
        # Computation takes virtual time (a CPU per node), as it does on real brokers; the wire
        # codec round trip that unit tests use to catch unsendable messages is left to the
        # real backends, which send every message for real.
        self.world = SimWorld(seed=spec.seed, check_wire=False, cpu=CpuCosts(),
                              torn_writes=config.power_loss_tears)
        self._clock = self.world.loop.clock
        variant = VARIANTS[config.variant]
        configs = [
            BrokerConfig(broker_id=i, log_dirs=LOG_DIRS, variant=variant,
                         zk_session_timeout=config.zk_session_timeout,
                         min_insync_replicas=config.min_insync_replicas,
                         inter_broker_protocol=config.inter_broker_protocol, run_id=config.run_id)
            for i in range(1, spec.brokers + 1)
        ]
        self.cluster = SimCluster(spec, self.world, configs)
        self.faults = SimFaultApplier(self.cluster)
        self._clients: SimClientHost | None = None
        self._logs = NodeLogs(self.world)
        self._logger = logging.getLogger("floodmark.sim")

    def clock_ns(self) -> int:
        # world.now(), read straight from the loop's clock: the recorder asks twice per op.
        return round(self._clock.now * 1e9)

    def remove_leftovers(self) -> list[str]:
        return []  # a simulation leaves nothing outside its process

    def setup(self) -> None:
        # Node logs go to logs/<node>/, not to the terminal the progress line is on.
        self._logger.addHandler(self._logs)
        self._logger.setLevel(logging.INFO)
        self._logger.propagate = False
        self.cluster.setup()

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        thresholds = gc.get_threshold()
        gc.set_threshold(*COLLECTOR_THRESHOLDS)
        try:
            return self._run_within_budget(main)
        finally:
            gc.set_threshold(*thresholds)

    def _run_within_budget(self, main: Coroutine[Any, Any, T]) -> T:
        loop = self.world.loop
        task = loop.create_task(main)
        budget = virtual_time_budget(self.config)
        overran: list[float] = []
        timers: list[asyncio.TimerHandle] = []

        def overrun() -> None:
            overran.append(self.world.now())
            task.cancel()
            # In case what it cleans up on the way out hangs too.
            timers.append(loop.call_later(60.0, loop.stop))

        timers.append(loop.call_later(budget, overrun))
        quiet_about_interrupts(loop)
        try:
            with cancelled_on_interrupt(task):  # Ctrl-C or SIGTERM cancels the run, and then interrupts
                return self.world.run(task)
        except (asyncio.CancelledError, RuntimeError):  # RuntimeError: stopped before it finished
            if not overran:
                raise
            waiting = sorted({t.get_name() for t in asyncio.all_tasks(loop) if not t.done()})
            raise SimulationOverrun(
                f"the simulated run was still going {budget:.0f} virtual seconds in (at {overran[0]:.0f} s), "
                f"far past what its test can take: cancelled; still waiting: {', '.join(waiting[:8]) or 'nothing'}"
            ) from None
        finally:
            for timer in timers:
                timer.cancel()

    def client_host(self) -> SimClientHost:
        if self._clients is None:
            self._clients = SimClientHost(self.world)
        return self._clients

    async def observe(self) -> ClusterView:
        roles = read_snapshot(self.world.zk.read, self.config.topic_partitions, self.config.topic_names)
        brokers = tuple(BrokerSlot(n.name, n.broker_id or 0, n.log_dirs) for n in self.cluster.broker_nodes)
        return ClusterView(self.cluster.zookeeper.name, brokers, roles.partitions,
                           self.config.zk_session_timeout, roles.controller, roles.leaders, roles.replicas,
                           {n.name: n.config.inter_broker_protocol for n in self.cluster.broker_nodes})

    def teardown(self, collect_into: RunDir | None) -> None:
        try:
            if collect_into is not None:
                self._collect(collect_into)
        finally:
            self._logger.removeHandler(self._logs)
            self._logger.propagate = True
            self.cluster.teardown()

    def _collect(self, run_dir: RunDir) -> None:
        run_dir.events.mkdir(parents=True, exist_ok=True)
        for broker in self.cluster.broker_nodes:
            (run_dir.events / f"{broker.name}.jsonl").write_bytes(self.world.event_lines(broker.name))
        for broker in self.cluster.broker_nodes:
            directory = run_dir.node_logs(broker.name)
            directory.mkdir(parents=True, exist_ok=True)
            lines = self._logs.lines.get(broker.name, [])
            (directory / "broker.log").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")

    def force_cleanup(self) -> None:
        self.world.close()
