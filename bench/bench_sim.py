"""Simulator speed: simulated seconds per CPU second of the product's simulated runs.

The ``sim`` backend runs ZooKeeper, the brokers, the network, the disks and the clients in
one process on virtual time, and ``floodmark explore`` runs thousands of seeds on it, so
what a simulated second costs in real CPU decides how much can be explored. The target is
60 simulated seconds of the default queue test (3 brokers, 2 topics of 3 partitions,
replication factor 3, 200 client ops per second over 8 workers: half send with acks=all,
half poll) in at most one CPU second: 60 simulated seconds per CPU second.

By default each shape is a whole ``floodmark run --cluster sim --nemesis none`` as the
product runs it (the runner, the generator, the recorder, ``SimBackend``'s world with the
CPU model and without the wire check), without the checkers and the report, which cost the
same on every backend. The simulated time is the virtual time of the history's last op (the
whole run: set-up, workload, recovery and drain). Shapes are ``BROKERSxPARTITIONS`` (two
topics, so ``3x24`` is 2 topics of 12 partitions); the figures show how the cost scales
with brokers and partitions. Each figure is the median of ``--runs`` runs, printed with the
load average and the calibration anchor (``calibration.machine_speed``), after one short
untimed run that loads what a run imports lazily (once per process, as in ``explore``).

``--instructions`` counts instead of timing: the machine instructions (valgrind's
cachegrind) one simulated second of the default test costs, and what share of them missed
the first-level caches. Time on a shared virtual machine wanders by a tenth from one run to
the next, more than most single changes gain; the count does not (the same code, seed and
``PYTHONHASHSEED`` give the same count to within a few parts in ten thousand), so compare two
versions of the code by it. It runs the test twice under cachegrind, ``--seconds`` and one
second long, and divides the difference by the difference in simulated time, so the
interpreter's start and the imports drop out; about four minutes for 30 seconds. Needs
valgrind.

``--bare`` measures the older miniature instead: the queue workload's workers straight on
the client library and the test fixtures' cluster, without the harness (``--cpu-model``
switches on the simulated CPU there). ``--profile`` prints the hottest functions of one run.
``--layers`` samples the timed runs and prints where their CPU went, by layer of the code
(``bench/layers.py``: the simulator, the protocol under test, the clients, the harness), and
how fast the runs would be if the simulator's own share cost nothing.

    python bench/bench_sim.py [--shapes 3x6,5x6,3x24,5x24] [--seconds 60] [--runs 3] [--seed 1] [--profile] [--layers]
    python bench/bench_sim.py --instructions [--seconds 30] [--seed 1]
    python bench/bench_sim.py --bare [--cpu-model] [--seconds 60] [--runs 3]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import cProfile
import io
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_fixtures import SimCluster  # noqa: E402
from calibration import machine_speed  # noqa: E402
from layers import LayerSamples  # noqa: E402

from floodmark.harness.config import make_config  # noqa: E402
from floodmark.reference.client.accumulator import SendAccumulator  # noqa: E402
from floodmark.reference.client.consumer import Consumer  # noqa: E402
from floodmark.reference.client.producer import Producer  # noqa: E402
from floodmark.reference.sim.cpu import CpuCosts  # noqa: E402
from floodmark.reference.sim.runtime import SimRuntime  # noqa: E402
from floodmark.run.runner import Runner  # noqa: E402

TARGET = 60.0  # simulated seconds per CPU second
DEFAULT_SHAPES = "3x6,5x6,3x24,5x24"

TOPICS = ("t0", "t1")
PARTITIONS = 3
RATE = 200.0  # ops per second over all workers
WORKERS = 8


def build(seed: int, cpu_model: bool) -> SimCluster:
    cluster = SimCluster(seed=seed, nodes=3, cpu=CpuCosts() if cpu_model else None)
    for topic in TOPICS:
        cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3, min_isr=2)
    return cluster


def workload(cluster: SimCluster, seconds: float) -> dict[str, int]:
    """Run the workers for ``seconds`` of virtual time; returns op counts by outcome."""
    client: SimRuntime = cluster.client
    sender = SendAccumulator(Producer(client, cluster.names))
    partitions = [(t, p) for t in TOPICS for p in range(PARTITIONS)]
    counts = {"send ok": 0, "send other": 0, "poll ok": 0, "poll other": 0}
    interval = WORKERS / RATE  # each worker's pace

    async def producer(worker: int) -> None:
        sent = 0
        while True:
            topic, partition = client.random.choice(partitions)
            sent += 1
            result = await sender.send(topic, partition, f"{worker}-{sent}", timeout=5.0)
            counts["send ok" if result.status == "ok" else "send other"] += 1
            await client.sleep(interval)

    async def consumer(worker: int) -> None:
        reader = Consumer(client, cluster.names)
        positions = {tp: 0 for tp in partitions}
        while True:
            tp = client.random.choice(partitions)
            result = await reader.fetch(tp[0], tp[1], positions[tp], timeout=5.0, max_records=100)
            if result.ok:
                positions[tp] = result.next_offset
                counts["poll ok"] += 1
            else:
                counts["poll other"] += 1
            await client.sleep(interval)

    for w in range(WORKERS):
        role = producer if w < WORKERS // 2 else consumer
        client.spawn(role(w), f"worker-{w}")
    cluster.world.run_for(seconds)
    return counts


def measure(seed: int, seconds: float, cpu_model: bool, profile: bool) -> tuple[float, dict[str, int]]:
    cluster = build(seed, cpu_model)
    profiler = cProfile.Profile() if profile else None
    try:
        start = time.process_time()
        if profiler is not None:
            profiler.enable()
        counts = workload(cluster, seconds)
        if profiler is not None:
            profiler.disable()
        spent = time.process_time() - start
        assert cluster.world.failures == [], cluster.world.failures
    finally:
        cluster.close()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return spent, counts


@dataclass(frozen=True)
class ProductRun:
    """One simulated run as the product does it: its CPU time, virtual time and size."""

    cpu: float  # CPU seconds of the whole run, set-up to teardown
    simulated: float  # virtual seconds, to the history's last op
    ops: int  # history entries
    error: str | None

    @property
    def speed(self) -> float:
        return self.simulated / self.cpu


def product_run(brokers: int, partitions: int, seconds: float, seed: int, profile: bool,
                samples: LayerSamples | None = None) -> ProductRun:
    """``floodmark run --cluster sim --nemesis none`` at one shape, without checkers or report;
    ``samples`` counts where its CPU goes."""
    config = make_config({"cluster": "sim", "nemesis": "none", "nodes": brokers, "topics": 2,
                          "partitions": partitions // 2, "time_limit": seconds, "seed": seed})
    with tempfile.TemporaryDirectory(prefix="fm-bench-sim-") as store:
        runner = Runner(config, store, out=io.StringIO(), check=False, report=False)
        profiler = cProfile.Profile() if profile else None
        started = time.process_time()
        if profiler is not None:
            profiler.enable()
        with samples.sampling() if samples is not None else contextlib.nullcontext():
            outcome = runner.run()
        if profiler is not None:
            profiler.disable()
        cpu = time.process_time() - started
        lines = runner.run_dir.history.read_bytes().splitlines()
        simulated = orjson.loads(lines[-1])["time"] / 1e9 if lines else 0.0
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    return ProductRun(cpu, simulated, len(lines), outcome.error)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def shapes(text: str) -> list[tuple[int, int]]:
    pairs = [tuple(int(n) for n in shape.split("x")) for shape in text.split(",") if shape]
    if any(len(p) != 2 or p[1] % 2 for p in pairs):
        raise SystemExit(f"--shapes: BROKERSxPARTITIONS with an even partition count, got {text!r}")
    return [(p[0], p[1]) for p in pairs]


def product(args: argparse.Namespace) -> None:
    # One short untimed run first: the modules a run imports lazily are loaded (and, where
    # bytecode is not cached, compiled) once per process, as in an exploration's workers.
    product_run(3, 6, 1.0, args.seed, profile=False)
    anchor = machine_speed()
    print(f"calibration: machine_speed {anchor:.3f} s (about 0.3 on a quiet 3 GHz core); {load_average()}",
          flush=True)
    default_speed: float | None = None
    for brokers, partitions in shapes(args.shapes):
        runs: list[ProductRun] = []
        samples = LayerSamples() if args.layers else None  # a few hundred signals a second: no cost to speak of
        for n in range(1 if args.profile else args.runs):
            run = product_run(brokers, partitions, args.seconds, args.seed, args.profile, samples)
            runs.append(run)
            print(f"  {brokers} brokers, {partitions} partitions, run {n + 1}: {run.cpu:.2f} CPU s for "
                  f"{run.simulated:.1f} simulated s ({run.ops} history entries{', ' + run.error if run.error else ''})"
                  f" = {run.speed:.1f} simulated s per CPU s; {load_average()}", flush=True)
        speed = statistics.median(r.speed for r in runs)
        cpu = statistics.median(r.cpu for r in runs)
        print(f"{brokers} brokers, {partitions} partitions: median {speed:.1f} simulated s per CPU s "
              f"({cpu:.2f} CPU s per run of {args.seconds:.0f} s workload)", flush=True)
        if samples is not None:
            print_layers(samples, speed)
        if (brokers, partitions) == (3, 6):
            default_speed = speed
    if default_speed is not None:
        verdict = "met" if default_speed >= TARGET else f"not met ({TARGET / default_speed:.1f}x short)"
        print(f"target: {TARGET:.0f} simulated s per CPU s on the default test (3 brokers, 6 partitions): "
              f"{verdict}; anchor ratio {anchor / 0.3:.2f}, so about {default_speed * anchor / 0.3:.1f} "
              f"simulated s per CPU s on a quiet 3 GHz core")
    print(f"calibration after the runs: machine_speed {machine_speed():.3f} s; {load_average()}")


def print_layers(samples: LayerSamples, speed: float) -> None:
    """Say where the sampled runs' CPU went, by layer, and what the rest alone would run at."""
    shares = samples.shares()
    print("  CPU by layer (sampled): " + ", ".join(f"{layer} {share:.0%}" for layer, share in shares.items())
          + f" of {sum(samples.counts.values())} samples", flush=True)
    rest = 1.0 - shares["simulator"]
    if rest > 0:
        print(f"  with a simulator that cost nothing: {speed / rest:.1f} simulated s per CPU s "
              f"(the protocol, clients and harness alone)", flush=True)


def one_run(seconds: float, seed: int) -> None:
    """The child of --instructions: one run of the default test after the untimed one,
    printing its simulated length."""
    product_run(3, 6, 1.0, seed, profile=False)
    run = product_run(3, 6, seconds, seed, profile=False)
    print(f"simulated {run.simulated!r} ops {run.ops}", flush=True)


@dataclass(frozen=True)
class Counted:
    """What cachegrind counted over one whole child process."""

    instructions: int
    i1_misses: int
    d1_misses: int
    simulated: float
    ops: int


def counted(seconds: float, seed: int) -> Counted:
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=/dev/null",
               sys.executable, str(Path(__file__).resolve()), "--one-run", str(seconds), "--seed", str(seed)]
    # A fixed hash seed: the same string hashes, the same dict layouts, the same count.
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    if done.returncode != 0:
        raise SystemExit(f"valgrind failed: {done.stderr.strip()[-500:]}")

    def total(label: str) -> int:
        found = re.search(rf"{label}:\s+([\d,]+)", done.stderr)
        if found is None:
            raise SystemExit(f"cachegrind printed no {label!r} count: {done.stderr.strip()[-500:]}")
        return int(found.group(1).replace(",", ""))

    found = re.search(r"simulated (\S+) ops (\d+)", done.stdout)
    if found is None:
        raise SystemExit(f"the run printed no length: {done.stdout.strip()[-500:]}")
    return Counted(total("I   refs"), total("I1  misses"), total("D1  misses"), float(found.group(1)),
                   int(found.group(2)))


def instructions(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian's valgrind package)")
    print(f"counting under cachegrind: the default test for {args.seconds:.0f} s and for 1 s (seed {args.seed}); "
          f"{load_average()}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        long_run, short_run = pool.map(lambda s: counted(s, args.seed), (args.seconds, 1.0))
    simulated = long_run.simulated - short_run.simulated
    ops = long_run.ops - short_run.ops
    instructions = long_run.instructions - short_run.instructions
    i1 = long_run.i1_misses - short_run.i1_misses
    d1 = long_run.d1_misses - short_run.d1_misses
    print(f"{instructions / simulated / 1e6:.1f} M instructions per simulated second "
          f"({instructions / ops / 1e3:.1f} k per history entry; {simulated:.1f} simulated s, {ops} entries counted); "
          f"first-level cache misses per simulated second: {i1 / simulated / 1e6:.2f} M instruction, "
          f"{d1 / simulated / 1e6:.2f} M data")


def bare(args: argparse.Namespace) -> None:
    figures: list[float] = []
    counts: dict[str, Any] = {}
    for _ in range(1 if args.profile else args.runs):
        spent, counts = measure(args.seed, args.seconds, args.cpu_model, args.profile)
        figures.append(spent)
    ops = sum(counts.values())
    print(f"{args.seconds:.0f} simulated s, {ops} ops {counts}: "
          f"median {statistics.median(figures):.2f} CPU s over {len(figures)} run(s) "
          f"({', '.join(f'{f:.2f}' for f in figures)}); {load_average()}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds of workload")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="BROKERSxPARTITIONS, comma-separated")
    parser.add_argument("--bare", action="store_true", help="the miniature workload without the harness")
    parser.add_argument("--cpu-model", action="store_true", help="(--bare) handling takes virtual time")
    parser.add_argument("--profile", action="store_true", help="print the hottest functions (one run)")
    parser.add_argument("--layers", action="store_true", help="CPU of the timed runs by layer of the code")
    parser.add_argument("--instructions", action="store_true",
                        help="count machine instructions per simulated second (valgrind) instead of timing")
    parser.add_argument("--one-run", type=float, metavar="SECONDS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_run is not None:
        one_run(args.one_run, args.seed)
    elif args.instructions:
        instructions(args)
    elif args.bare:
        bare(args)
    else:
        product(args)


if __name__ == "__main__":
    main()
