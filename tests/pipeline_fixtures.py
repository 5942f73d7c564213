"""Generated run directories for pipeline tests: realistic shapes, known contents.

``make_run`` writes a queue-workload run (producers, consumers, a nemesis interval, node
events, results.json with whatever anomalies the caller plants) into a store. Everything comes
from the seed, so tests can recompute expected aggregates independently of Spark.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from floodmark.history import HistoryWriter, Op
from floodmark.node_events import NodeEventWriter
from floodmark.results import Anomaly, CheckerResult, build_results, write_results

SECOND = 1_000_000_000


@dataclass
class GeneratedRun:
    path: Path
    ops: list[Op]
    config: dict[str, Any]
    anomalies: list[Anomaly] = field(default_factory=list)


def make_run(
    store: Path,
    *,
    test: str = "queue",
    seed: int = 1,
    variant: str = "default",
    nemesis: tuple[str, ...] = ("partition",),
    sends: int = 40,
    lost_offsets: tuple[int, ...] = (),
    stamp: str | None = None,
    code_version: str = "abc123",
) -> GeneratedRun:
    """A run whose sends go to t0/0 and t0/1; ``lost_offsets`` plants lost-write anomalies."""
    rng = random.Random(seed)
    run_dir = store / test / f"{stamp or f'20261121T1000{seed % 60:02d}'}-s{seed}"
    (run_dir / "events").mkdir(parents=True)
    (run_dir / "logs").mkdir()
    config = {"name": test, "seed": seed, "variant": variant, "nemesis": list(nemesis),
              "workload": "queue", "cluster": "local", "acks": "all", "min_insync_replicas": 2,
              "replication_factor": 3, "code_version": code_version}
    (run_dir / "test.yaml").write_text(yaml.safe_dump(config))

    time = 0
    offsets = {0: 0, 1: 0}
    acked: dict[int, list[tuple[int, str]]] = {0: [], 1: []}
    with HistoryWriter(run_dir / "history.jsonl") as history:
        for i in range(sends):
            if i == sends // 3:
                history.append(time, "info", "nemesis", "start-partition", {"shape": "halves"})
            if i == 2 * sends // 3:
                history.append(time, "info", "nemesis", "stop-partition", {"healed": True})
            process = i % 3
            partition = rng.randrange(2)
            value = f"{process}-{i}"
            invoke = {"topic": "t0", "partition": partition, "value": value}
            history.append(time, "invoke", process, "send", invoke)
            time += rng.randrange(1, 20) * 1_000_000
            history.append(time, "ok", process, "send", {**invoke, "offset": offsets[partition]})
            acked[partition].append((offsets[partition], value))
            offsets[partition] += 1
            time += rng.randrange(1, 5) * 1_000_000
            if i == sends // 2:
                time += 3 * SECOND  # an unavailability window while the partition is cut
        drain_value = [{"topic": "t0", "partition": p, "offset": 0,
                        "records": [[o, v] for o, v in acked[p] if not (p == 0 and o in lost_offsets)],
                        "high_watermark": offsets[p]} for p in (0, 1)]
        history.append(time, "invoke", 9, "drain", [{"topic": "t0", "partition": p, "offset": 0} for p in (0, 1)])
        time += 5_000_000
        history.append(time, "ok", 9, "drain", drain_value)
        ops_path = run_dir / "history.jsonl"
    ops = [Op(**{k: d.get(k) for k in ("index", "time", "type", "process", "f", "value", "node", "error")})
           for d in map(json.loads, ops_path.read_text().splitlines())]

    for node in ("n1", "n2"):
        writer = NodeEventWriter(run_dir / "events" / f"{node}.jsonl", node)
        writer.write(1000.0, "became_leader" if node == "n1" else "became_follower",
                     {"topic": "t0", "partition": 0, "leader_epoch": 1, "isr": [1, 2], "leader": 1})
        writer.write(1001.0, "hw_changed", {"topic": "t0", "partition": 0, "leader_epoch": 1,
                                            "previous": 0, "high_watermark": offsets[0]})
        writer.close()

    send_ok = {op.value["offset"]: op.index for op in ops
               if op.f == "send" and op.type == "ok" and op.value["partition"] == 0}
    anomalies = [Anomaly("lost-write", f"acknowledged at offset {o}, missing from the final drain",
                         topic="t0", partition=0, offsets=(o,), ops=(send_ok[o],))
                 for o in lost_offsets]
    results = build_results({"durability": CheckerResult(not anomalies, anomalies)},
                            seed=seed, config=config, variant=variant)
    write_results(run_dir / "results.json", results)
    return GeneratedRun(run_dir, ops, config, anomalies)


def write_synthetic_run(store: Path, name: str, run: Any, seed: int) -> Path:
    """Write a floodmark.checkers.synthetic run as a run directory (no results.json)."""
    from floodmark.history import write_history

    run_dir = store / name / f"20261121T120000-s{seed}"
    (run_dir / "events").mkdir(parents=True)
    (run_dir / "logs").mkdir()
    write_history(run_dir / "history.jsonl", run.history)
    for node, events in run.events.items():
        with open(run_dir / "events" / f"{node}.jsonl", "w") as f:
            for e in events:
                f.write(json.dumps(e.to_dict()) + "\n")
    config = {"name": name, "seed": seed, "workload": "queue", "variant": "default",
              "acks": "all", "min_insync_replicas": 2, "replication_factor": 3, **run.config}
    (run_dir / "test.yaml").write_text(yaml.safe_dump(config))
    return run_dir
