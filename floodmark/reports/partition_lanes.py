"""The per-partition lane chart: who led, in which epoch, with what ISR and HW.

Node clocks are skewed under clock faults, so node events of different brokers cannot be
placed on one time axis. A partition has its own logical clock, though: the *leader epoch*,
which only the controller advances and every broker learns. The chart therefore has one
column per leader epoch, and one lane per broker (plus a lane for the controller's
decisions). In each cell it shows what that broker recorded in that epoch, in its own
``seq`` order:

- its role (leader, follower) and its log end at the end of the epoch;
- the HW it reported, as a small step line from the epoch's first to last HW, scaled to
  the partition's largest HW, with the first and last values written out;
- the ISR sizes the leader wrote (ISR shrink/expand), truncations (red, from → to),
  fenced or rejected requests (counted), and whether its log directory went offline.

Events without a leader epoch field (appends, acks, log directory failures), and refusals
(whose epoch is the stale one of the refused request), belong to the epoch the broker last
entered for that partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from floodmark.contracts.node_events import (
    Appended,
    BecameFollower,
    BecameLeader,
    Fenced,
    HwChanged,
    IsrChanged,
    IsrWritten,
    KnownKind,
    LeaderElected,
    LogDirOffline,
    NodeEvent,
    Rejected,
    Truncated,
    UnknownKind,
    leader_epoch_of,
    partition_of,
)
from floodmark.reports.run_data import PartitionKey

CELL_WIDTH = 150
LANE_HEIGHT = 46
LEFT = 86
TOP = 24


@dataclass
class Cell:
    role: str | None = None
    high_watermarks: list[int] = field(default_factory=list)
    log_end: int | None = None
    isr_sizes: list[int] = field(default_factory=list)
    truncations: list[tuple[int, int, str]] = field(default_factory=list)
    refusals: int = 0
    offline: bool = False
    appended: int = 0


@dataclass
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool
    controller_epoch: int


@dataclass
class PartitionLanes:
    key: PartitionKey
    epochs: list[int]
    nodes: list[str]
    cells: dict[tuple[str, int], Cell]
    elections: dict[int, list[Election]]
    max_high_watermark: int

    @property
    def label(self) -> str:
        return f"{self.key[0]}/{self.key[1]}"


def build_partition_lanes(events: dict[str, list[NodeEvent]]) -> list[PartitionLanes]:
    cells: dict[PartitionKey, dict[tuple[str, int], Cell]] = {}
    elections: dict[PartitionKey, dict[int, list[Election]]] = {}
    epochs: dict[PartitionKey, set[int]] = {}
    for node, node_events in sorted(events.items()):
        current_epoch: dict[PartitionKey, int] = {}
        for e in node_events:  # already in seq order
            body = e.body
            if isinstance(body, LogDirOffline):  # its partitions' replicas went with it
                for lost in body.partitions:
                    if lost in current_epoch:
                        cells.setdefault(lost, {}).setdefault((node, current_epoch[lost]), Cell()).offline = True
                continue
            key = partition_of(body)
            if key is None:
                continue
            epoch = leader_epoch_of(body)
            if isinstance(body, LeaderElected):
                elections.setdefault(key, {}).setdefault(body.leader_epoch, []).append(
                    Election(body.leader, body.isr, body.unclean, body.controller_epoch))
                epochs.setdefault(key, set()).add(body.leader_epoch)
                continue
            if isinstance(body, IsrWritten):
                continue  # the controller's write: its leader's lane shows the ISR it learns
            if isinstance(body, BecameLeader | BecameFollower):
                current_epoch[key] = body.leader_epoch
            # A refusal names the *request's* (stale) epoch; it happened in the node's current one.
            if epoch is None or (isinstance(body, Fenced | Rejected) and key in current_epoch):
                epoch = current_epoch.get(key, epoch)
            if epoch is None:
                continue
            epochs.setdefault(key, set()).add(epoch)
            cell = cells.setdefault(key, {}).setdefault((node, epoch), Cell())
            _apply(cell, body)
    result = []
    for key in sorted(epochs):
        node_cells = cells.get(key, {})
        max_hw = max((max(c.high_watermarks) for c in node_cells.values() if c.high_watermarks), default=0)
        result.append(PartitionLanes(key, sorted(epochs[key]), sorted(events), node_cells,
                                     elections.get(key, {}), max_hw))
    return result


def _apply(cell: Cell, body: KnownKind | UnknownKind) -> None:
    if isinstance(body, BecameLeader):
        cell.role = "leader"
        cell.isr_sizes.append(len(body.isr))
        cell.high_watermarks.append(body.high_watermark)
        cell.log_end = body.log_end
    elif isinstance(body, BecameFollower):
        cell.role = cell.role or "follower"
        cell.log_end = body.log_end
    elif isinstance(body, HwChanged):
        cell.high_watermarks.append(body.high_watermark)
        cell.log_end = body.log_end
    elif isinstance(body, IsrChanged):
        cell.isr_sizes.append(len(body.isr))
    elif isinstance(body, Truncated):
        cell.truncations.append((body.from_offset, body.to_offset, body.reason))
        cell.log_end = body.to_offset
    elif isinstance(body, Appended):
        cell.appended += 1
        cell.log_end = max(cell.log_end or 0, body.offset + len(body.values))
    elif isinstance(body, Fenced | Rejected):
        cell.refusals += 1


def render_partition_lanes(lanes: PartitionLanes) -> str:
    """One partition's chart as inline SVG."""
    columns = {epoch: k for k, epoch in enumerate(lanes.epochs)}
    rows = ["controller", *lanes.nodes]
    width = LEFT + len(columns) * CELL_WIDTH + 4
    height = TOP + len(rows) * LANE_HEIGHT + 4
    out = [f'<svg class="lanes" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img">']
    for epoch, k in columns.items():
        x = LEFT + k * CELL_WIDTH
        out.append(f'<text class="epoch" x="{x + 4}" y="16">epoch {epoch}</text>'
                   f'<line class="epoch-rule" x1="{x}" x2="{x}" y1="{TOP - 4}" y2="{height}"/>')
    for r, name in enumerate(rows):
        y = TOP + r * LANE_HEIGHT
        out.append(f'<text class="lane-label" x="6" y="{y + 26}">{escape(name)}</text>')
        out.append(f'<line class="lane-rule" x1="0" x2="{width}" y1="{y}" y2="{y}"/>')
    for epoch, k in columns.items():
        x = LEFT + k * CELL_WIDTH
        for election in lanes.elections.get(epoch, []):
            isr = ",".join(escape(str(b)) for b in election.isr)
            cls = "election unclean" if election.unclean else "election"
            out.append(f'<text class="{cls}" x="{x + 4}" y="{TOP + 18}">leader {escape(str(election.leader))}'
                       f' ISR [{isr}]{" UNCLEAN" if election.unclean else ""}</text>'
                       f'<text class="cell-note" x="{x + 4}" y="{TOP + 34}">controller epoch '
                       f'{escape(str(election.controller_epoch))}</text>')
        for r, node in enumerate(lanes.nodes, start=1):
            cell = lanes.cells.get((node, epoch))
            if cell is not None:
                out.append(_cell_svg(cell, x, TOP + r * LANE_HEIGHT, lanes.max_high_watermark, node, epoch))
    out.append("</svg>")
    return "".join(out)


def _cell_svg(cell: Cell, x: int, y: int, max_hw: int, node: str, epoch: int) -> str:
    role = cell.role or "replica"
    parts = [f'<g class="cell {role}"><title>{escape(_cell_title(cell, node, epoch))}</title>'
             f'<rect x="{x + 2}" y="{y + 3}" width="{CELL_WIDTH - 4}" height="{LANE_HEIGHT - 6}" rx="3"/>']
    hws = cell.high_watermarks
    line = hws if len(hws) <= 64 else [hws[k * (len(hws) - 1) // 63] for k in range(64)]
    head = "L" if role == "leader" else "F" if role == "follower" else "·"
    isr = f" ISR {'→'.join(map(str, cell.isr_sizes))}" if cell.isr_sizes else ""
    hw_text = f" HW {hws[0]}→{hws[-1]}" if len(hws) > 1 else f" HW {hws[0]}" if hws else ""
    parts.append(f'<text class="cell-text" x="{x + 6}" y="{y + 16}">{head}{hw_text}{isr}</text>')
    if hws and max_hw > 0:  # HW sparkline across the cell, scaled to the partition's max HW
        span = CELL_WIDTH - 14
        step = span / max(1, len(line) - 1)
        points = " ".join(f"{x + 7 + k * step:.1f},{y + LANE_HEIGHT - 7 - 14 * h / max_hw:.1f}"
                          for k, h in enumerate(line))
        parts.append(f'<polyline class="hw-line" points="{points}"/>')
    notes = []
    for frm, to, _reason in cell.truncations:
        notes.append(f"✂{escape(str(frm))}→{escape(str(to))}")
    if cell.refusals:
        notes.append(f"rejected×{cell.refusals}")
    if cell.offline:
        notes.append("dir offline")
    if notes:
        parts.append(f'<text class="cell-alert" x="{x + CELL_WIDTH - 6}" y="{y + 30}" text-anchor="end">'
                     f'{" ".join(notes)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _cell_title(cell: Cell, node: str, epoch: int) -> str:
    lines = [f"{node} in leader epoch {epoch}: {cell.role or 'no role recorded'}"]
    if cell.high_watermarks:
        lines.append("HW: " + " → ".join(map(str, cell.high_watermarks[:40]))
                     + (" …" if len(cell.high_watermarks) > 40 else ""))
    if cell.log_end is not None:
        lines.append(f"log end: {cell.log_end}")
    if cell.isr_sizes:
        lines.append("ISR sizes: " + " → ".join(map(str, cell.isr_sizes)))
    for frm, to, reason in cell.truncations:
        lines.append(f"truncated {frm} → {to} ({reason})")
    if cell.appended:
        lines.append(f"{cell.appended} append events")
    if cell.refusals:
        lines.append(f"{cell.refusals} fenced/rejected")
    return "\n".join(lines)
