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

A witness op is shown on the anomaly's partition when it touches it; a witness on another
partition (a poll of a neighbour, a send the checker links to the anomaly) is shown among
the ops of its *own* partition, said so in the block's title, so every witness appears.

The first few anomalies of a type are rendered as HTML; the others are rendered by the
page's script from ``ContextTables``: each op and node event referenced by any of their
contexts is stored once, and each anomaly carries only indices into those tables.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field
from typing import Any

from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    Fenced,
    HwChanged,
    IsrChanged,
    LeaderElected,
    LogDirOffline,
    NodeEvent,
    Truncated,
    partition_of,
)
from floodmark.reports.run_data import (
    PartitionKey,
    RunData,
    op_partitions,
    partition_index,
    partition_label,
    short_json,
)

OPS_AROUND = 3  # ops of the same partition shown before and after a witness
MAX_OPS_INSIDE = 8  # ops shown while a witness was in flight, before eliding the middle
MAX_WITNESS_BLOCKS = 6
EVENTS_AROUND = 2
MAX_EVENTS_PER_NODE = 40
LEADERSHIP_KINDS = (BecameLeader, BecameFollower, LeaderElected, Truncated, IsrChanged, LogDirOffline, Fenced)
_SHORT_SPAN = 64  # offset spans up to this long are found by bisection, longer ones by a scan


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
    partition: str = "—"  # the partition whose ops are shown ("—": plain history neighbours)
    elsewhere: bool = False  # the witness is not on the anomaly's partition; its own is shown


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
    """Builds contexts for many anomalies of one run, indexing the history and events once."""

    def __init__(self, data: RunData) -> None:
        self.data = data
        self._by_partition: dict[PartitionKey, list[int]] | None = None
        self._lanes: dict[tuple[str, PartitionKey | None], _EventLane] = {}

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
            context.witnesses.append(self._witness_block(witness, key, set(witnesses)))
        if key is not None or anomaly.get("events"):
            context.nodes = self._event_context(anomaly, key)
        return context

    def _witness_block(self, witness: int, key: PartitionKey | None, witnesses: set[int]) -> WitnessContext:
        """The witness's op pair among the ops of the partition it was on, the anomaly's if it touches it."""
        history = self.data.history
        invoke, completion = self.data.pair(witness)
        last = completion if completion is not None else invoke
        own: list[PartitionKey] = []
        for i in (invoke, last):
            own += [k for k in op_partitions(history[i]) if k not in own]
        if key is not None and (key in own or not own):
            lane_key: PartitionKey | None = key
        else:
            lane_key = own[0] if own else None
        lane: list[int] | range = range(len(history))  # no partition: plain history neighbours
        if lane_key is not None and lane_key in self.partition_ops():
            lane = self.partition_ops()[lane_key]
        for i in (invoke, last):  # the witness is always shown, even if its value names no partition
            at = bisect_left(lane, i)
            if at == len(lane) or lane[at] != i:
                lane = list(lane)
                insort(lane, i)
        rows = self._op_rows(lane, invoke, last, witnesses | {invoke, last})
        label = "—" if lane_key is None else partition_label(*lane_key)
        return WitnessContext(witness, rows, label, key is not None and lane_key != key)

    def _op_rows(self, lane: list[int] | range, invoke: int, last: int, highlighted: set[int]) -> list[OpRow | Gap]:
        lo = bisect_left(lane, invoke)
        hi = bisect_left(lane, last)
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

    def _lane(self, node: str, key: PartitionKey | None) -> _EventLane:
        lane = self._lanes.get((node, key))
        if lane is None:
            events = self.data.events.get(node, [])
            lane = _EventLane([e for e in events if key is None or partition_of(e.body) == key])
            self._lanes[(node, key)] = lane
        return lane

    def _event_context(self, anomaly: dict[str, Any], key: PartitionKey | None) -> list[NodeContext]:
        named: dict[str, set[int]] = {}
        for ref in anomaly.get("events") or []:
            if isinstance(ref, list | tuple) and len(ref) == 2 and isinstance(ref[1], int):
                named.setdefault(str(ref[0]), set()).add(ref[1])
        offsets = set(_int_list(anomaly.get("offsets")))
        nodes: list[NodeContext] = []
        for node, events in sorted(self.data.events.items()):
            named_here = named.get(node, set())
            lane = self._lane(node, key)
            if named_here - lane.seq_set:  # named events of another partition join this one's
                lane = _EventLane(sorted([*lane.events, *(e for e in events if e.seq in named_here - lane.seq_set)],
                                         key=lambda e: e.seq))
            relevant = lane.events
            named_positions = [p for p, e in enumerate(relevant) if e.seq in named_here] if named_here else []
            touching = lane.touching(offsets)
            chosen = set(lane.around_leadership)
            for position in (*named_positions, *touching):
                chosen.update(range(max(0, position - EVENTS_AROUND), position + EVENTS_AROUND + 1))
            positions = sorted(p for p in chosen if p < len(relevant))
            if not positions:
                continue
            omitted = max(0, len(positions) - MAX_EVENTS_PER_NODE)
            if omitted:  # keep the named events, those about the offsets and those nearest them
                positions = _keep_nearest(positions, named_positions or sorted(touching), MAX_EVENTS_PER_NODE)
            rows: list[EventRow | Gap] = []
            previous = None
            for p in positions:
                if previous is not None and p > previous + 1:
                    rows.append(Gap(p - previous - 1, relevant[previous + 1].seq, relevant[p - 1].seq))
                e = relevant[p]
                rows.append(EventRow(e.seq, e.wall, e.kind, event_summary(e), e.seq in named_here))
                previous = p
            nodes.append(NodeContext(node, rows, omitted))
        return nodes


class _EventLane:
    """One node's events about one partition, indexed for the questions a context asks."""

    def __init__(self, events: list[NodeEvent]) -> None:
        self.events = events
        self.seq_set = {e.seq for e in events}
        around: set[int] = set()
        spans: list[tuple[int, int, int]] = []
        self.long_spans: list[tuple[int, int, int]] = []
        for position, event in enumerate(events):
            if isinstance(event.body, LEADERSHIP_KINDS):
                around.update(range(max(0, position - EVENTS_AROUND), position + EVENTS_AROUND + 1))
            span = _offset_span(event)
            if span is not None and span[1] > span[0]:
                (spans if span[1] - span[0] <= _SHORT_SPAN else self.long_spans).append((*span, position))
        self.around_leadership = frozenset(around)
        spans.sort()
        self.spans = spans
        self.span_starts = [lo for lo, _, _ in spans]

    def touching(self, offsets: set[int]) -> set[int]:
        """Positions of the events whose offset span holds one of ``offsets``."""
        found: set[int] = set()
        for o in offsets:
            j = bisect_right(self.span_starts, o) - 1
            while j >= 0 and self.spans[j][0] > o - _SHORT_SPAN:
                if self.spans[j][1] > o:
                    found.add(self.spans[j][2])
                j -= 1
            found.update(p for lo, hi, p in self.long_spans if lo <= o < hi)
        return found


def _offset_span(event: NodeEvent) -> tuple[int, int] | None:
    """The offsets ``[lo, hi)`` an event is about: appended, truncated, HW moved over, acked."""
    body = event.body
    if isinstance(body, Appended):
        return body.offset, body.offset + max(1, len(body.values))
    if isinstance(body, Truncated):
        return body.to_offset, body.from_offset
    if isinstance(body, HwChanged):
        return min(body.previous, body.high_watermark), max(body.previous, body.high_watermark)
    if isinstance(body, Acked):
        return body.offset, body.offset + 1
    return None


def _keep_nearest(positions: list[int], anchors: list[int], limit: int) -> list[int]:
    anchors = anchors or [positions[-1]]
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


_SUMMARY_SKIP = frozenset(("topic", "partition"))


def event_summary(event: NodeEvent) -> str:
    """The event's fields as ``name=value`` pairs, partition fields left out (shown elsewhere)."""
    parts = []
    for name, value in event.fields().items():
        if name in _SUMMARY_SKIP:
            continue
        if name == "values" and isinstance(value, list | tuple):
            parts.append(f"values=[{len(value)}: {short_json(value, 60)}]")
        else:
            parts.append(f"{name}={short_json(value, 80)}")
    return " ".join(parts)


class ContextTables:
    """The ops and node events that the script-rendered contexts refer to, each stored once.

    ``payload`` turns a context into plain JSON data that names ops by history index and
    events by (node, seq); ``tables`` is what those names resolve to. Neighbouring anomalies
    share most of their ops and events, so this keeps a page of a thousand contexts small.
    """

    def __init__(self) -> None:
        self.ops: dict[int, list[Any]] = {}
        self.events: dict[str, dict[int, list[Any]]] = {}

    def payload(self, context: AnomalyContext) -> dict[str, Any]:
        witnesses = []
        for block in context.witnesses:
            for row in block.rows:
                if isinstance(row, OpRow):
                    self.ops.setdefault(row.index, [round(row.time_s, 6), row.process, row.type, row.f,
                                                    row.value, row.node, row.error])
            witnesses.append({"witness": block.witness, "partition": block.partition, "elsewhere": block.elsewhere,
                              "rows": [_script_row(r) for r in block.rows],
                              "highlight": [r.index for r in block.rows if isinstance(r, OpRow) and r.witness]})
        nodes = []
        for node in context.nodes:
            table = self.events.setdefault(node.node, {})
            for event in node.rows:
                if isinstance(event, EventRow):
                    table.setdefault(event.seq, [event.kind, event.summary])
            nodes.append({"node": node.node, "rows": [_script_row(e) for e in node.rows], "omitted": node.omitted,
                          "named": [e.seq for e in node.rows if isinstance(e, EventRow) and e.named]})
        return {"witnesses": witnesses, "not_shown": context.witnesses_not_shown, "nodes": nodes}

    def tables(self) -> dict[str, Any]:
        return {"ops": self.ops, "events": self.events}


def _script_row(row: OpRow | EventRow | Gap) -> Any:
    """A row as the page's script reads it: an op by its history index, an event by its
    sequence number, a gap as [count, first index, last index]."""
    if isinstance(row, Gap):
        return [row.count, row.first_index, row.last_index]
    return row.index if isinstance(row, OpRow) else row.seq
