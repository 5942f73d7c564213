"""Synthetic runs: histories and node events of a correct replicated log, for tests and benchmarks.

A correct system is simulated directly: each partition is one sequential log, client
processes invoke operations concurrently, and every operation takes effect at the instant
it completes (which lies inside its interval, so the history is linearizable by
construction). Sends sometimes fail (no effect) or end ``info`` (effect or not, at random;
the process then retires), leaders change with increasing epochs, a new leader may start
with a lower HW than its predecessor, a deposed leader truncates a divergent uncommitted
record, and the run ends with a final drain. Node events are what correct brokers and one
controller would write. Everything follows from the seed.

:func:`inject` then plants exactly one anomaly of a named type, so tests can check that
the checkers catch each type, and that they find nothing in the unmodified run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from floodmark.contracts.history import Op
from floodmark.contracts.node_event_kinds import ACKS_ALL
from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    HwChanged,
    KnownKind,
    LeaderElected,
    NodeEvent,
    Truncated,
)
from floodmark.contracts.run_config import TestConfig

Partition = tuple[str, int]


def broker_id(node: str) -> int:
    """The broker id of node ``n<id>``, as events name brokers."""
    return int(node[1:])


@dataclass
class SyntheticRun:
    history: list[Op]
    events: dict[str, list[NodeEvent]]
    config: TestConfig | None = None


class _Recorder:
    """Appends ops and node events. Runs of 10^7 ops must fit in memory, so objects that are
    equal wherever they appear are made once and shared: the (empty) extra fields of every op,
    one int object per number for op indices and event sequence numbers alike, one wall-clock
    float per step of the clock, and the bodies of the events every follower writes alike.
    Ops and events are never mutated, so the sharing cannot be observed."""

    def __init__(self, nodes: list[str]) -> None:
        self.ops: list[Op] = []
        self.time = 0
        self.wall = 0.0
        self.events: dict[str, list[NodeEvent]] = {n: [] for n in nodes}
        self._numbers: list[int] = []
        self._no_extra: dict[str, Any] = {}

    def _number(self, n: int) -> int:
        numbers = self._numbers
        while len(numbers) <= n:
            numbers.extend(range(len(numbers), len(numbers) + 4096))
        return numbers[n]

    def op(self, type: str, process: Any, f: str, value: Any) -> Op:
        self.time += 1_000_000  # 1 ms between history entries
        self.wall = self.time / 1e9
        op = Op(self._number(len(self.ops)), self.time, type, process, f, value,  # type: ignore[arg-type]
                None, None, self._no_extra)
        self.ops.append(op)
        return op

    def event(self, node: str, body: KnownKind) -> None:
        """An event of ``node``; its ``body`` may be shared with other nodes' events."""
        log = self.events[node]
        log.append(NodeEvent(node, self._number(len(log)), self.wall, body))


@dataclass
class _Partition:
    key: Partition
    replicas: list[str]
    leader: str
    epoch: int = 0
    log: list[Any] = field(default_factory=list)
    zk_version: int = 0


def queue_run(seed: int, *, ops: int = 400, processes: int = 4, topics: int = 1, partitions: int = 2,
              nodes: int = 3, fail_rate: float = 0.03, info_rate: float = 0.03,
              leader_change_rate: float = 0.01, max_poll: int = 5) -> SyntheticRun:
    """A correct queue-workload run with about ``ops`` client operations."""
    rng = random.Random(seed)
    names = [f"n{i + 1}" for i in range(nodes)]
    rec = _Recorder(names)
    rec.event(names[0], ControllerElected(controller_epoch=1, broker=broker_id(names[0])))
    parts: dict[Partition, _Partition] = {}
    for t in range(topics):
        for p in range(partitions):
            key = (f"t{t}", p)
            leader = names[(t * partitions + p) % nodes]
            part = parts[key] = _Partition(key, list(names), leader)
            _elect(rec, part, leader, names[0], rng, hw=0)
    keys = sorted(parts)
    # worker state: current process id, in-flight (op, kind, payload), consumer positions
    next_process = processes
    process_of = list(range(processes))
    in_flight: list[tuple[Op, str, Any] | None] = [None] * processes
    positions: list[dict[Partition, int]] = [{} for _ in range(processes)]
    sent = 0
    forced_fail = False
    rec.op("invoke", "nemesis", "start-partition", {"targets": [names[-1]]})
    nemesis_open = True
    while len(rec.ops) < 2 * ops:
        if nemesis_open and len(rec.ops) > ops:
            rec.op("info", "nemesis", "stop-partition", {"targets": [names[-1]]})
            nemesis_open = False
        w = rng.randrange(processes)
        pending = in_flight[w]
        if pending is None:
            roll = rng.random()
            if roll < 0.55:
                key = rng.choice(keys)
                value = {"topic": key[0], "partition": key[1], "value": f"{w}-{sent}"}
                sent += 1
                in_flight[w] = (rec.op("invoke", process_of[w], "send", value), "send", key)
            elif roll < 0.95 or not positions[w]:
                if not positions[w]:
                    chosen = rng.sample(keys, min(len(keys), rng.randint(1, 2)))
                    positions[w] = {k: 0 for k in chosen}
                fetch = [{"topic": k[0], "partition": k[1], "offset": o} for k, o in sorted(positions[w].items())]
                in_flight[w] = (rec.op("invoke", process_of[w], "poll", fetch), "poll", None)
            else:
                chosen = rng.sample(keys, min(len(keys), rng.randint(1, 2)))
                target = {k: rng.randint(0, len(parts[k].log)) for k in sorted(chosen)}
                assignment = [{"topic": k[0], "partition": k[1], "offset": o} for k, o in target.items()]
                in_flight[w] = (rec.op("invoke", process_of[w], "assign", assignment), "assign", target)
            continue
        invocation, kind, payload = pending
        in_flight[w] = None
        if kind == "send":
            part = parts[payload]
            roll = rng.random()
            if not forced_fail or roll < fail_rate:
                forced_fail = True
                rec.op("fail", invocation.process, "send", invocation.value)
            elif roll < fail_rate + info_rate:
                if rng.random() < 0.5:
                    _append(rec, part, invocation.value["value"], acked=False)
                else:  # the leader appended it, then lost leadership before it committed
                    _diverge_and_change_leader(rec, part, invocation.value["value"], names[0], rng)
                rec.op("info", invocation.process, "send", invocation.value)
                process_of[w] = next_process
                next_process += 1
            else:
                offset = _append(rec, part, invocation.value["value"], acked=True)
                rec.op("ok", invocation.process, "send", {**invocation.value, "offset": offset})
            if rng.random() < leader_change_rate:
                _change_leader(rec, part, names[0], rng)
        elif kind == "poll":
            batches = []
            for key, start in sorted(positions[w].items()):
                log = parts[key].log
                records = [[o, log[o]] for o in range(start, min(len(log), start + rng.randint(0, max_poll)))]
                batches.append({"topic": key[0], "partition": key[1], "offset": start, "records": records,
                                "high_watermark": len(log)})
                positions[w][key] = start + len(records)
            rec.op("ok", invocation.process, "poll", batches)
        else:
            positions[w] = dict(payload)
            rec.op("ok", invocation.process, "assign", invocation.value)
    for pending in in_flight:  # complete what is in flight; sends stay unknown
        if pending is not None and pending[1] == "send":
            rec.op("info", pending[0].process, "send", pending[0].value)
        elif pending is not None:
            rec.op("fail", pending[0].process, pending[0].f, pending[0].value)
    rec.op("info", "nemesis", "heal-all", {})
    drainer = next_process
    for key in keys:
        rec.op("invoke", drainer, "drain", [{"topic": key[0], "partition": key[1], "offset": 0}])
        log = parts[key].log
        rec.op("ok", drainer, "drain", [{"topic": key[0], "partition": key[1], "offset": 0,
                                         "records": [[o, v] for o, v in enumerate(log)],
                                         "high_watermark": len(log)}])
    config = TestConfig(workload="queue", acks="all", min_insync_replicas=2, variant="default", topics=topics,
                        partitions=partitions, nodes=nodes, replication_factor=nodes, seed=seed)
    return SyntheticRun(rec.ops, rec.events, config)


def _append(rec: _Recorder, part: _Partition, value: Any, *, acked: bool) -> int:
    offset = len(part.log)
    end = offset + 1
    values = (value,)  # one tuple for every replica's event
    part.log.append(value)
    topic, number = part.key
    rec.event(part.leader, Appended(topic=topic, partition=number, offset=offset, epoch=part.epoch,
                                    values=values, role="leader"))
    appended = Appended(topic=topic, partition=number, offset=offset, epoch=part.epoch, values=values,
                        role="follower")
    advanced = HwChanged(topic=topic, partition=number, leader_epoch=part.epoch, role="follower",
                         previous=offset, high_watermark=end, log_end=end)
    for follower in part.replicas:
        if follower != part.leader:
            rec.event(follower, appended)
            rec.event(follower, advanced)
    rec.event(part.leader, HwChanged(topic=topic, partition=number, leader_epoch=part.epoch, role="leader",
                                     previous=offset, high_watermark=end, log_end=end))
    if acked:
        rec.event(part.leader, Acked(topic=topic, partition=number, offset=offset, high_watermark=end,
                                     acks=ACKS_ALL))
    return offset


def _elect(rec: _Recorder, part: _Partition, leader: str, controller: str, rng: random.Random, hw: int) -> None:
    part.epoch += 1
    part.zk_version += 1
    part.leader = leader
    topic, number = part.key
    isr = tuple(broker_id(r) for r in part.replicas)
    rec.event(controller, LeaderElected(topic=topic, partition=number, leader=broker_id(leader),
                                        leader_epoch=part.epoch, isr=isr, controller_epoch=1,
                                        zk_version=part.zk_version, unclean=False))
    rec.event(leader, BecameLeader(topic=topic, partition=number, leader_epoch=part.epoch, isr=isr,
                                   log_end=len(part.log), high_watermark=hw))
    if hw < len(part.log):  # the new leader learns the HW from its followers' fetches
        rec.event(leader, HwChanged(topic=topic, partition=number, leader_epoch=part.epoch, role="leader",
                                    previous=hw, high_watermark=len(part.log), log_end=len(part.log)))
    for follower in part.replicas:
        if follower != leader:
            rec.event(follower, BecameFollower(topic=topic, partition=number, leader_epoch=part.epoch,
                                               leader=broker_id(leader), log_end=len(part.log)))


def _change_leader(rec: _Recorder, part: _Partition, controller: str, rng: random.Random) -> None:
    others = [n for n in part.replicas if n != part.leader]
    # A new leader's HW may start below its predecessor's: the design allows it.
    _elect(rec, part, rng.choice(others), controller, rng, hw=rng.randint(0, len(part.log)))


def _diverge_and_change_leader(rec: _Recorder, part: _Partition, value: Any, controller: str,
                               rng: random.Random) -> None:
    old = part.leader
    topic, number = part.key
    end = len(part.log)
    rec.event(old, Appended(topic=topic, partition=number, offset=end, epoch=part.epoch, values=(value,),
                            role="leader"))
    _change_leader(rec, part, controller, rng)
    rec.event(old, Truncated(topic=topic, partition=number, leader_epoch=part.epoch, from_offset=end + 1,
                             to_offset=end, reason="diverging_epoch"))


# ----------------------------------------------------------------------------------- anomalies

QUEUE_ANOMALIES = ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "G1a", "poll-skip",
                   "nonmonotonic-poll")
HW_ANOMALIES = ("hw-decrease", "hw-beyond-log-end", "uncommitted-offset", "committed-truncated")
LEADER_ANOMALIES = ("multiple-leaders", "epoch-regression", "multiple-controllers")
ANOMALY_CHECKER = {
    **{a: "queue" for a in QUEUE_ANOMALIES}, **{a: "hw" for a in HW_ANOMALIES},
    **{a: "leader" for a in LEADER_ANOMALIES},
}


class CannotInject(ValueError):
    """The run has nothing to plant this anomaly in (too short); draw another."""


def inject(run: SyntheticRun, anomaly: str, seed: int = 0) -> SyntheticRun:
    """A copy of ``run`` with exactly one planted anomaly of type ``anomaly``."""
    rng = random.Random(seed)
    history = list(run.history)
    events = {n: list(e) for n, e in run.events.items()}
    if anomaly in QUEUE_ANOMALIES:
        _inject_queue(history, anomaly, rng)
    elif anomaly in HW_ANOMALIES or anomaly in LEADER_ANOMALIES:
        _inject_events(events, anomaly, rng)
    else:
        raise ValueError(f"unknown anomaly {anomaly!r}")
    return SyntheticRun(history, events, run.config)


def _read_batches(history: list[Op], f: str) -> list[tuple[int, int]]:
    return [(op.index, i) for op in history if op.type == "ok" and op.f == f for i in range(len(op.value))]


def _edit_batch(history: list[Op], where: tuple[int, int], records: list[list[Any]]) -> None:
    op = history[where[0]]
    batches = [dict(b) for b in op.value]
    batches[where[1]]["records"] = records
    history[where[0]] = replace(op, value=batches)


def _remove_value(history: list[Op], value: Any) -> None:
    for f in ("poll", "drain"):
        for where in _read_batches(history, f):
            records = history[where[0]].value[where[1]]["records"]
            if any(r[1] == value for r in records):
                _edit_batch(history, where, [r for r in records if r[1] != value])


def _inject_queue(history: list[Op], anomaly: str, rng: random.Random) -> None:
    acked = [op for op in history if op.f == "send" and op.type == "ok"]
    drains = _read_batches(history, "drain")
    polls = [w for w in _read_batches(history, "poll") if history[w[0]].value[w[1]]["records"]]
    if anomaly in ("lost-write", "unseen"):
        last_of: dict[Partition, Op] = {}
        for op in acked:
            key = (op.value["topic"], op.value["partition"])
            if key not in last_of or op.value["offset"] > last_of[key].value["offset"]:
                last_of[key] = op
        tails = {id(op) for op in last_of.values()}
        drained_ends = {(history[i].value[j]["topic"], history[i].value[j]["partition"]):
                        len(history[i].value[j]["records"]) for i, j in drains}
        if anomaly == "unseen":
            # the partition's acknowledged tail, with nothing after it in the log
            choices = [op for op in last_of.values()
                       if drained_ends.get((op.value["topic"], op.value["partition"])) == op.value["offset"] + 1]
        else:
            choices = [op for op in acked if id(op) not in tails]
        if not choices:
            raise CannotInject(anomaly)
        _remove_value(history, rng.choice(choices).value["value"])
    elif anomaly == "duplicate":
        if not drains:
            raise CannotInject(anomaly)
        where = rng.choice(drains)
        records = history[where[0]].value[where[1]]["records"]
        if not records:
            raise CannotInject(anomaly)
        _edit_batch(history, where, [*records, [len(records), rng.choice(records)[1]]])
    elif anomaly == "inconsistent-offsets":
        if not polls:
            raise CannotInject(anomaly)
        where = rng.choice(polls)
        records = [list(r) for r in history[where[0]].value[where[1]]["records"]]
        records[rng.randrange(len(records))][1] = "phantom-value"
        _edit_batch(history, where, records)
    elif anomaly == "G1a":
        failed = [op for op in history if op.f == "send" and op.type == "fail"]
        if not failed or not drains:
            raise CannotInject(anomaly)
        send = rng.choice(failed)
        key = (send.value["topic"], send.value["partition"])
        for where in drains:
            batch = history[where[0]].value[where[1]]
            if (batch["topic"], batch["partition"]) == key:
                _edit_batch(history, where, [*batch["records"], [len(batch["records"]), send.value["value"]]])
                return
        raise CannotInject(anomaly)
    elif anomaly == "poll-skip":
        wide = [w for w in polls if len(history[w[0]].value[w[1]]["records"]) >= 3]
        if not wide:
            raise CannotInject(anomaly)
        where = rng.choice(wide)
        records = history[where[0]].value[where[1]]["records"]
        middle = rng.randrange(1, len(records) - 1)
        _edit_batch(history, where, records[:middle] + records[middle + 1:])
    elif anomaly == "nonmonotonic-poll":
        if not polls:
            raise CannotInject(anomaly)
        where = rng.choice(polls)
        records = history[where[0]].value[where[1]]["records"]
        _edit_batch(history, where, [records[0], *records])


def _insert_event(events: dict[str, list[NodeEvent]], node: str, position: int, body: KnownKind) -> None:
    log = events[node]
    log.insert(position, NodeEvent(node, 0, 0.0, body))
    events[node] = [replace(e, seq=i) for i, e in enumerate(log)]


def _inject_events(events: dict[str, list[NodeEvent]], anomaly: str, rng: random.Random) -> None:
    located = [(n, i, e) for n, log in sorted(events.items()) for i, e in enumerate(log)]
    if anomaly in ("hw-decrease", "hw-beyond-log-end"):
        hws = [(n, i, e, e.body) for n, i, e in located if isinstance(e.body, HwChanged) and e.body.high_watermark >= 1]
        if not hws:
            raise CannotInject(anomaly)
        node, i, e, hw = rng.choice(hws)
        if anomaly == "hw-decrease":
            _insert_event(events, node, i + 1, replace(hw, previous=hw.high_watermark,
                                                       high_watermark=hw.high_watermark - 1))
        else:
            events[node][i] = replace(e, body=replace(hw, high_watermark=hw.log_end + 1))
    elif anomaly == "uncommitted-offset":
        changes = [(n, i, e, e.body) for n, i, e in located if isinstance(e.body, BecameLeader)
                   and e.body.leader_epoch > 1 and e.body.log_end >= 1]
        if not changes:
            raise CannotInject(anomaly)
        node, i, e, became = rng.choice(changes)
        log_end = became.log_end - 1
        events[node][i] = replace(e, body=replace(became, log_end=log_end,
                                                  high_watermark=min(became.high_watermark, log_end)))
    elif anomaly == "committed-truncated":
        follower_appends = [(n, i, e.body) for n, i, e in located
                            if isinstance(e.body, Appended) and e.body.role == "follower"]
        if not follower_appends:
            raise CannotInject(anomaly)
        node, i, appended = rng.choice(follower_appends)
        _insert_event(events, node, i + 1, Truncated(
            topic=appended.topic, partition=appended.partition, leader_epoch=appended.epoch,
            from_offset=appended.offset + 1, to_offset=appended.offset, reason="high_watermark"))
    elif anomaly == "multiple-leaders":
        elections = [(n, e.body) for n, i, e in located if isinstance(e.body, BecameLeader)]
        node, became = rng.choice(elections)
        other = rng.choice([n for n in sorted(events) if n != node])
        _insert_event(events, other, len(events[other]), became)
    elif anomaly == "epoch-regression":
        views = [(n, i, e.body) for n, i, e in located if isinstance(e.body, BecameLeader | BecameFollower)
                 and e.body.leader_epoch > 1]
        if not views:
            raise CannotInject(anomaly)
        node, i, view = rng.choice(views)
        _insert_event(events, node, i + 1, BecameFollower(topic=view.topic, partition=view.partition,
                                                          leader_epoch=view.leader_epoch - 1, leader=0, log_end=0))
    elif anomaly == "multiple-controllers":
        node = rng.choice([n for n in sorted(events) if n != "n1"])
        _insert_event(events, node, 0, ControllerElected(controller_epoch=1, broker=broker_id(node)))
