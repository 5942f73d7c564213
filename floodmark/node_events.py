"""Node events: what each broker and the controller say they did.

The client history shows what the outside world observed; node events show what happened
inside. Each node writes its own ``events/<node>.jsonl``, one event per line:

    node   the node's name ("n1", ...)
    seq    per-node sequence number from 0; orders this node's events
    wall   the node's own wall-clock time in seconds. Skewed under clock faults, so it is
           never used to order events of different nodes, only for display.
    kind   one of the kinds below
    ...    the kind's fields

Partitions are named by ``topic`` and ``partition``; brokers by integer id; leader epochs
and controller epochs are integers. The kinds, with their fields:

    became_leader     topic, partition, leader_epoch, isr, log_end, high_watermark
    became_follower   topic, partition, leader_epoch, leader, log_end
    appended          topic, partition, offset (first), epoch (the records' leader epoch),
                      values (list of value ids, one per record), role ("leader"|"follower")
    hw_changed        topic, partition, leader_epoch, role, previous, high_watermark, log_end
    truncated         topic, partition, leader_epoch, from_offset, to_offset,
                      reason ("leader_epoch"|"high_watermark"|"recovery"|"diverging_epoch")
    isr_changed       topic, partition, leader_epoch, isr, zk_version, change ("shrink"|"expand")
    fenced            why, and topic/partition/leader_epoch where they apply: the node stopped
                      acting on a stale view (lost a conditional ZooKeeper write, heartbeat
                      timeout, stale controller epoch)
    rejected          request, why, and topic/partition/leader_epoch where they apply: the node
                      refused a request (stale leader epoch, stale controller epoch, not leader)
    acked             topic, partition, offset (last acknowledged), high_watermark, acks:
                      the leader acknowledged a produce
    controller_elected  controller_epoch, broker
    controller_resigned controller_epoch, why
    leader_elected    topic, partition, leader, leader_epoch, isr, controller_epoch,
                      zk_version, unclean (bool): the controller chose a leader
    log_dir_offline   dir, error, partitions (list of [topic, partition])
    broker_state      broker, state ("Inactive"|"Active"|"Stopping"|"Fenced"|"Offline"),
                      incarnation, why: the controller's view of a broker ("Offline": its
                      registration went, so the controller now handles its failure)
    started / stopped  (no fields): the process started or shut down cleanly

Writers may add fields; readers ignore fields they do not know.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floodmark.errors import SourceError

try:
    import orjson
except ImportError:  # pragma: no cover - a broker image without orjson uses the standard library
    orjson = None  # type: ignore[assignment]

KINDS: frozenset[str] = frozenset(
    (
        "became_leader", "became_follower", "appended", "hw_changed", "truncated", "isr_changed",
        "fenced", "rejected", "acked", "controller_elected", "controller_resigned",
        "leader_elected", "log_dir_offline", "broker_state", "started", "stopped",
    )
)


class NodeEventError(SourceError):
    """A malformed event file: names the file, the line and the problem."""


@dataclass(frozen=True, slots=True)
class NodeEvent:
    node: str
    seq: int
    wall: float
    kind: str
    fields: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "seq": self.seq, "wall": self.wall, "kind": self.kind, **self.fields}


def event_from_dict(d: Any, source: str = "<events>", line: int = 0) -> NodeEvent:
    if not isinstance(d, dict):
        raise NodeEventError(source, line, "expected a JSON object")
    for name in ("node", "seq", "kind"):
        if name not in d:
            raise NodeEventError(source, line, f"missing field {name!r}")
    if not isinstance(d["seq"], int):
        raise NodeEventError(source, line, f"seq must be an integer, got {d['seq']!r}")
    rest = {k: v for k, v in d.items() if k not in ("node", "seq", "wall", "kind")}
    return NodeEvent(str(d["node"]), d["seq"], float(d.get("wall") or 0.0), str(d["kind"]), rest)


def iter_events(path: str | os.PathLike[str]) -> Iterator[NodeEvent]:
    """Read one node's event file. A torn last line (the node was killed) is ignored."""
    source = str(path)
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            d = json.loads(raw)
        except json.JSONDecodeError as e:
            if number == len(lines) and not raw.endswith("\n"):
                return
            raise NodeEventError(source, number, f"not valid JSON ({e.msg})") from None
        yield event_from_dict(d, source, number)


def read_events_dir(directory: str | os.PathLike[str]) -> dict[str, list[NodeEvent]]:
    """Read every ``<node>.jsonl`` in an events directory, keyed by node name."""
    result: dict[str, list[NodeEvent]] = {}
    d = Path(directory)
    if not d.is_dir():
        return result
    for path in sorted(d.glob("*.jsonl")):
        events = list(iter_events(path))
        result[path.stem] = sorted(events, key=lambda e: e.seq)
    return result


class NodeEventWriter:
    """Appends a node's events to its file, numbering them and stamping its wall time."""

    def __init__(self, path: str | os.PathLike[str], node: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.node = node
        self.seq = _next_seq(self.path)
        _drop_torn_tail(self.path)  # a crash may have left half a line; it was never an event
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def write(self, wall: float, kind: str, fields: dict[str, Any]) -> None:
        """One event, one ``write``: it reaches the OS at once and survives a kill -9. A
        failover writes tens of thousands, so it is encoded with orjson where installed."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the event writer is closed")
        record = {"node": self.node, "seq": self.seq, "wall": wall, "kind": kind, **fields}
        self.seq += 1
        try:
            if orjson is None:
                raise TypeError("orjson is not installed")
            line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # what orjson refuses (an integer beyond 64 bits), json writes
            line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view):]

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _next_seq(path: Path) -> int:
    """A restarted node continues its numbering after the last complete event."""
    if not path.exists():
        return 0
    last = -1
    try:
        for event in iter_events(path):
            last = max(last, event.seq)
    except NodeEventError:
        pass
    return last + 1



def _drop_torn_tail(path: Path) -> None:
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
