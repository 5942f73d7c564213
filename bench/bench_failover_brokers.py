"""Failover with real broker processes: from detection until every new leader has taken over.

``bench_failover.py`` times the controller alone (its brokers answer LeaderAndIsr without
acting on it). This bench runs the whole system: a real ZooKeeper server and three real
``floodmark broker`` processes (each with two log directories on this machine's disk), one
topic whose partitions all have the victim as their preferred leader and the two other
brokers as followers, alternating so that each survivor takes half. Then the victim is
killed with SIGKILL:

* **broker kill**: a broker that is not the controller; the clock starts when the
  controller declares it failed: its registration went (a ``broker_state`` ``Offline``
  node event, one ZooKeeper session timeout after the kill) or its heartbeats stopped
  (``Fenced``, KIP-343), whichever came first. Detection itself is not timed;
* **controller kill**: the controller broker; the clock starts when a successor is elected
  (its ``controller_elected`` event), and covers it re-reading the whole state.

Beside them the bench prints ``machine_speed`` (``calibration.py``) and the load average,
before and after: the path is CPU on two shared cores, so a core half as fast shows
figures about twice as long.

Three figures, all read from the processes' own node events (one machine, one clock):

* **elected**: the controller's last ``leader_elected`` event: every new leader and ISR is
  written to ZooKeeper (in batched multi-ops);
* **led**: the survivors' last ``became_leader`` event: every partition has a broker acting
  as its leader, its new leader epoch durable (the answer to the controller waits for the
  sync). The target (10,000 partitions re-led in under 2 s after detection) is judged on
  this one.

The brokers' log directories go under ``--dir`` (default: ``build/`` in the repository).
Where matters: on this machine creating a file under ``/tmp`` takes about 110 us but under
``/work`` about 8 us, on the same ext4 file system. Becoming leader used to create one
leader epoch checkpoint file per partition; it now appends to one epoch journal per log
directory, synced once per chunk of partitions (``reference/log/epoch_journal.py``), and the
per-partition files are rewritten later, off the path, so ``--dir /tmp/...`` shows what a
slow directory still costs.

    python bench/bench_failover_brokers.py [--runs 3] [--sizes 100,1000,10000]
                                           [--kill broker|controller|both] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))

from calibration import machine_speed  # noqa: E402
from reference_processes import ProcessCluster, skip_reason  # noqa: E402

TARGET_SECONDS = 2.0
TOPIC = "big"


class EventTail:
    """Reads a node's events file incrementally (it grows while we watch)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


@dataclass(frozen=True)
class Result:
    elected: float  # seconds from detection to the last leader written
    led: float  # seconds from detection to the last new leader acting


def wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        time.sleep(0.1)


def run_once(partitions: int, kill: str, parent: Path) -> Result:
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="floodmark-failover-", dir=parent) as root, \
            ProcessCluster(Path(root), brokers=3) as cluster:
        tails = {b: EventTail(Path(root) / "events" / f"n{b}.jsonl") for b in (1, 2, 3)}
        controller = cluster.controller()
        victim = controller if kill == "controller" else next(b for b in (1, 2, 3) if b != controller)
        rest = [b for b in (1, 2, 3) if b != victim]
        assignment = {p: [victim, rest[p % 2], rest[1 - p % 2]] for p in range(partitions)}
        cluster.admin_call(lambda admin: admin.create_topic(TOPIC, partitions, 3, assignment=assignment))
        # Set up: every replica has acted on its role (and the event files stop growing).
        roles = {b: 0 for b in (1, 2, 3)}

        def set_up() -> bool:
            for b, tail in tails.items():
                roles[b] += sum(1 for e in tail.read() if e.get("topic") == TOPIC
                                and e["kind"] in ("became_leader", "became_follower"))
            return all(n >= partitions for n in roles.values())
        wait(set_up, 120.0 + partitions / 50, f"{partitions} partitions set up on every broker")
        time.sleep(1.0)
        for tail in tails.values():
            tail.read()
        cluster.kill(victim)
        detected: float | None = None
        elected: list[float] = []
        led: dict[int, float] = {}

        def failed_over() -> bool:
            nonlocal detected
            for b in rest:
                for e in tails[b].read():
                    kind = e["kind"]
                    if (kind == "broker_state" and e.get("state") in ("Offline", "Fenced")
                            and e.get("broker") == victim) or (kind == "controller_elected" and kill == "controller"):
                        detected = e["wall"] if detected is None else min(detected, e["wall"])
                    elif kind == "leader_elected" and e.get("topic") == TOPIC:
                        elected.append(e["wall"])
                    elif kind == "became_leader" and e.get("topic") == TOPIC:
                        led[e["partition"]] = e["wall"]
            return detected is not None and len(led) == partitions
        try:
            wait(failed_over, 60.0 + partitions / 100, "every partition to be re-led")
        except TimeoutError as error:
            kept = tempfile.mkdtemp(prefix="floodmark-failover-events-")
            shutil.copytree(Path(root) / "events", kept, dirs_exist_ok=True)
            for b in (1, 2, 3):
                shutil.copy(Path(root) / f"n{b}.log", kept)
            raise TimeoutError(f"{error}: detected={detected} leaders elected={len(elected)}"
                               f" re-led={len(led)}; events and logs kept in {kept}") from None
        assert detected is not None
        state = cluster.state(TOPIC, partitions - 1)
        assert state is not None and state.leader in rest, state
        return Result(max(elected) - detected, max(led.values()) - detected)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--kill", choices=("broker", "controller", "both"), default="both")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parents[1] / "build",
                        help="where the brokers' log directories go (a temporary directory in it)")
    args = parser.parse_args()
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # a dying session's reconnect noise
    why = skip_reason()
    if why:
        print(f"skipped: {why}")
        return 1
    kills = ("broker", "controller") if args.kill == "both" else (args.kill,)
    print(f"log directories under {args.dir}; machine_speed {machine_speed():.2f} CPU s (about 0.3 on a quiet"
          f" 3 GHz core); load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'kill':<11}{'partitions':>11}{'elected s':>11}{'led s':>9}   runs: elected/led s")
    for kill in kills:
        for partitions in (int(s) for s in args.sizes.split(",")):
            results = [run_once(partitions, kill, args.dir) for _ in range(args.runs)]
            elected = statistics.median(r.elected for r in results)
            led = statistics.median(r.led for r in results)
            mark = "" if partitions < 10_000 else (
                f"  target led < {TARGET_SECONDS:g} s: {'met' if led < TARGET_SECONDS else 'MISSED'}")
            runs_text = " ".join(f"{r.elected:.2f}/{r.led:.2f}" for r in results)
            print(f"{kill:<11}{partitions:>11}{elected:>11.3f}{led:>9.3f}   {runs_text}{mark}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}, machine_speed {machine_speed():.2f} CPU s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
