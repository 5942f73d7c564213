"""Failover time: how long the controller takes to re-lead every partition after a failure.

Two failures, as in the V3 design's failover estimate:

* **broker kill**: the broker leading every partition dies; the clock starts when the
  controller starts handling the broker change (the failure is *detected*);
* **controller kill**: the controller broker dies; the clock starts when the successor wins
  the election, and covers re-reading the whole state, sending every broker its state and
  electing new leaders for the dead broker's partitions.

Two figures per failure:

* **written**: until every new leader and ISR is written to ZooKeeper and the LeaderAndIsr
  requests are queued (the controller's event handler returns);
* **acked**: until every LeaderAndIsr request sent since detection has been answered by its
  broker (the brokers know their new roles). The issue's target, 10,000 partitions re-led
  in under 2 seconds after detection, is judged on this one.

Each is run for 100, 1,000 and 10,000 partitions with the leader changes written in batched
multi-ops (the default, ``ops_per_multi`` per transaction) and one write per partition.

``--zookeeper sim`` runs on the deterministic simulated world: virtual time is meaningless
for CPU cost, so the figures are the CPU time this process spent (the simulated ZooKeeper's,
network's and stub brokers' work included). ``--zookeeper real`` runs the controllers over
the real runtime against a real ZooKeeper server started for the purpose; the brokers are
ZooKeeper registrations plus small TCP endpoints that decode each request and answer it,
served by a separate process (as real brokers are), so every multi-op and every request is
a real round trip. Prints the median of ``--runs`` runs.

    python bench/bench_failover.py [--zookeeper sim|real|both] [--runs 3] [--sizes 100,1000,10000]
                                   [--kill broker|controller|both] [--real-unbatched-limit 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))

from floodmark.reference.controller import brokers as controller_brokers  # noqa: E402
from floodmark.reference.controller.channel import ControllerChannel  # noqa: E402
from floodmark.reference.controller.controller import Controller, ControllerConfig  # noqa: E402
from floodmark.reference.protocol import messages as m  # noqa: E402
from floodmark.reference.protocol import zk_layout as zk  # noqa: E402

TARGET_SECONDS = 2.0
V3_ESTIMATE_SECONDS = 40.0  # the V3 design's estimate for 10,000 partitions written one by one


class Stopwatch:
    """Times the controller's handling of one failure, by wrapping its handlers and channels."""

    def __init__(self) -> None:
        self.armed = False  # waiting for the handler to start
        self.started: tuple[float, float] | None = None  # (wall, CPU of this process)
        self.written: tuple[float, float] | None = None  # seconds after the start
        self.acked: tuple[float, float] | None = None
        self.sent = 0  # LeaderAndIsr requests sent since the start
        self.answered = 0
        self._saved: list[tuple[Any, str, Any]] = []

    @staticmethod
    def now() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def since_start(self) -> tuple[float, float]:
        assert self.started is not None
        wall, cpu = self.now()
        return wall - self.started[0], cpu - self.started[1]

    @property
    def done(self) -> bool:
        return self.acked is not None

    def wrap(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)
        watch = self

        async def timed(*args: Any, **kwargs: Any) -> Any:
            if not watch.armed:
                return await original(*args, **kwargs)
            watch.armed = False
            watch.started = watch.now()
            try:
                return await original(*args, **kwargs)
            finally:
                watch.written = watch.since_start()
                watch._check_acked()
        self._saved.append((owner, name, original))
        setattr(owner, name, timed)

    def watch_channel(self, channel: ControllerChannel) -> None:
        """Count the LeaderAndIsr requests ``channel`` sends and the answers it gets."""
        send, on_response = channel.send, channel.on_response
        watch = self

        def counted_send(broker_id: int, request: Any) -> None:
            if watch.started is not None and watch.acked is None and isinstance(request, m.LeaderAndIsrRequest):
                watch.sent += 1
            send(broker_id, request)

        def counted_response(broker: int, request: Any, response: Any) -> None:
            if watch.started is not None and watch.acked is None and isinstance(request, m.LeaderAndIsrRequest):
                watch.answered += 1
                watch._check_acked()
            on_response(broker, request, response)

        channel.send = counted_send  # type: ignore[method-assign]
        channel.on_response = counted_response

    def _check_acked(self) -> None:
        if self.written is not None and self.acked is None and self.answered >= self.sent:
            self.acked = self.since_start()

    def result(self, transactions: int) -> Result:
        assert self.written is not None and self.acked is not None
        return Result(*self.written, *self.acked, transactions)

    def restore(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()


@dataclass(frozen=True)
class Result:
    written_wall: float
    written_cpu: float
    acked_wall: float
    acked_cpu: float
    transactions: int


# ----------------------------------------------------------------------------- simulated ZooKeeper


def run_sim(partitions: int, batched: bool, kill: str, seed: int) -> Result:
    from controller_fixtures import StubCluster

    from floodmark.reference.sim import SimWorld

    world = SimWorld(seed=seed, check_wire=False)
    watch = Stopwatch()
    try:
        cluster = StubCluster(world, 4, ControllerConfig(heartbeat_timeout=None, batched_writes=batched))
        cluster.start()
        controller_id = cluster.controller_id()
        others = [b for b in sorted(cluster.brokers) if b != controller_id]
        # The broker to kill leads every partition; for a controller kill that is the controller.
        victim = controller_id if kill == "controller" else others[0]
        rest = [b for b in sorted(cluster.brokers) if b != victim][:2]
        cluster.create_topic("big", {p: (victim, *rest) for p in range(partitions)})
        world.run_for(2.0)
        if kill == "broker":
            watch.wrap(controller_brokers, "on_broker_failure")
        else:
            watch.wrap(Controller, "_on_become_controller")
        for b, c in cluster.brokers.items():
            if c.controller and b != victim:
                watch.watch_channel(c.controller.channel)
        before = {b: c.controller.zkw.transactions for b, c in cluster.brokers.items() if c.controller}
        watch.armed = True
        cluster.crash(victim)
        assert world.run_until(lambda: watch.done, 120.0, step=0.1), "failover did not happen"
        world.run_for(0.5)
        transactions = max(c.controller.zkw.transactions - before[b]
                           for b, c in cluster.brokers.items() if c.controller and b != victim)
        check = cluster.state("big", partitions - 1)
        assert check.leader == rest[0], check
        return watch.result(transactions)
    finally:
        watch.restore()
        world.close()


# ----------------------------------------------------------------------------- real ZooKeeper


async def _serve_stubs(ports: list[int]) -> None:
    """The brokers' side: decode every request (as a broker must) and answer it."""
    from floodmark.reference.real.runtime import NoStorage, RealRuntime

    async def handle(sender: str, request: Any) -> Any:
        if isinstance(request, m.LeaderAndIsrRequest):
            return m.LeaderAndIsrResponse(None)
        if isinstance(request, m.StopReplicaRequest):
            return m.StopReplicaResponse(None)
        if isinstance(request, m.UpdateMetadataRequest):
            return m.UpdateMetadataResponse(None)
        return m.ErrorResponse(m.Errors.INVALID_REQUEST)

    for port in ports:
        address = f"127.0.0.1:{port}"
        await RealRuntime(f"stub{port}", address, address, None, None, NoStorage(), port).network.serve(handle)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent goes


def start_stubs(ports: list[int]) -> list[subprocess.Popen[str]]:
    """One process per broker, as real brokers decode their requests in parallel."""
    processes: list[subprocess.Popen[str]] = []
    try:
        for port in ports:
            processes.append(start_stub(port))
    except BaseException:
        for process in processes:
            stop_stub(process)
        raise
    return processes


def start_stub(port: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-stubs", str(port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        stop_stub(process)
        raise RuntimeError(f"the stub broker on port {port} did not start")
    return process


def stop_stub(process: subprocess.Popen[str]) -> None:
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout} s for {what}")
        await asyncio.sleep(0.01)


async def _delete_topic(admin: Any, partitions: int) -> None:
    """Remove the topic's nodes in batched multi-ops (deepest first), for the next run."""
    from floodmark.reference.runtime import DeleteOp

    levels = [[DeleteOp(zk.partition_state_path("big", p)) for p in range(partitions)],
              [DeleteOp(zk.partition_path("big", p)) for p in range(partitions)],
              [DeleteOp(zk.partitions_path("big")), DeleteOp(zk.topic_path("big"))]]
    for ops in levels:
        await asyncio.gather(*(admin.multi(ops[i:i + 1000]) for i in range(0, len(ops), 1000)))


async def run_real_async(zk_address: str, partitions: int, batched: bool, kill: str) -> Result:
    from zookeeper_server import free_port

    from floodmark.reference.real.runtime import NoStorage, RealRuntime

    config = ControllerConfig(heartbeat_timeout=None, batched_writes=batched)
    runtimes: dict[int, Any] = {}
    sessions: dict[int, Any] = {}
    controllers: dict[int, Controller] = {}
    watch = Stopwatch()
    ports = {broker: free_port() for broker in (1, 2, 3, 4)}
    stubs = start_stubs(list(ports.values()))
    try:
        for broker, port in ports.items():
            rt = RealRuntime(f"b{broker}", f"127.0.0.1:{port}", None, zk_address, None, NoStorage(), broker)
            runtimes[broker] = rt
            sessions[broker] = await rt.coordination(10.0)
            await sessions[broker].ensure_path(zk.BROKER_IDS)
            await sessions[broker].create(zk.broker_path(broker), zk.encode_broker(rt.advertised_address),
                                          ephemeral=True)
        # Broker 1 is controller first (it starts alone), broker 2 its successor.
        for broker in (1, 2):
            controllers[broker] = Controller(runtimes[broker], broker, sessions[broker], config)
            await controllers[broker].start()
            if broker == 1:
                await _until(lambda: controllers[1].is_active, 30.0, "broker 1 to become controller")
        victim = 1 if kill == "controller" else 3
        rest = [b for b in (2, 3, 4) if b != victim][:2]
        assignment = zk.TopicAssignment("big", {p: (victim, *rest) for p in range(partitions)})
        admin = sessions[4]
        await admin.create(zk.topic_path("big"), zk.encode_topic(assignment), makepath=True)
        state = zk.partition_state_path("big", partitions - 1)
        deadline = time.monotonic() + 300.0
        while await admin.exists(state) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic with {partitions} partitions not created in 300 s")
            await asyncio.sleep(0.05)
        await _until(lambda: all(c.channel.pending() == 0 for c in controllers.values()), 60.0,
                     "the topic's LeaderAndIsr requests to be delivered")
        await asyncio.sleep(1.0)
        if kill == "broker":
            watch.wrap(controller_brokers, "on_broker_failure")
        else:
            watch.wrap(Controller, "_on_become_controller")
        for b, c in controllers.items():
            if b != victim:
                watch.watch_channel(c.channel)
        before = {b: c.zkw.transactions for b, c in controllers.items()}
        watch.armed = True
        # A kill: the victim's session ends (its ephemeral nodes vanish at once).
        if kill == "controller":
            await controllers[1].stop()
            controllers.pop(1)
        await sessions[victim].close()
        await _until(lambda: watch.done, 120.0, "the failover")
        data, _ = await admin.get(state)
        assert zk.decode_leader_isr("big", partitions - 1, data, 0).leader == rest[0]
        transactions = max(c.zkw.transactions - before[b] for b, c in controllers.items())
        await _delete_topic(admin, partitions)
        return watch.result(transactions)
    finally:
        watch.restore()
        for c in controllers.values():
            await c.stop()
        for rt in runtimes.values():
            await rt.close()
        for stub in stubs:
            stop_stub(stub)


Run = Callable[[int, bool, str, int], Result]


def run_real(zk_address: str) -> Run:
    def run(partitions: int, batched: bool, kill: str, seed: int) -> Result:
        return asyncio.run(run_real_async(zk_address, partitions, batched, kill))
    return run


# ----------------------------------------------------------------------------- main


def measure(label: str, run: Run, sizes: list[int], runs: int, *, judge_by_cpu: bool,
            unbatched_limit: int | None = None, kills: tuple[str, ...] = ("broker", "controller")) -> None:
    """Print medians of wall and CPU seconds; the target is judged on the *acked* figure.

    One-write-per-partition runs above ``unbatched_limit`` partitions are not run (against a
    real ZooKeeper they take minutes); their time is extrapolated linearly from the largest
    size that was run, next to the V3 design's estimate.
    """
    print(f"\n== {label} ==")
    print(f"{'kill':<11}{'partitions':>11}{'writes':>10}{'written':>9}{'(cpu)':>8}{'acked':>9}{'(cpu)':>8}"
          f"{'multi-ops':>11}   runs: written/acked wall s")
    for kill in kills:
        per_partition: tuple[int, float] | None = None  # (partitions, seconds per partition) unbatched
        for partitions in sizes:
            for batched in (True, False):
                if not batched and unbatched_limit is not None and partitions > unbatched_limit:
                    basis = (f"~{per_partition[1] * partitions:.1f} s extrapolated from {per_partition[0]}"
                             if per_partition else "no smaller size run to extrapolate from")
                    print(f"{kill:<11}{partitions:>11}{'one each':>10}   not run: {basis}"
                          f" (V3 design estimate: {V3_ESTIMATE_SECONDS * partitions / 10_000:g} s)", flush=True)
                    continue
                results = [run(partitions, batched, kill, i + 1) for i in range(runs)]
                written = statistics.median(r.written_wall for r in results)
                written_cpu = statistics.median(r.written_cpu for r in results)
                acked = statistics.median(r.acked_wall for r in results)
                acked_cpu = statistics.median(r.acked_cpu for r in results)
                judged = acked_cpu if judge_by_cpu else acked
                mark = "" if not batched or partitions < 10_000 else (
                    f"  target acked < {TARGET_SECONDS:g} s: {'met' if judged < TARGET_SECONDS else 'MISSED'}")
                runs_text = " ".join(f"{r.written_wall:.2f}/{r.acked_wall:.2f}" for r in results)
                if not batched:
                    per_partition = (partitions, acked / partitions)
                print(f"{kill:<11}{partitions:>11}{'batched' if batched else 'one each':>10}{written:>9.3f}"
                      f"{written_cpu:>8.2f}{acked:>9.3f}{acked_cpu:>8.2f}{results[-1].transactions:>11}"
                      f"   {runs_text}{mark}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zookeeper", choices=("sim", "real", "both"), default="both")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--kill", choices=("broker", "controller", "both"), default="both")
    parser.add_argument("--real-unbatched-limit", type=int, default=1000,
                        help="largest partition count written one by one against a real ZooKeeper")
    parser.add_argument("--serve-stubs", help=argparse.SUPPRESS)  # internal: the stub brokers' process
    args = parser.parse_args()
    if args.serve_stubs:
        asyncio.run(_serve_stubs([int(p) for p in args.serve_stubs.split(",")]))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    kills = ("broker", "controller") if args.kill == "both" else (args.kill,)
    if args.zookeeper in ("sim", "both"):
        measure("simulated ZooKeeper: judged on CPU seconds of this process (virtual time costs nothing)",
                run_sim, sizes, args.runs, judge_by_cpu=True, kills=kills)
    if args.zookeeper in ("real", "both"):
        from zookeeper_server import ZooKeeperServer, missing_requirements
        why = missing_requirements()
        if why:
            print(f"\nreal ZooKeeper skipped: {why}")
            return 0 if args.zookeeper == "both" else 1
        with ZooKeeperServer() as server:
            measure(f"real ZooKeeper at {server.address}: judged on wall-clock time (real round trips)",
                    run_real(server.address), sizes, args.runs, judge_by_cpu=False,
                    unbatched_limit=args.real_unbatched_limit, kills=kills)
    return 0


if __name__ == "__main__":
    sys.exit(main())
