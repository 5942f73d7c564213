"""Client isolation: how much throughput a paused broker leaves to the partitions it does not lead.

A paused broker should stall only the ops routed to it (issue #12: clients isolated like
Jepsen's). This bench runs the default queue test on a real cluster with one fault: a broker
that leads some partitions is paused (SIGSTOP) for a while *shorter* than its ZooKeeper session
(30 s here) and than its controller heartbeat timeout (10 s), so no leadership moves and
the partitions it leads simply stop answering. It then
reads the history and the node events and prints, for the partitions led by the *other*
brokers, the completed client ops per second (ok sends, and ok poll entries, per partition)
while the broker was paused, as a share of the same figure over the same length of time just
before the pause. Target: at least 50%.

Why the share falls: every worker issues one op at a time on a partition it draws at random, and
an op on a paused leader holds its worker until the op times out (``op_timeout``), so within a
few ops every worker may be waiting on the paused broker.

    python bench/bench_isolation.py [--runs 3] [--backend local] [--concurrency 8] [--rate 200]

Needs root (local backend) or a Docker engine (docker). Prints each run, the median, the load.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
from pathlib import Path

from floodmark.contracts.history import read_history
from floodmark.contracts.node_events import BecameLeader, read_events_dir
from floodmark.harness.config import make_config
from floodmark.harness.schedule import Fault, Schedule
from floodmark.run.runner import Runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration import machine_speed  # noqa: E402

TARGET = 0.5
# Seconds into the workload, and how long: shorter than the 30 s session and than the 10 s a
# controller waits for a broker's heartbeat before fencing it, so no leadership moves.
PAUSE_AT, PAUSE_FOR = 15.0, 8.0


def leaders_at_pause(run_dir: Path, paused: str) -> dict[tuple[str, int], int]:
    """Each partition's leader when ``paused`` stopped: the highest epoch any broker became
    leader in by then. The moment is the paused broker's last event before its longest
    silence (it writes nothing while stopped; no clock faults here, so walls compare)."""
    events = read_events_dir(run_dir / "events")
    own = [e.wall for e in events[paused]]
    gaps = [(b - a, a) for a, b in zip(own, own[1:], strict=False)]
    stopped_at = max(gaps)[1] if gaps else float("inf")
    best: dict[tuple[str, int], tuple[int, int]] = {}
    for node, node_events in events.items():
        for event in node_events:
            body = event.body
            if isinstance(body, BecameLeader) and event.wall <= stopped_at:
                key = (body.topic, body.partition)
                if key not in best or body.leader_epoch > best[key][0]:
                    best[key] = (body.leader_epoch, int(node.lstrip("n")))
    return {key: broker for key, (_, broker) in best.items()}


def one_run(backend: str, concurrency: int, rate: float, seed: int, store: Path) -> float:
    config = make_config({"cluster": backend, "seed": seed, "nemesis": "pause", "time_limit": 40.0,
                          "zk_session_timeout": 30.0, "concurrency": concurrency, "rate": rate})
    schedule = Schedule((Fault(0, "pause", "leader-short", PAUSE_AT, PAUSE_FOR, seed),), time_limit=40.0)
    runner = Runner(config, store, schedule=schedule, out=io.StringIO(), report=False, check=False)
    outcome = runner.run()
    if outcome.error:
        raise SystemExit(f"run failed: {outcome.error}")
    path = runner.run_dir.path
    ops = read_history(path / "history.jsonl")
    start = next(op for op in ops if op.f == "start-pause" and op.type == "ok")
    stop = next(op for op in ops if op.f == "stop-pause" and op.type == "ok")
    paused = int(str(start.value["node"]).lstrip("n"))
    leaders = leaders_at_pause(path, str(start.value["node"]))
    window = (stop.time - start.time)

    def served(since: int, until: int) -> int:
        count = 0
        for op in ops:
            if op.type != "ok" or not since <= op.time < until:
                continue
            entries = [op.value] if op.f == "send" else op.value if op.f == "poll" else []
            count += sum(1 for e in entries if leaders.get((e["topic"], e["partition"])) not in (None, paused))
        return count

    during, before = served(start.time, stop.time), served(start.time - window, start.time)
    share = during / before if before else float("nan")
    print(f"  seed {seed}: paused n{paused} (leads {sorted(k for k, v in leaders.items() if v == paused)}) "
          f"for {window / 1e9:.1f} s; ops on the other partitions: {before} before, {during} during "
          f"= {share:.0%}; load {os.getloadavg()[0]:.1f}", flush=True)
    return share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", default="local", choices=("local", "docker"))
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args()
    print(f"calibration: machine_speed {machine_speed():.3f} s; load {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as store:
        shares = [one_run(args.backend, args.concurrency, args.rate, seed, Path(store))
                  for seed in range(1, args.runs + 1)]
    median = statistics.median(shares)
    print(f"{args.backend}, {args.concurrency} workers at {args.rate:g} ops/s: median {median:.0%} of unfaulted "
          f"throughput on the partitions the paused broker does not lead "
          f"(target {TARGET:.0%}: {'met' if median >= TARGET else 'not met'})")


if __name__ == "__main__":
    main()
