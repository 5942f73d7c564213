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
from floodmark.node_events import BecameFollower, BecameLeader, HwChanged, NodeEventWriter
from floodmark.results import Anomaly, CheckerResult, build_results, write_results
from floodmark.run_config import TestConfig

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
        writer.write(1000.0, BecameLeader(topic="t0", partition=0, leader_epoch=1, isr=(1, 2), log_end=0,
                                          high_watermark=0) if node == "n1" else
                     BecameFollower(topic="t0", partition=0, leader_epoch=1, leader=1, log_end=0))
        writer.write(1001.0, HwChanged(topic="t0", partition=0, leader_epoch=1, role="leader" if node == "n1" else
                                       "follower", previous=0, high_watermark=offsets[0], log_end=offsets[0]))
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
    config = run.config.replace(name=name) if run.config else TestConfig(name=name, seed=seed)
    (run_dir / "test.yaml").write_text(yaml.safe_dump(config.to_dict()))
    return run_dir


def write_large_queue_run(store: Path, name: str, seed: int, *, entries: int, partitions: int = 8,
                          processes: int = 16, replicate_every: int = 32) -> Path:
    """Stream a correct queue-workload run of about ``entries`` history entries to disk.

    The same shapes as floodmark.checkers.synthetic.queue_run (sends, polls, assigns, a
    nemesis interval, leader changes, a final drain per partition), but written as it is
    simulated, so 10^7 entries need memory only for the partitions' logs. Followers replicate
    in batches of ``replicate_every`` records, as fetches do, which keeps node events to
    about one per client op.
    """
    import orjson

    rng = random.Random(seed)
    run_dir = store / name / f"20261121T120000-s{seed}"
    (run_dir / "events").mkdir(parents=True)
    (run_dir / "logs").mkdir()
    nodes = ["n1", "n2", "n3"]
    broker_ids = [1, 2, 3]

    def broker_id(node: str) -> int:
        return int(node[1:])

    keys = [("t0", p) for p in range(partitions)]
    logs: dict[tuple[str, int], list[str]] = {k: [] for k in keys}
    leader = {k: nodes[i % len(nodes)] for i, k in enumerate(keys)}
    epoch = dict.fromkeys(keys, 0)
    replicated = dict.fromkeys(keys, 0)
    event_files = {n: open(run_dir / "events" / f"{n}.jsonl", "wb") for n in nodes}  # noqa: SIM115
    seqs = dict.fromkeys(nodes, 0)
    clock = {"time": 0, "index": 0}
    history = open(run_dir / "history.jsonl", "wb")  # noqa: SIM115

    def op(type_: str, process: Any, f: str, value: Any) -> None:
        clock["time"] += 1_000_000
        history.write(orjson.dumps({"index": clock["index"], "time": clock["time"], "type": type_,
                                    "process": process, "f": f, "value": value}) + b"\n")
        clock["index"] += 1

    def event(node: str, kind: str, **fields: Any) -> None:
        event_files[node].write(orjson.dumps({"node": node, "seq": seqs[node], "wall": clock["time"] / 1e9,
                                              "kind": kind, **fields}) + b"\n")
        seqs[node] += 1

    def replicate(key: tuple[str, int]) -> None:
        start, end = replicated[key], len(logs[key])
        if start == end:
            return
        for node in nodes:
            if node != leader[key]:
                event(node, "appended", topic=key[0], partition=key[1], offset=start, epoch=epoch[key],
                      values=logs[key][start:end], role="follower")
                event(node, "hw_changed", topic=key[0], partition=key[1], leader_epoch=epoch[key],
                      role="follower", previous=start, high_watermark=end, log_end=end)
        event(leader[key], "hw_changed", topic=key[0], partition=key[1], leader_epoch=epoch[key], role="leader",
              previous=start, high_watermark=end, log_end=end)
        replicated[key] = end

    def elect(key: tuple[str, int], node: str) -> None:
        replicate(key)
        epoch[key] += 1
        leader[key] = node
        # Events name brokers by id, as the reference does (node "n<id>").
        event("n1", "leader_elected", topic=key[0], partition=key[1], leader=broker_id(node), leader_epoch=epoch[key],
              isr=broker_ids, controller_epoch=1, zk_version=epoch[key], unclean=False)
        end = len(logs[key])
        event(node, "became_leader", topic=key[0], partition=key[1], leader_epoch=epoch[key], isr=broker_ids,
              log_end=end, high_watermark=end)
        for other in nodes:
            if other != node:
                event(other, "became_follower", topic=key[0], partition=key[1], leader_epoch=epoch[key],
                      leader=broker_id(node), log_end=end)

    event("n1", "controller_elected", controller_epoch=1, broker=1)
    for key in keys:
        elect(key, leader[key])
    process_of = list(range(processes))
    next_process = processes
    in_flight: list[tuple[str, Any, Any] | None] = [None] * processes
    positions: list[dict[tuple[str, int], int]] = [{} for _ in range(processes)]
    sent = 0
    drain_entries = 2 * partitions + 2
    op("invoke", "nemesis", "start-partition", {"targets": [nodes[-1]]})
    nemesis_open = True
    while clock["index"] < entries - drain_entries - processes:
        if nemesis_open and clock["index"] > entries // 2:
            op("info", "nemesis", "stop-partition", {"targets": [nodes[-1]]})
            nemesis_open = False
        w = rng.randrange(processes)
        pending = in_flight[w]
        if pending is None:
            roll = rng.random()
            if roll < 0.55:
                key = rng.choice(keys)
                value = {"topic": key[0], "partition": key[1], "value": f"{w}-{sent}"}
                sent += 1
                op("invoke", process_of[w], "send", value)
                in_flight[w] = ("send", value, key)
            elif roll < 0.95 or not positions[w]:
                if not positions[w]:
                    positions[w] = dict.fromkeys(rng.sample(keys, rng.randint(1, 2)), 0)
                fetch = [{"topic": k[0], "partition": k[1], "offset": o} for k, o in sorted(positions[w].items())]
                op("invoke", process_of[w], "poll", fetch)
                in_flight[w] = ("poll", fetch, None)
            else:
                target = {k: rng.randint(0, replicated[k]) for k in sorted(rng.sample(keys, rng.randint(1, 2)))}
                assignment = [{"topic": k[0], "partition": k[1], "offset": o} for k, o in target.items()]
                op("invoke", process_of[w], "assign", assignment)
                in_flight[w] = ("assign", assignment, target)
            continue
        kind, value, payload = pending
        in_flight[w] = None
        if kind == "send":
            roll = rng.random()
            if roll < 0.03:
                op("fail", process_of[w], "send", value)
            elif roll < 0.06:  # appended, outcome unknown to the client; the process retires
                logs[payload].append(value["value"])
                event(leader[payload], "appended", topic=payload[0], partition=payload[1],
                      offset=len(logs[payload]) - 1, epoch=epoch[payload], values=[value["value"]], role="leader")
                op("info", process_of[w], "send", value)
                process_of[w] = next_process
                next_process += 1
            else:
                offset = len(logs[payload])
                logs[payload].append(value["value"])
                event(leader[payload], "appended", topic=payload[0], partition=payload[1], offset=offset,
                      epoch=epoch[payload], values=[value["value"]], role="leader")
                if offset + 1 - replicated[payload] >= replicate_every:
                    replicate(payload)
                event(leader[payload], "acked", topic=payload[0], partition=payload[1], offset=offset,
                      high_watermark=max(replicated[payload], offset + 1), acks=-1)
                op("ok", process_of[w], "send", {**value, "offset": offset})
            if rng.random() < 0.002:
                elect(payload, rng.choice([n for n in nodes if n != leader[payload]]))
        elif kind == "poll":
            batches = []
            for key, start in sorted(positions[w].items()):
                visible = replicated[key]  # consumers read only below the HW
                records = [[o, logs[key][o]] for o in range(start, min(visible, start + rng.randint(0, 5)))]
                batches.append({"topic": key[0], "partition": key[1], "offset": start, "records": records,
                                "high_watermark": visible})
                positions[w][key] = start + len(records)
            op("ok", process_of[w], "poll", batches)
        else:
            positions[w] = dict(payload)
            op("ok", process_of[w], "assign", value)
    for w, pending in enumerate(in_flight):
        if pending is not None:
            op("info" if pending[0] == "send" else "fail", process_of[w], pending[0], pending[1])
    for key in keys:
        replicate(key)
    op("info", "nemesis", "heal-all", {})
    for key in keys:
        op("invoke", next_process, "drain", [{"topic": key[0], "partition": key[1], "offset": 0}])
        op("ok", next_process, "drain", [{"topic": key[0], "partition": key[1], "offset": 0,
                                          "records": [[o, v] for o, v in enumerate(logs[key])],
                                          "high_watermark": len(logs[key])}])
    history.close()
    for f in event_files.values():
        f.close()
    config = {"name": name, "seed": seed, "workload": "queue", "variant": "default", "acks": "all",
              "min_insync_replicas": 2, "replication_factor": 3, "topics": 1, "partitions": partitions,
              "nodes": len(nodes)}
    (run_dir / "test.yaml").write_text(yaml.safe_dump(config))
    return run_dir
