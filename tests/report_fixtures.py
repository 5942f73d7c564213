"""Synthetic run directories for the report and results-browser tests.

A real run needs a cluster; the report only needs what a run leaves behind. This module
writes run directories with the shapes the harness, the nodes and the checkers produce
(COMMON.md): a queue or log-lin history with send/poll/drain or append/read ops, nemesis
start-*/stop-* ops, per-node event files, node logs and a results.json. Everything is
derived from the seed, so a test that fails can be re-run on the same data.

`make_run(...)` builds one run: clean, with anomalies (lost writes, many unseen sends, an
HW regression), with a linearizability failure, and optionally with hostile payloads in
send values, errors and the test name, to prove the report escapes them.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HOSTILE_SCRIPT = "<script>window.__pwned=1</script>"
HOSTILE_IMG = "<img src=x onerror=\"window.__pwned=2\">"


@dataclass
class GeneratedRun:
    path: Path
    config: dict[str, Any]
    results: dict[str, Any] | None
    op_count: int
    lost_send_index: int | None = None


def _config(name: str, seed: int, workload: str, variant: str, nemesis: list[str],
            concurrency: int, partitions: int) -> dict[str, Any]:
    return {
        "name": name, "seed": seed, "cluster": "local", "nodes": 3, "workload": workload,
        "nemesis": nemesis, "time_limit": 30, "variant": variant, "topics": 1,
        "partitions": partitions, "replication_factor": 3, "min_insync_replicas": 2,
        "acks": "all", "rate": 100, "concurrency": concurrency,
    }


class _HistoryBuilder:
    """Appends ops as JSON lines with dense indices and increasing times."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.time = 0

    def add(self, type: str, process: Any, f: str, value: Any, node: str | None = None,
            error: Any = None, dt: int = 1_000_000) -> int:
        self.time += dt
        op: dict[str, Any] = {"index": len(self.lines), "time": self.time, "type": type,
                              "process": process, "f": f, "value": value}
        if node is not None:
            op["node"] = node
        if error is not None:
            op["error"] = error
        self.lines.append(op)
        return op["index"]


def _queue_history(rng: random.Random, ops_wanted: int, concurrency: int, partitions: int,
                   hostile: bool, duration_ns: int) -> tuple[_HistoryBuilder, list[int], dict[int, Any]]:
    """A queue-workload history; returns the builder, ok-send indices and offsets by index."""
    h = _HistoryBuilder()
    processes = list(range(concurrency))
    next_offset = [0] * partitions
    logs: list[list[tuple[int, str]]] = [[] for _ in range(partitions)]
    open_ops: dict[int, tuple[int, str, Any]] = {}  # worker -> (invoke index, f, value)
    ok_sends: list[int] = []
    offsets: dict[int, Any] = {}
    counter = 0
    step = max(1, duration_ns // max(1, ops_wanted))
    nemesis_at = {ops_wanted // 4: ("start-partition", {"targets": [["n1"], ["n2", "n3"]],
                                                        "rules": ["n1 -x- n2", "n1 -x- n3"]}),
                  ops_wanted // 2: ("stop-partition", {"healed": ["n1", "n2", "n3"]}),
                  (ops_wanted * 5) // 8: ("start-kill", {"targets": ["n2"], "pids": [4242]}),
                  (ops_wanted * 3) // 4: ("stop-kill", {"restarted": ["n2"]})}
    while len(h.lines) < ops_wanted:
        if len(h.lines) in nemesis_at:
            f, value = nemesis_at.pop(len(h.lines))
            h.add("invoke", "nemesis", f, None, dt=step)
            h.add("info", "nemesis", f, value, dt=step)
            continue
        worker = rng.randrange(concurrency)
        process = processes[worker]
        if worker in open_ops:
            invoke_index, f, value = open_ops.pop(worker)
            roll = rng.random()
            if f == "send":
                if roll < 0.9:
                    p = value["partition"]
                    offset = next_offset[p]
                    next_offset[p] += 1
                    logs[p].append((offset, value["value"]))
                    done = h.add("ok", process, f, {**value, "offset": offset}, node="n1", dt=step)
                    ok_sends.append(done)
                    offsets[done] = (p, offset)
                elif roll < 0.95:
                    h.add("fail", process, f, value, node="n1", error="NOT_LEADER_FOR_PARTITION", dt=step)
                else:
                    h.add("info", process, f, value, node="n1", error="timeout", dt=step)
                    processes[worker] += concurrency
            else:
                records = []
                for position in value:
                    p = position["partition"]
                    start = position["offset"]
                    records.append({"topic": "t0", "partition": p, "offset": start,
                                    "records": [list(r) for r in logs[p][start:start + 5]],
                                    "high_watermark": next_offset[p]})
                h.add("ok", process, f, records, node="n2", dt=step)
            continue
        p = rng.randrange(partitions)
        if rng.random() < 0.6:
            counter += 1
            text = f"{process}-{counter}"
            if hostile and counter in (3, 4):
                text = HOSTILE_SCRIPT if counter == 3 else HOSTILE_IMG
            value = {"topic": "t0", "partition": p, "value": text}
            open_ops[worker] = (h.add("invoke", process, "send", value, node="n1", dt=step), "send", value)
        else:
            value = [{"topic": "t0", "partition": p, "offset": max(0, next_offset[p] - 3)}]
            open_ops[worker] = (h.add("invoke", process, "poll", value, node="n2", dt=step), "poll", value)
    return h, ok_sends, offsets


def _log_lin_history(rng: random.Random, hostile: bool) -> tuple[_HistoryBuilder, dict[str, Any]]:
    """A small log-lin history on t0/0 where a read contradicts an acknowledged append."""
    h = _HistoryBuilder()
    log: list[str] = []
    linearized: list[int] = []
    for k in range(12):
        process = k % 3
        value = {"topic": "t0", "partition": 0, "value": f"{process}-{k}"}
        if hostile and k == 2:
            value["value"] = HOSTILE_SCRIPT
        if k % 3 == 2 and log:
            read = {"topic": "t0", "partition": 0, "offset": len(log) - 1}
            invoke = h.add("invoke", process, "read", read, dt=3_000_000)
            h.add("ok", process, "read", {**read, "value": log[-1]}, dt=4_000_000)
        else:
            invoke = h.add("invoke", process, "append", value, dt=3_000_000)
            h.add("ok", process, "append", {**value, "offset": len(log)}, dt=4_000_000)
            log.append(value["value"])
        linearized.append(invoke)
    # Two concurrent ops that cannot both be linearized: a read of offset 1 sees a value
    # that was never appended there.
    read = {"topic": "t0", "partition": 0, "offset": 1}
    bad_read = h.add("invoke", 0, "read", read, dt=2_000_000)
    append = {"topic": "t0", "partition": 0, "value": "2-99"}
    bad_append = h.add("invoke", 2, "append", append, dt=1_000_000)
    h.add("ok", 0, "read", {**read, "value": "2-99"}, dt=2_000_000)
    h.add("ok", 2, "append", {**append, "offset": len(log)}, dt=2_000_000)
    anomaly = {
        "type": "nonlinearizable", "topic": "t0", "partition": 0, "offsets": [1],
        "ops": [bad_read, bad_append],
        "explanation": "No linearization of t0/0 explains a read of offset 1 returning 2-99.",
        "model": "log",
        "partial_linearizations": [
            {"ops": linearized, "state": {"log": log}, "next": [bad_read, bad_append]},
            {"ops": linearized[:-1], "state": {"log": log[:-1]}, "next": [bad_read]},
        ],
    }
    return h, anomaly


def _events(partitions: int, hostile: bool, regression: bool) -> dict[str, list[dict[str, Any]]]:
    """Node events: n1 is controller; n1 leads, loses leadership to n2 in epoch 1, n2 restarts."""
    events: dict[str, list[dict[str, Any]]] = {"n1": [], "n2": [], "n3": []}
    wall = {"n1": 1_700_000_000.0, "n2": 1_700_000_300.0, "n3": 1_699_999_000.0}  # skewed clocks

    def emit(node: str, kind: str, **fields: Any) -> None:
        wall[node] += 0.01
        events[node].append({"node": node, "seq": len(events[node]), "wall": wall[node],
                             "kind": kind, **fields})

    for node in events:
        emit(node, "started")
        emit(node, "broker_state", state="Active", incarnation=100 + int(node[1:]))
    emit("n1", "controller_elected", controller_epoch=1, broker=1)
    for p in range(partitions):
        tp = {"topic": "t0", "partition": p}
        emit("n1", "leader_elected", **tp, leader=1, leader_epoch=0, isr=[1, 2, 3],
             controller_epoch=1, zk_version=0, unclean=False)
        emit("n1", "became_leader", **tp, leader_epoch=0, isr=[1, 2, 3], log_end=0, high_watermark=0)
        for follower in ("n2", "n3"):
            emit(follower, "became_follower", **tp, leader_epoch=0, leader=1, log_end=0)
        for batch in range(6):
            values = [f"0-{batch}-{i}" for i in range(5)]
            if hostile and batch == 1:
                values[0] = HOSTILE_SCRIPT
            emit("n1", "appended", **tp, offset=batch * 5, epoch=0, values=values, role="leader")
            for follower in ("n2", "n3"):
                emit(follower, "appended", **tp, offset=batch * 5, epoch=0, values=values, role="follower")
            emit("n1", "hw_changed", **tp, leader_epoch=0, role="leader", previous=batch * 5,
                 high_watermark=batch * 5 + 5, log_end=batch * 5 + 5)
            emit("n1", "acked", **tp, offset=batch * 5 + 4, high_watermark=batch * 5 + 5, acks=-1)
        emit("n1", "isr_changed", **tp, leader_epoch=0, isr=[1], zk_version=1, change="shrink")
        emit("n1", "appended", **tp, offset=30, epoch=0, values=["lost-1", "lost-2"], role="leader")
        emit("n1", "hw_changed", **tp, leader_epoch=0, role="leader", previous=30,
             high_watermark=32, log_end=32)
        emit("n1", "leader_elected", **tp, leader=2, leader_epoch=1, isr=[2, 3],
             controller_epoch=1, zk_version=2, unclean=False)
        emit("n2", "became_leader", **tp, leader_epoch=1, isr=[2, 3], log_end=30, high_watermark=28)
        emit("n2", "hw_changed", **tp, leader_epoch=1, role="leader", previous=28, high_watermark=30,
             log_end=30)
        emit("n1", "became_follower", **tp, leader_epoch=1, leader=2, log_end=32)
        reason = "high_watermark" if regression else "leader_epoch"
        emit("n1", "truncated", **tp, leader_epoch=1, from_offset=32, to_offset=30, reason=reason)
        emit("n3", "became_follower", **tp, leader_epoch=1, leader=2, log_end=30)
        emit("n2", "isr_changed", **tp, leader_epoch=1, isr=[1, 2, 3], zk_version=3, change="expand")
        for batch in range(6, 9):
            values = [f"1-{batch}-{i}" for i in range(5)]
            emit("n2", "appended", **tp, offset=batch * 5, epoch=1, values=values, role="leader")
            emit("n2", "hw_changed", **tp, leader_epoch=1, role="leader", previous=batch * 5,
                 high_watermark=batch * 5 + 5, log_end=batch * 5 + 5)
            if regression and batch == 7:
                emit("n2", "hw_changed", **tp, leader_epoch=1, role="leader", previous=40,
                     high_watermark=33, log_end=40)
    emit("n2", "rejected", request="Fetch", why="stale leader epoch" if not hostile else HOSTILE_IMG,
         topic="t0", partition=0, leader_epoch=0)
    emit("n2", "stopped")
    return events


def _seq_of(events: list[dict[str, Any]], kind: str, **match: Any) -> int:
    for e in events:
        if e["kind"] == kind and all(e.get(k) == v for k, v in match.items()):
            return int(e["seq"])
    raise LookupError(f"no {kind} event matching {match}")


def _checker(valid: Any, anomalies: list[dict[str, Any]], stats: dict[str, Any] | None = None) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for a in anomalies:
        counts[a["type"]] = counts.get(a["type"], 0) + 1
    return {"valid": valid, "anomalies": anomalies, "anomaly_counts": dict(sorted(counts.items())),
            "stats": stats or {}}


def make_run(store: Path, *, name: str = "queue-partition", seed: int = 1, stamp: str = "20260101T000000",
             ops: int = 400, anomalies: bool = False, lin_failure: bool = False, hostile: bool = False,
             variant: str = "default", nemesis: tuple[str, ...] = ("partition", "kill"),
             verdict: Any = None, with_results: bool = True, unseen: int = 250) -> GeneratedRun:
    """Write one synthetic run directory under ``store/<name>/<stamp>-s<seed>/``."""
    rng = random.Random(seed)
    test_name = name  # a test name must be usable as a directory name: no payload fits in it
    workload = "log-lin" if lin_failure else "queue"
    config = _config(test_name, seed, workload, variant, list(nemesis), concurrency=4, partitions=2)
    run = store / name / f"{stamp}-s{seed}"
    (run / "events").mkdir(parents=True, exist_ok=True)
    lost: int | None = None
    events = _events(2, hostile, regression=anomalies)
    checker_anoms: dict[str, list[dict[str, Any]]] = {"durability": [], "queue": [], "hw": []}
    lin: dict[str, Any] = _checker(True, [], {"partitions": 2})
    if lin_failure:
        h, lin_anomaly = _log_lin_history(rng, hostile)
        lin = _checker(False, [lin_anomaly], {"partitions": 2, "explored": 1234})
    else:
        h, ok_sends, offsets = _queue_history(rng, ops, 4, 2, hostile, 30 * 10**9)
        if anomalies and ok_sends:
            lost = ok_sends[len(ok_sends) // 2]
            p, offset = offsets[lost]
            # with hostile payloads, a second witness on the other partition (its context is there)
            other = next((i for i in ok_sends if offsets[i][0] != p), None)
            witnesses = [lost] + ([other] if hostile and other is not None else [])
            checker_anoms["durability"].append({
                "type": "lost-write", "topic": "t0", "partition": p, "offsets": [offset],
                "ops": witnesses, "events": [["n1", 20], ["n1", 50]],
                "explanation": f"Send acknowledged at t0/{p} offset {offset} is missing from the final drain.",
            })
            for k in range(min(unseen, len(ok_sends))):
                idx = ok_sends[k]
                p, offset = offsets[idx]
                checker_anoms["queue"].append({
                    "type": "unseen", "topic": "t0", "partition": p, "offsets": [offset], "ops": [idx],
                    "explanation": f"Acknowledged send at offset {offset} was never read by any poll.",
                })
            checker_anoms["hw"].append({
                "type": "hw-decrease", "topic": "t0", "partition": 0, "offsets": [40, 33],
                "ops": [], "events": [["n2", _seq_of(events["n2"], "hw_changed", high_watermark=33)]],
                "explanation": "n2 lowered its HW from 40 to 33 within leader epoch 1.",
            })
    history_path = run / "history.jsonl"
    with open(history_path, "w", encoding="utf-8") as f:
        for op in h.lines:
            f.write(json.dumps(op, ensure_ascii=False) + "\n")
    for node, evs in events.items():
        with open(run / "events" / f"{node}.jsonl", "w", encoding="utf-8") as f:
            for e in evs:
                f.write(json.dumps(e) + "\n")
        (run / "logs" / node).mkdir(parents=True, exist_ok=True)
        (run / "logs" / node / "broker.log").write_text(f"{node} started\n{HOSTILE_SCRIPT if hostile else ''}\n")
    (run / "test.yaml").write_text(yaml.safe_dump(config, sort_keys=True))
    (run / "schedule.json").write_text(json.dumps({"faults": list(nemesis)}))
    results = None
    if with_results:
        checkers = {name: _checker(not found, found) for name, found in checker_anoms.items()}
        checkers["leader"] = _checker(True, [])
        checkers["linearizable"] = lin
        checkers["stats"] = _checker(True, [], {"by_f": {"send": {"ok": 10, "fail": 1}},
                                               "latency_ms": {"p50": 3.1, "p99": 12.5}})
        merged = verdict
        if merged is None:
            merged = not any(c["valid"] is False for c in checkers.values())
        results = {"valid": merged, "seed": seed, "variant": variant, "config": config,
                   "checkers": checkers}
        (run / "results.json").write_text(json.dumps(results, indent=1))
    return GeneratedRun(run, config, results, len(h.lines), lost)


def make_minimal_run(store: Path, *, name: str, seed: int, stamp: str, verdict: Any,
                     variant: str = "default", nemesis: tuple[str, ...] = ("partition",),
                     anomaly_type: str = "lost-write") -> Path:
    """A small run (a few ops, a results file) for filling a store with thousands of runs."""
    run = store / name / f"{stamp}-s{seed}"
    run.mkdir(parents=True)
    ops = [
        {"index": 0, "time": 1000, "type": "invoke", "process": 0, "f": "send",
         "value": {"topic": "t0", "partition": 0, "value": f"0-{seed}"}},
        {"index": 1, "time": 2000, "type": "ok", "process": 0, "f": "send",
         "value": {"topic": "t0", "partition": 0, "value": f"0-{seed}", "offset": 0}},
    ]
    (run / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    config = _config(name, seed, "queue", variant, list(nemesis), concurrency=1, partitions=1)
    (run / "test.yaml").write_text(yaml.safe_dump(config))
    if verdict is not None:
        anomalies = [] if verdict is True else [{
            "type": anomaly_type, "topic": "t0", "partition": 0, "offsets": [0], "ops": [1],
            "explanation": "synthetic"}]
        results = {"valid": verdict, "seed": seed, "variant": variant, "config": config,
                   "checkers": {"durability": _checker(verdict, anomalies)}}
        (run / "results.json").write_text(json.dumps(results))
    return run


def run_data_from(ops: list[Any], events: dict[str, list[Any]] | None = None,
                  results: dict[str, Any] | None = None, config: Any = None) -> Any:
    """A RunData built in memory (no files), for unit tests of the report's parts."""
    from floodmark.reports.history_columns import HistoryColumns
    from floodmark.reports.run_data import RunData
    from floodmark.rundir import RunDir

    history = HistoryColumns.from_ops(ops)
    completion_of = history.pairs()
    return RunData(RunDir(Path("/nonexistent/run")), config, results, history, completion_of,
                   {c: i for i, c in completion_of.items()}, events or {})


def node_event(node: str, seq: int, body: Any) -> Any:
    """``node``'s event number ``seq`` with this body (a kind from ``floodmark.node_events``)."""
    from floodmark.node_events import NodeEvent

    return NodeEvent(node, seq, 1_700_000_000.0 + seq, body)
