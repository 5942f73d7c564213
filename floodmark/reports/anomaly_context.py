"""The context of an anomaly: the ops around its witnesses and what the nodes said.

A checker names the ops that witness an anomaly; on their own they rarely explain it. The
engineer needs the ops *around* them on the same partition (the send just before the lost
one, the poll that skipped it) and what the brokers recorded about that partition at the
time (who led, in which epoch, when the HW moved, what got truncated).

Two orders exist and are never mixed. Ops are ordered by history index, which follows the
harness's one monotonic clock. Node events are ordered per node by that node's ``seq``;
their wall times are skewed under clock faults, so events of different nodes are shown in
separate columns and never interleaved. Within a node the events chosen are those the
anomaly names, those touching its offsets, and the partition's leadership changes
(elections, epoch changes, ISR changes, truncations), each with a few neighbours.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from floodmark.node_events import NodeEvent
from floodmark.reports.run_data import (
    PartitionKey,
    RunData,
    op_partitions,
    partition_index,
    short_json,
)

OPS_AROUND = 3  # ops of the same partition shown before and after a witness
MAX_OPS_INSIDE = 8  # ops shown while a witness was in flight, before eliding the middle
MAX_WITNESS_BLOCKS = 6
EVENTS_AROUND = 2
MAX_EVENTS_PER_NODE = 40
LEADERSHIP_KINDS = frozenset(("became_leader", "became_follower", "leader_elected", "truncated",
                              "isr_changed", "log_dir_offline", "fenced"))


@dataclass(frozen=True)
class OpRow:
    index: int
    time_s: float
    process: Any
    type: str
    f: str
    value: str
    node: str | None
    error: str | None
    witness: bool


@dataclass(frozen=True)
class Gap:
    """Ops left out of a context window, said out loud."""

    count: int
    first_index: int
    last_index: int


@dataclass
class WitnessContext:
    witness: int
    rows: list[OpRow | Gap]


@dataclass(frozen=True)
class EventRow:
    seq: int
    wall: float
    kind: str
    summary: str
    named: bool  # the anomaly names this event


@dataclass
class NodeContext:
    node: str
    rows: list[EventRow | Gap]
    omitted: int = 0


@dataclass
class AnomalyContext:
    witnesses: list[WitnessContext] = field(default_factory=list)
    witnesses_not_shown: list[int] = field(default_factory=list)
    nodes: list[NodeContext] = field(default_factory=list)


class ContextBuilder:
    """Builds contexts for many anomalies of one run, indexing the history once."""

    def __init__(self, data: RunData) -> None:
        self.data = data
        self._by_partition: dict[PartitionKey, list[int]] | None = None

    def partition_ops(self) -> dict[PartitionKey, list[int]]:
        if self._by_partition is None:
            self._by_partition = partition_index(self.data.history)
        return self._by_partition

    def build(self, anomaly: dict[str, Any]) -> AnomalyContext:
        context = AnomalyContext()
        witnesses = [i for i in _int_list(anomaly.get("ops")) if 0 <= i < len(self.data.history)]
        key = _partition_key(anomaly)
        seen_pairs: set[int] = set()
        for witness in witnesses:
            invoke, _ = self.data.pair(witness)
            if invoke in seen_pairs:
                continue
            seen_pairs.add(invoke)
            if len(context.witnesses) >= MAX_WITNESS_BLOCKS:
                context.witnesses_not_shown.append(witness)
                continue
            context.witnesses.append(WitnessContext(witness, self._op_rows(witness, key, set(witnesses))))
        if key is not None or anomaly.get("events"):
            context.nodes = self._event_context(anomaly, key)
        return context

    def _op_rows(self, witness: int, key: PartitionKey | None, witnesses: set[int]) -> list[OpRow | Gap]:
        history = self.data.history
        invoke, completion = self.data.pair(witness)
        last = completion if completion is not None else invoke
        op = history[witness]
        keys = op_partitions(op) if key is None else [key]
        if keys and keys[0] in self.partition_ops():
            lane = self.partition_ops()[keys[0]]
        else:
            lane = list(range(len(history)))  # no partition: plain history neighbours
        lo = bisect_left(lane, invoke)
        hi = bisect_left(lane, last)
        highlighted = witnesses | {invoke, last}
        picked: list[int | Gap] = list(lane[max(0, lo - OPS_AROUND): lo])
        inside = lane[lo: hi + 1]
        if len(inside) > MAX_OPS_INSIDE:
            half = MAX_OPS_INSIDE // 2
            middle = inside[half:-half]
            picked += [*inside[:half], Gap(len(middle), middle[0], middle[-1]), *inside[-half:]]
        else:
            picked += inside
        picked += lane[hi + 1: hi + 1 + OPS_AROUND]
        rows: list[OpRow | Gap] = []
        for item in picked:
            rows.append(item if isinstance(item, Gap) else self._row(item, item in highlighted))
        return rows

    def _row(self, index: int, witness: bool) -> OpRow:
        op = self.data.history[index]
        return OpRow(op.index, op.time / 1e9, op.process, op.type, op.f, short_json(op.value, 300),
                     op.node, None if op.error is None else short_json(op.error, 160), witness)

    def _event_context(self, anomaly: dict[str, Any], key: PartitionKey | None) -> list[NodeContext]:
        named: dict[str, set[int]] = {}
        for ref in anomaly.get("events") or []:
            if isinstance(ref, list | tuple) and len(ref) == 2 and isinstance(ref[1], int):
                named.setdefault(str(ref[0]), set()).add(ref[1])
        offsets = set(_int_list(anomaly.get("offsets")))
        nodes: list[NodeContext] = []
        for node, events in sorted(self.data.events.items()):
            relevant = [e for e in events if key is None or _event_partition(e) == key or e.seq in named.get(node, ())]
            chosen: set[int] = set()
            for position, event in enumerate(relevant):
                if event.seq in named.get(node, ()) or event.kind in LEADERSHIP_KINDS or _touches(event, offsets):
                    chosen.update(range(max(0, position - EVENTS_AROUND), position + EVENTS_AROUND + 1))
            positions = sorted(p for p in chosen if p < len(relevant))
            if not positions:
                continue
            omitted = max(0, len(positions) - MAX_EVENTS_PER_NODE)
            if omitted:  # keep the named events and those nearest them
                positions = _keep_nearest(positions, relevant, named.get(node, set()), MAX_EVENTS_PER_NODE)
            rows: list[EventRow | Gap] = []
            previous = None
            for p in positions:
                if previous is not None and p > previous + 1:
                    rows.append(Gap(p - previous - 1, relevant[previous + 1].seq, relevant[p - 1].seq))
                e = relevant[p]
                rows.append(EventRow(e.seq, e.wall, e.kind, event_summary(e), e.seq in named.get(node, ())))
                previous = p
            nodes.append(NodeContext(node, rows, omitted))
        return nodes


def _keep_nearest(positions: list[int], relevant: list[NodeEvent], named: set[int], limit: int) -> list[int]:
    anchors = [p for p in positions if relevant[p].seq in named] or [positions[-1]]
    ranked = sorted(positions, key=lambda p: (min(abs(p - a) for a in anchors), p))
    return sorted(ranked[:limit])


def _int_list(value: Any) -> list[int]:
    if not isinstance(value, list | tuple):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]


def _partition_key(anomaly: dict[str, Any]) -> PartitionKey | None:
    topic, partition = anomaly.get("topic"), anomaly.get("partition")
    if isinstance(topic, str) and isinstance(partition, int) and not isinstance(partition, bool):
        return topic, partition
    return None


def _event_partition(event: NodeEvent) -> PartitionKey | None:
    topic, partition = event.get("topic"), event.get("partition")
    if isinstance(topic, str) and isinstance(partition, int):
        return topic, partition
    return None


def _touches(event: NodeEvent, offsets: set[int]) -> bool:
    """Whether an event is about one of the anomaly's offsets."""
    if not offsets:
        return False
    kind = event.kind
    if kind == "appended":
        first = event.get("offset")
        values = event.get("values") or []
        return isinstance(first, int) and any(first <= o < first + max(1, len(values)) for o in offsets)
    if kind == "truncated":
        lo, hi = event.get("to_offset"), event.get("from_offset")
        return isinstance(lo, int) and isinstance(hi, int) and any(lo <= o < hi for o in offsets)
    if kind == "hw_changed":
        a, b = event.get("previous"), event.get("high_watermark")
        if isinstance(a, int) and isinstance(b, int):
            lo, hi = min(a, b), max(a, b)
            return any(lo <= o < hi for o in offsets)
    if kind == "acked":
        return event.get("offset") in offsets
    return False


_SUMMARY_SKIP = frozenset(("topic", "partition"))


def event_summary(event: NodeEvent) -> str:
    """The event's fields as ``name=value`` pairs, partition fields left out (shown elsewhere)."""
    parts = []
    for name, value in event.fields.items():
        if name in _SUMMARY_SKIP:
            continue
        if name == "values" and isinstance(value, list):
            parts.append(f"values=[{len(value)}: {short_json(value, 60)}]")
        else:
            parts.append(f"{name}={short_json(value, 80)}")
    return " ".join(parts)
