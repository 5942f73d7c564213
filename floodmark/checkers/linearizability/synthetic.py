"""Synthetic linearizable histories: a correct object under concurrent clients.

For the linearizability checker's tests and benchmarks: ``processes`` clients invoke ops
concurrently against one correct sequential object, and each op takes effect at the
instant it completes (inside its interval), so the history is linearizable by
construction. Ops whose outcome is unknown (``info``) took effect or not at random, and
their process retires, as in a real harness. :func:`corrupt_read` then makes one read
return something no linearization can explain.

Three objects: the ``log-lin`` workload's partitioned append-only logs, a CAS register, and
Porcupine-style key-value stores (:func:`kv_run`, where each op takes effect at a random
instant inside its interval; :func:`illegal_gets` makes an early get illegal in some keys).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from floodmark.checkers.synthetic import SyntheticRun
from floodmark.contracts.history import Op
from floodmark.contracts.run_config import TestConfig


def _loop(rng: random.Random, ops: int, processes: int, info_rate: float,
          invoke: Any, complete: Any) -> list[Op]:
    history: list[Op] = []

    def record(type: str, process: Any, f: str, value: Any) -> Op:
        op = Op(len(history), len(history) * 1_000_000, type, process, f, value)  # type: ignore[arg-type]
        history.append(op)
        return op

    process_of = list(range(processes))
    next_process = processes
    in_flight: list[Op | None] = [None] * processes
    while len(history) < 2 * ops or any(in_flight):
        w = rng.randrange(processes)
        pending = in_flight[w]
        if pending is None:
            if len(history) < 2 * ops:
                f, value = invoke(rng)
                in_flight[w] = record("invoke", process_of[w], f, value)
            continue
        in_flight[w] = None
        unknown = rng.random() < info_rate
        outcome, value = complete(rng, pending, unknown)
        record(outcome, pending.process, pending.f, value)
        if outcome == "info":
            process_of[w] = next_process
            next_process += 1
    return history


def log_lin_run(seed: int, *, ops: int = 500, processes: int = 5, partitions: int = 2,
                info_rate: float = 0.02) -> SyntheticRun:
    """A correct ``log-lin`` history: appends return their offset, reads return the record."""
    rng = random.Random(seed)
    logs: dict[int, list[str]] = {p: [] for p in range(partitions)}
    counter = iter(range(10**12))

    def invoke(rng: random.Random) -> tuple[str, Any]:
        p = rng.randrange(partitions)
        if rng.random() < 0.5:
            return "append", {"topic": "t0", "partition": p, "value": f"v{next(counter)}"}
        return "read", {"topic": "t0", "partition": p, "offset": rng.randint(0, len(logs[p]) + 1)}

    def complete(rng: random.Random, op: Op, unknown: bool) -> tuple[str, Any]:
        log = logs[op.value["partition"]]
        if op.f == "append":
            if unknown:
                if rng.random() < 0.5:
                    log.append(op.value["value"])
                return "info", op.value
            log.append(op.value["value"])
            return "ok", {**op.value, "offset": len(log) - 1}
        offset = op.value["offset"]
        return "ok", {**op.value, "value": log[offset] if offset < len(log) else None}

    history = _loop(rng, ops, processes, info_rate, invoke, complete)
    return SyntheticRun(history, {}, TestConfig(workload="log-lin", topics=1, partitions=partitions, seed=seed))


def register_run(seed: int, *, ops: int = 500, processes: int = 5, values: int = 5,
                 info_rate: float = 0.02) -> SyntheticRun:
    """A correct CAS-register history (initial value None)."""
    rng = random.Random(seed)
    state: list[Any] = [None]

    def invoke(rng: random.Random) -> tuple[str, Any]:
        roll = rng.random()
        if roll < 0.5:
            return "read", None
        if roll < 0.8:
            return "write", rng.randrange(values)
        return "cas", [rng.randrange(values), rng.randrange(values)]

    def complete(rng: random.Random, op: Op, unknown: bool) -> tuple[str, Any]:
        if op.f == "read":
            return "ok", state[0]
        if unknown and rng.random() < 0.5:
            return "info", op.value
        if op.f == "write":
            state[0] = op.value
        elif state[0] == op.value[0]:
            state[0] = op.value[1]
        else:
            return ("info" if unknown else "fail"), op.value
        return ("info" if unknown else "ok"), op.value

    history = _loop(rng, ops, processes, info_rate, invoke, complete)
    return SyntheticRun(history, {})  # a register: no floodmark workload, so no configuration


def corrupt_read(run: SyntheticRun, seed: int = 0) -> SyntheticRun:
    """One ok read now returns a value no operation ever wrote."""
    rng = random.Random(seed)
    reads = [op for op in run.history if op.type == "ok" and op.f == "read"]
    target = rng.choice(reads)
    if isinstance(target.value, dict):
        corrupted: Any = {**target.value, "value": "never-written"}
    else:
        corrupted = "never-written"
    history = list(run.history)
    history[target.index] = replace(target, value=corrupted)
    return SyntheticRun(history, run.events, run.config)


def kv_run(seed: int, *, ops: int = 2000, processes: int = 50, keys: int = 10) -> SyntheticRun:
    """A correct key-value history in the shape of Porcupine's test data: string registers
    per key with get, put and append (``"x <process> <n> y"``), every op acknowledged.

    Each op takes effect at a random instant inside its interval, as on a server that
    applies a request and then answers: not at its completion, which would let a checker
    that tries ops in completion order meet the linearization without ever backtracking."""
    rng = random.Random(seed)
    store: dict[str, str] = {}
    history: list[Op] = []
    sequence = [0] * processes  # Porcupine numbers each client's appends and puts
    in_flight: list[list[Any] | None] = [None] * processes  # [invocation, result once it took effect]

    def record(type: str, process: int, f: str, value: Any) -> Op:
        op = Op(len(history), len(history) * 1_000_000, type, process, f, value)  # type: ignore[arg-type]
        history.append(op)
        return op

    while len(history) < 2 * ops or any(in_flight):
        w = rng.randrange(processes)
        pending = in_flight[w]
        if pending is None:
            if len(history) < 2 * ops:
                key = str(rng.randrange(keys))
                roll = rng.random()
                f = "get" if roll < 0.45 else "put" if roll < 0.5 else "append"
                value = None if f == "get" else f"x {w} {sequence[w]} y"
                sequence[w] += f != "get"
                in_flight[w] = [record("invoke", w, f, {"key": key, "value": value}), None]
            continue
        invocation, result = pending
        key = invocation.value["key"]
        if result is None:  # it takes effect now
            if invocation.f == "get":
                pending[1] = store.get(key, "")
            else:
                written = invocation.value["value"]
                store[key] = written if invocation.f == "put" else store.get(key, "") + written
                pending[1] = written
            continue
        in_flight[w] = None
        record("ok", w, invocation.f, {"key": key, "value": result})
    return SyntheticRun(history, {})


def illegal_gets(run: SyntheticRun, seed: int = 0, *, keys: int = 3) -> SyntheticRun:
    """In ``keys`` keys chosen from the seed, the first get that saw two appends or more now
    returns its value without the first of them: a string no state of that key ever held
    (appended values are unique, so a key's states are the prefixes of its put or first
    append and what followed), hence one illegal read early in each of those keys."""
    rng = random.Random(seed)
    first: dict[str, Op] = {}
    for op in run.history:
        if op.type == "ok" and op.f == "get" and op.value["value"].count(" y") >= 2:
            first.setdefault(op.value["key"], op)
    history = list(run.history)
    for key in rng.sample(sorted(first), min(keys, len(first))):
        target = first[key]
        value = target.value["value"]
        history[target.index] = replace(target, value={**target.value, "value": value[value.index(" y") + 2:].lstrip()})
    return SyntheticRun(history, run.events, run.config)
