"""Fault intervals: when the nemesis had which kind of fault in force.

The nemesis records ``start-<kind>`` and ``stop-<kind>`` ops (kind is partition, clock,
pause, disk or kill) and ``heal-all``, which ends every fault. An interval of kind K runs from
the completion of a ``start-K`` (the fault is certainly in place) to the completion of the next
``stop-K`` or ``heal-all`` (it is certainly gone); a fault never stopped lasts to the end of
the history. Starting a kind that is already in force extends the interval rather than
opening a second one, because the nemesis replaces a fault of the same kind.

Every time chart shades these intervals with one colour per kind, so a latency spike or a
gap in a lane can be read against the fault that caused it. A hand-written schedule may hold
a hundred thousand faults, which no chart can draw one by one (matplotlib took minutes and
made an SVG of 20 MB): a chart draws :func:`bands`, the intervals of a kind merged where the
gap between them is narrower than it can show, which looks the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from floodmark.contracts.history import NEMESIS, Op

# Colour per fault kind (fill, drawn translucent); unknown kinds get a grey.
FAULT_COLOURS: dict[str, str] = {
    "partition": "#e4572e",
    "clock": "#a05195",
    "pause": "#f3a712",
    "disk": "#29335c",
    "kill": "#669bbc",
    "power": "#7b2d26",
    "session": "#2a9d8f",
    "message": "#b5838d",
    "admin": "#6a994e",
    "stall": "#577590",
    "upgrade": "#bc6c25",
    "failover": "#9c6644",
}
OTHER_FAULT_COLOUR = "#8d8d8d"


@dataclass(frozen=True)
class FaultInterval:
    kind: str
    start_s: float
    end_s: float
    start_index: int  # history index of the start op
    open_ended: bool  # never stopped before the history ended

    @property
    def colour(self) -> str:
        return fault_colour(self.kind)


def bands(faults: Iterable[FaultInterval], resolution_s: float) -> list[FaultInterval]:
    """``faults`` as a chart of resolution ``resolution_s`` (the time one pixel spans) shows
    them: per kind, an interval that starts within the resolution of the previous one's end
    merged into it (the first's start op, the last's open end). Ordered as
    :func:`fault_intervals` orders them."""
    merged: dict[str, list[FaultInterval]] = {}
    for fault in sorted(faults, key=lambda f: (f.start_s, f.kind)):
        drawn = merged.setdefault(fault.kind, [])
        if drawn and fault.start_s - drawn[-1].end_s <= resolution_s:
            last = drawn[-1]
            if fault.end_s >= last.end_s:
                drawn[-1] = FaultInterval(fault.kind, last.start_s, fault.end_s, last.start_index, fault.open_ended)
        else:
            drawn.append(fault)
    return sorted((f for drawn in merged.values() for f in drawn), key=lambda f: (f.start_s, f.kind))


def fault_colour(kind: str) -> str:
    return FAULT_COLOURS.get(kind, OTHER_FAULT_COLOUR)


def fault_intervals(nemesis_ops: Iterable[Op], end_of_history_ns: int) -> list[FaultInterval]:
    """The fault intervals described by a history's nemesis ops, ordered by start time."""
    end_of_history = end_of_history_ns / 1e9
    # For each kind in force: (start time, start index). Completion beats invocation, so a
    # start's invoke opens the interval and its completion moves the start forward.
    open_faults: dict[str, tuple[float, int, bool]] = {}  # kind -> (start_s, index, completed)
    intervals: list[FaultInterval] = []

    def close(kind: str, at: float) -> None:
        start_s, index, _ = open_faults.pop(kind)
        intervals.append(FaultInterval(kind, start_s, max(at, start_s), index, False))

    for op in nemesis_ops:
        if op.process != NEMESIS:
            continue
        t = op.time / 1e9
        if op.f.startswith("start-"):
            kind = op.f[len("start-"):]
            current = open_faults.get(kind)
            if current is None:
                open_faults[kind] = (t, op.index, op.type != "invoke")
            elif op.type != "invoke" and not current[2]:
                open_faults[kind] = (t, current[1], True)
        elif op.type != "invoke" and (op.f.startswith("stop-") or op.f == "heal-all"):
            kinds = [op.f[len("stop-"):]] if op.f.startswith("stop-") else sorted(open_faults)
            for kind in kinds:
                if kind in open_faults:
                    close(kind, t)
    # A fault never stopped (or whose stop never completed) may have lasted to the end.
    for kind in sorted(open_faults):
        start_s, index, _ = open_faults[kind]
        intervals.append(FaultInterval(kind, start_s, end_of_history, index, True))
    intervals.sort(key=lambda i: (i.start_s, i.kind))
    return intervals
