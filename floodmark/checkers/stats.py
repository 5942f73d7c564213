"""Statistics: what the clients did and how well the system served them.

Not a judgement (always valid) but the context for one: how many ops of each ``f`` ended
``ok``, ``fail`` or ``info``; latency quantiles per ``f``; throughput; and *unavailability
windows*, the stretches of time in which a partition completed no operation successfully,
each lined up with the faults the nemesis had active then, so a reader sees which fault
made which partition unavailable and for how long.

A gap between successive successful ops on a partition counts as a window when it is
longer than ``max(min_window, 5 × the partition's median gap)``: a slow partition is not
"unavailable" merely because traffic to it is sparse.

The counts are of the ops read. A history whose last line was cut short (a harness killed
mid-write) was read without it, and ``torn_tail`` says so, so no count passes for complete.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.contracts.history import NEMESIS, Op, OpsRead
from floodmark.contracts.results import CheckerResult

NS = 1_000_000_000
QUANTILES = (0.5, 0.9, 0.99, 1.0)


def quantile(ordered: list[int], q: float) -> int:
    """Nearest-rank quantile of an ascending list."""
    if not ordered:
        return 0
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))] if q < 1 else ordered[-1]


@dataclass
class StatsChecker:
    name: str = "stats"
    min_window: float = 1.0  # seconds

    def check(self, run: CheckInput) -> CheckerResult:
        history = run.history
        counts: dict[str, dict[str, int]] = {}
        latencies: dict[str, list[int]] = {}
        successes: dict[tuple[str, int], list[int]] = {}
        open_ops: dict[Any, Op] = {}
        nemesis_ops: list[Op] = []
        ok_total = 0
        # Hot loop (every op): sends and polls, nearly all ok ops, find their partitions inline.
        for op in history:
            process = op.process
            if process == NEMESIS:
                nemesis_ops.append(op)
                continue
            op_type = op.type
            if op_type == "invoke":
                open_ops[process] = op
                continue
            invocation = open_ops.pop(process, None)
            if invocation is None:
                continue
            f = invocation.f
            by_outcome = counts.get(f)
            if by_outcome is None:
                by_outcome = counts[f] = {"ok": 0, "fail": 0, "info": 0}
            by_outcome[op_type] = by_outcome.get(op_type, 0) + 1
            if op_type == "ok":
                ok_total += 1
                time = op.time
                latency = latencies.get(f)
                if latency is None:
                    latency = latencies[f] = []
                latency.append(time - invocation.time)
                value = op.value if f == "poll" or f == "drain" else invocation.value
                if type(value) is dict and "topic" in value and "partition" in value:
                    key = (value["topic"], value["partition"])
                    if type(key[0]) is not str or type(key[1]) is not int:
                        continue  # no partition (the queue checkers name the op): no window of one
                    times = successes.get(key)
                    if times is None:
                        times = successes[key] = []
                    times.append(time)
                else:
                    for key in _partitions_touched(value):
                        successes.setdefault(key, []).append(time)
        for invocation in open_ops.values():
            counts.setdefault(invocation.f, {"ok": 0, "fail": 0, "info": 0})["info"] += 1
        start = history[0].time if history else 0
        end = history[-1].time if history else 0
        duration_s = max(0.0, (end - start) / NS)
        faults = fault_intervals(nemesis_ops, end)
        stats: dict[str, Any] = {
            "ops": counts,
            "latency_ms": {f: _latency_quantiles(sorted(ls)) for f, ls in sorted(latencies.items())},
            "duration_s": round(duration_s, 3),
            "throughput_ok_per_s": round(ok_total / duration_s, 3) if duration_s > 0 else None,
            "faults": [{"kind": k, "start_s": round((s - start) / NS, 3), "end_s": round((e - start) / NS, 3)}
                       for k, s, e in faults],
            "unavailability": self._windows(successes, faults, start, end),
        }
        torn = history.torn_tail if isinstance(history, OpsRead) else None
        if torn is not None:
            stats["torn_tail"] = {"line": torn.line, "problem": torn.problem}
        return CheckerResult(True, [], stats)

    def _windows(self, successes: dict[tuple[str, int], list[int]], faults: list[tuple[str, int, int]],
                 start: int, end: int) -> dict[str, list[dict[str, Any]]]:
        windows: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), times in sorted(successes.items()):
            times.sort()
            gaps = list(map(operator.sub, times[1:], times))
            gaps.sort()
            median = gaps[len(gaps) // 2] if gaps else 0
            threshold = max(int(self.min_window * NS), 5 * median)
            found = []
            # Most partitions have no gap above the threshold: the longest gap (the last sorted
            # one, or the stretch before the first or after the last success) shows it.
            if (gaps and gaps[-1] > threshold) or times[0] - start > threshold or end - times[-1] > threshold:
                for a, b in zip([start, *times], [*times, end]):
                    if b - a > threshold:
                        kinds = sorted({k for k, s, e in faults if s < b and e > a})
                        found.append({"start_s": round((a - start) / NS, 3), "end_s": round((b - start) / NS, 3),
                                      "duration_s": round((b - a) / NS, 3), "faults": kinds})
            windows[f"{topic}/{partition}"] = found
        return windows


def _latency_quantiles(ordered: list[int]) -> dict[str, float]:
    return {f"p{int(q * 100)}" if q < 1 else "max": round(quantile(ordered, q) / 1e6, 3) for q in QUANTILES}


def _partitions_touched(value: Any) -> list[tuple[str, int]]:
    """The partitions an op's value names: one (a send) or several (a poll's batches)."""
    try:
        if isinstance(value, dict) and "topic" in value:
            keys = [(value["topic"], value["partition"])]
        elif isinstance(value, list):
            keys = [(b["topic"], b["partition"]) for b in value if isinstance(b, dict) and "topic" in b]
        else:
            return []
    except (KeyError, TypeError):
        return []
    return [key for key in keys if type(key[0]) is str and type(key[1]) is int]


def fault_intervals(nemesis_ops: list[Op], end: int) -> list[tuple[str, int, int]]:
    """(kind, start, stop) of each fault: from its ``start-<kind>`` op to the matching
    ``stop-<kind>`` or ``heal-all`` (or the end of the history)."""
    active: dict[str, int] = {}
    intervals: list[tuple[str, int, int]] = []
    for op in nemesis_ops:
        # A fault counts from the invocation of its start (it may bite while being applied)
        # to the completion of its stop.
        if op.f.startswith("start-"):
            active.setdefault(op.f[len("start-"):], op.time)
        elif op.f.startswith("stop-") and op.type != "invoke":
            kind = op.f[len("stop-"):]
            if kind in active:
                intervals.append((kind, active.pop(kind), op.time))
        elif op.f == "heal-all" and op.type != "invoke":
            for kind, began in sorted(active.items()):
                intervals.append((kind, began, op.time))
            active.clear()
    intervals.extend((kind, began, end) for kind, began in sorted(active.items()))
    intervals.sort(key=lambda i: (i[1], i[0]))
    return intervals
