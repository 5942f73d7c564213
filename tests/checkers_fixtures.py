"""Helpers for the checkers' tests: build small hand-written histories and node events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from floodmark.checkers.synthetic import inject, queue_run
from floodmark.history import Op, write_history
from floodmark.node_events import (
    BecameFollower,
    KnownKind,
    LeaderElected,
    NodeEvent,
    NodeEventWriter,
)


class History:
    """Appends ops with dense indices and 1 ms steps: ``h.invoke(0, "send", v)``, ``h.ok(0, "send", v)``."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, type: str, process: Any, f: str, value: Any = None) -> int:
        index = len(self.ops)
        self.ops.append(Op(index, index * 1_000_000, type, process, f, value))  # type: ignore[arg-type]
        return index

    def invoke(self, process: Any, f: str, value: Any = None) -> int:
        return self.add("invoke", process, f, value)

    def ok(self, process: Any, f: str, value: Any = None) -> int:
        return self.add("ok", process, f, value)

    def fail(self, process: Any, f: str, value: Any = None) -> int:
        return self.add("fail", process, f, value)

    def info(self, process: Any, f: str, value: Any = None) -> int:
        return self.add("info", process, f, value)

    def call(self, process: Any, f: str, invoked: Any, completed: Any = None, outcome: str = "ok") -> None:
        self.invoke(process, f, invoked)
        self.add(outcome, process, f, invoked if completed is None else completed)

    def send(self, process: Any, partition: int, value: str, offset: int | None, outcome: str = "ok",
             topic: str = "t0") -> None:
        invoked = {"topic": topic, "partition": partition, "value": value}
        self.call(process, "send", invoked, {**invoked, "offset": offset} if outcome == "ok" else invoked, outcome)

    def poll(self, process: Any, partition: int, start: int, records: list[tuple[int, str]],
             high_watermark: int | None = None, f: str = "poll", topic: str = "t0") -> None:
        fetch = [{"topic": topic, "partition": partition, "offset": start}]
        batch = {"topic": topic, "partition": partition, "offset": start, "records": [list(r) for r in records],
                 "high_watermark": high_watermark if high_watermark is not None else start + len(records)}
        self.call(process, f, fetch, [batch])

    def power_loss(self, node: str = "n1", lost_bytes: int = 100) -> None:
        """A fault op: a power loss of ``node`` that took ``lost_bytes`` of unsynced writes."""
        self.call("nemesis", "start-power", {"shape": "leader"},
                  {"shape": "leader", "node": node, "mode": "power-loss", "lost_unsynced_bytes": lost_bytes,
                   "lost_metadata_changes": 0})


def events(node: str, *bodies: KnownKind) -> list[NodeEvent]:
    """``node``'s events, numbered from 0 in the order given."""
    return [NodeEvent(node, seq, float(seq), body) for seq, body in enumerate(bodies)]


def elected(partition: int, leader: int, epoch: int, *, zk_version: int = 1, unclean: bool = False,
            topic: str = "t0", recovery: bool | None = None) -> LeaderElected:
    """The controller's election of ``leader`` for ``epoch`` (ISR: the leader alone);
    ``recovery``: an unclean choice made as KIP-966's balanced recovery (default: as unclean)."""
    return LeaderElected(topic=topic, partition=partition, leader=leader, leader_epoch=epoch, isr=(leader,),
                         controller_epoch=1, zk_version=zk_version, unclean=unclean,
                         recovery=unclean if recovery is None else recovery)


def follows(partition: int, leader: int = 2, epoch: int = 1, topic: str = "t0") -> BecameFollower:
    """The node became a follower of ``partition``: it holds a replica of it."""
    return BecameFollower(topic=topic, partition=partition, leader_epoch=epoch, leader=leader, log_end=0)


def make_run_dir(tmp_path: Path, anomaly: str | None = None) -> Path:
    run = queue_run(11, ops=300)
    if anomaly:
        run = inject(run, anomaly, 1)
    path = tmp_path / "store" / "test" / "20260101T000000-s11"
    (path / "events").mkdir(parents=True)
    write_history(path / "history.jsonl", run.history)
    for node, node_events in run.events.items():
        writer = NodeEventWriter(path / "events" / f"{node}.jsonl", node)
        for e in node_events:
            writer.write(e.wall, e.body)
        writer.close()
    (path / "test.yaml").write_text(yaml.safe_dump(run.config.to_dict() if run.config else {}))
    return path
