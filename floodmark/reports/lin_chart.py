"""The linearizability failure chart, after Porcupine's visualization.

When the linearizability checker finds no linearization of one partition's ops, it reports
how far the search got: the *longest partial linearizations* (ops in the order the search
linearized them, with the model state after each) and the ops that could not be linearized
next. This module draws that as Porcupine does:

- one lane per process; each op is a bar from its invocation to its completion (an op
  that never completed runs to the right edge, hatched);
- the x axis is the *order* of invocations and completions, not wall time, so that a burst
  of concurrent ops stays legible (the order is all linearizability depends on);
- ops of the partial linearization are green and numbered, joined by a line through their
  linearization points (each placed as early as possible inside its bar, after the previous
  one); ops that could not be linearized next are red; other ops are grey;
- hovering a bar shows the op and the model state after it.

The chart is hand-written SVG (every string from the history escaped) because it needs
exact control over lanes and labels. The anomaly fields read are described in
``parse_lin_failure``; unknown shapes degrade to the witness ops alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from floodmark.contracts.history import Op
from floodmark.reports.run_data import PartitionKey, RunData, partition_index, short_json

MAX_PATHS = 3
CONTEXT_STEPS = 16  # linearized ops shown before the point of failure
MAX_OPS = 160
LANE_HEIGHT = 34
COLUMN = 34  # px per invocation/completion event on the ordinal axis
LEFT = 90
TOP = 30

_NEXT_KEYS = ("stuck", "next", "not_linearizable", "unlinearizable", "could_not_linearize", "next_ops")
_PATH_KEYS = ("ops", "linearized", "order", "path", "linearization")


@dataclass(frozen=True)
class Step:
    op: int  # invocation index
    state: Any


@dataclass(frozen=True)
class PartialLinearization:
    steps: tuple[Step, ...]
    stuck: tuple[int, ...]  # invocation indices that could not be linearized next


@dataclass(frozen=True)
class LinChart:
    title: str
    svg: str
    shown_ops: int
    omitted_ops: int


def is_lin_failure(anomaly: dict[str, Any]) -> bool:
    return isinstance(anomaly.get("partial_linearizations"), list)


def parse_lin_failure(data: RunData, anomaly: dict[str, Any]) -> list[PartialLinearization]:
    """Read ``partial_linearizations`` and the stuck ops, mapping every index to its invocation.

    A path is a list of steps (an int, ``{"op"|"index": i, "state": s}`` or ``[i, s]``), or a
    dict holding such a list under ``ops``/``linearized``/... with its own ``next``/``stuck``.
    The stuck ops come from the path, else the anomaly's ``stuck``/``next``/..., else its
    witness ``ops`` that the path did not linearize.
    """
    n = len(data.history)

    def invocation(index: Any) -> int | None:
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < n:
            return data.pair(index)[0]
        return None

    def step(raw: Any) -> Step | None:
        if isinstance(raw, dict):
            raw_index = next((raw[k] for k in ("op", "index", "invoke") if k in raw), None)
            index, state = invocation(raw_index), raw.get("state", raw.get("model"))
        elif isinstance(raw, list | tuple) and raw:
            index, state = invocation(raw[0]), (raw[1] if len(raw) > 1 else None)
        else:
            index, state = invocation(raw), None
        return None if index is None else Step(index, state)

    def indices(raw: Any) -> list[int]:
        found = [invocation(i) for i in raw] if isinstance(raw, list) else []
        return [i for i in found if i is not None]

    anomaly_next = next((indices(anomaly[k]) for k in _NEXT_KEYS if k in anomaly), None)
    paths: list[PartialLinearization] = []
    for raw_path in anomaly.get("partial_linearizations") or []:
        path_next = None
        raw_steps = raw_path
        if isinstance(raw_path, dict):
            raw_steps = next((raw_path[k] for k in _PATH_KEYS if k in raw_path), [])
            path_next = next((indices(raw_path[k]) for k in _NEXT_KEYS if k in raw_path), None)
        steps = tuple(s for s in (step(r) for r in (raw_steps if isinstance(raw_steps, list) else [])) if s)
        stuck = path_next if path_next is not None else anomaly_next
        if stuck is None:
            linearized = {s.op for s in steps}
            stuck = [i for i in indices(anomaly.get("ops")) if i not in linearized]
        paths.append(PartialLinearization(steps, tuple(dict.fromkeys(stuck))))
    paths.sort(key=lambda p: -len(p.steps))
    return paths[:MAX_PATHS]


def lin_charts(data: RunData, anomaly: dict[str, Any],
               by_partition: dict[PartitionKey, list[int]] | None = None) -> list[LinChart]:
    paths = parse_lin_failure(data, anomaly)
    if not paths:
        return []
    topic, partition = anomaly.get("topic"), anomaly.get("partition")
    key = (topic, partition) if isinstance(topic, str) and isinstance(partition, int) else None
    if by_partition is None:
        by_partition = partition_index(data.history)
    types = data.history.type
    object_ops = [i for i in by_partition.get(key, []) if types[i] == "invoke"] if key else []
    charts = []
    for number, path in enumerate(paths, start=1):
        svg, shown, omitted = _draw(data, path, object_ops)
        title = (f"Partial linearization {number} of {len(paths)}: {len(path.steps)} ops linearized, "
                 f"{len(path.stuck)} could not be linearized next")
        charts.append(LinChart(title, svg, shown, omitted))
    return charts


def _window(data: RunData, path: PartialLinearization, object_ops: list[int]) -> tuple[list[int], int]:
    """The invocations to draw: the failure point, the last linearized steps, and overlaps."""
    focus = list(path.stuck) + [s.op for s in path.steps[-CONTEXT_STEPS:]]
    if not focus:
        return [], 0
    history = data.history
    start = min(history.time[i] for i in focus)
    end = max(_end_time(data, i) for i in focus)
    candidates = set(object_ops) | set(focus)
    chosen = sorted(i for i in candidates if history.time[i] <= end and _end_time(data, i) >= start)
    omitted = 0
    if len(chosen) > MAX_OPS:  # keep the ops nearest the failure (the latest ones)
        keep = set(focus)
        rest = [i for i in chosen if i not in keep]
        allowed = max(0, MAX_OPS - len(keep))
        dropped = rest[: len(rest) - allowed]
        omitted = len(dropped)
        chosen = sorted(keep | set(rest[len(rest) - allowed:]))
    return chosen, omitted


def _fit(label: str, room_px: float) -> str:
    chars = int(room_px / 6.6)
    return label if len(label) <= chars else label[: max(1, chars - 1)] + "…"


def _end_time(data: RunData, invoke: int) -> int:
    completion = data.completion_of.get(invoke)
    if completion is None or data.history.type[completion] == "info":
        return data.history.end_time
    return data.history.time[completion]


def _describe(data: RunData, invoke: int) -> str:
    """A short label: ``append 3-17 → @41``, ``read @41 → 3-17``, else f and value."""
    op: Op = data.history[invoke]
    completion = data.completion_of.get(invoke)
    done = data.history[completion] if completion is not None else None
    result = done.value if done is not None and done.type == "ok" else None
    value = op.value
    if isinstance(value, dict) and ("offset" in value or "value" in value):
        if "offset" in value:  # a read at an offset
            text = f"{op.f} @{short_json(value.get('offset'), 12)}"
            if isinstance(result, dict):
                text += f" → {short_json(result.get('value'), 30)}"
        else:
            text = f"{op.f} {short_json(value.get('value'), 30)}"
            if isinstance(result, dict) and "offset" in result:
                text += f" → @{short_json(result.get('offset'), 12)}"
    else:
        text = f"{op.f} {short_json(value, 40)}"
        if result is not None:
            text += " → " + short_json(result, 40)
    if done is None:
        text += " (pending)"
    elif done.type != "ok":
        text += f" ({done.type})"
    return text


def _draw(data: RunData, path: PartialLinearization, object_ops: list[int]) -> tuple[str, int, int]:
    ops, omitted = _window(data, path, object_ops)
    history = data.history
    # The ordinal axis: every invocation and determinate completion gets a column.
    points: list[tuple[int, int, int]] = []  # (time, kind 0=completion 1=invoke, index)
    for i in ops:
        points.append((history[i].time, 1, i))
        completion = data.completion_of.get(i)
        if completion is not None and history[completion].type != "info":
            points.append((history[completion].time, 0, completion))
    points.sort()
    column = {index: k for k, (_, _, index) in enumerate(points)}
    end_column = len(points)
    processes = sorted({history[i].process for i in ops}, key=lambda p: (isinstance(p, str), str(p) if isinstance(p, str) else p))
    lane = {p: k for k, p in enumerate(processes)}
    order = {s.op: k for k, s in enumerate(path.steps)}
    state_after = {s.op: s.state for s in path.steps}
    stuck = set(path.stuck)
    width = LEFT + (end_column + 1) * COLUMN + 170  # room for the last labels
    height = TOP + len(processes) * LANE_HEIGHT + 30
    parts = [f'<svg class="lin-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img">',
             '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
             'patternTransform="rotate(45)"><rect width="3" height="6" fill="rgba(0,0,0,0.12)"/></pattern></defs>']
    for p, k in lane.items():
        y = TOP + k * LANE_HEIGHT
        parts.append(f'<rect x="0" y="{y}" width="{width}" height="{LANE_HEIGHT}" fill="{"#f7f8fa" if k % 2 else "#fff"}"/>')
        parts.append(f'<text x="6" y="{y + 19}" class="lane-label">process {escape(str(p))}</text>')

    def x_of(col: float) -> float:
        return LEFT + col * COLUMN + COLUMN / 2

    # A label may run past its bar up to the next bar in the same lane.
    next_start: dict[int, float] = {}
    by_lane: dict[int, list[int]] = {}
    for i in ops:
        by_lane.setdefault(lane[history[i].process], []).append(i)
    for members in by_lane.values():
        for a, b in zip(members, members[1:]):
            next_start[a] = x_of(column[b])
    bars = []
    for i in ops:
        x0 = x_of(column[i])
        completion = data.completion_of.get(i)
        pending = completion is None or history[completion].type == "info"
        x1 = x_of(end_column) if pending else x_of(column[completion])  # type: ignore[index]
        y = TOP + lane[history[i].process] * LANE_HEIGHT + 5
        if i in stuck:
            cls = "op stuck"
        elif i in order:
            cls = "op linearized"
        else:
            cls = "op other"
        label = _describe(data, i)
        room = max(x1 - x0, next_start.get(i, width - 8) - x0) - 8
        tooltip = f"op {i} (process {history[i].process}): {label}"
        if i in order:
            tooltip += f"\nlinearized #{order[i] + 1}; state after: {short_json(state_after[i], 300)}"
        if i in stuck:
            tooltip += "\ncould not be linearized next"
        bars.append(
            f'<g class="{cls}" data-op="{i}"><title>{escape(tooltip)}</title>'
            f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 4):.1f}" height="{LANE_HEIGHT - 10}" rx="3"/>'
            + (f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 4):.1f}" height="{LANE_HEIGHT - 10}" '
               f'fill="url(#hatch)"/>' if pending else "")
            + f'<text x="{x0 + 4:.1f}" y="{y + 17}">{escape(_fit(label, room))}</text></g>'
        )
    parts.extend(bars)
    # Linearization points: earliest consistent place inside each linearized bar.
    previous = -1.0
    dots = []
    for k, s in enumerate(path.steps):
        if s.op not in column:
            continue
        completion = data.completion_of.get(s.op)
        pending = completion is None or history[completion].type == "info"
        hi = end_column if pending else column[completion]  # type: ignore[index]
        at = min(max(previous + 0.5, column[s.op] + 0.25), hi - 0.1)
        previous = at
        dots.append((x_of(at), TOP + lane[history[s.op].process] * LANE_HEIGHT + 5, k + 1))
    if len(dots) > 1:
        parts.append('<polyline class="lin-path" points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in dots) + '"/>')
    for x, y, number in dots:
        parts.append(f'<circle class="lin-point" cx="{x:.1f}" cy="{y:.1f}" r="6.5"/>'
                     f'<text class="lin-number" x="{x:.1f}" y="{y + 3.5:.1f}">{number}</text>')
    parts.append(f'<text x="{LEFT}" y="{height - 8}" class="axis-note">invocations and completions in '
                 f'history order →</text>')
    parts.append("</svg>")
    return "".join(parts), len(ops), omitted
