"""Statistics: counts, latencies, throughput, unavailability aligned with faults."""

from __future__ import annotations

from floodmark.checkers.api import CheckInput
from floodmark.checkers.stats import StatsChecker, fault_intervals, quantile
from floodmark.contracts.history import Op

S = 1_000_000_000


def op(i: int, t: float, type: str, process: object, f: str, value: object = None) -> Op:
    return Op(i, int(t * S), type, process, f, value)  # type: ignore[arg-type]


def test_quantile_is_nearest_rank() -> None:
    assert quantile([1, 2, 3, 4], 0.5) == 2
    assert quantile([1, 2, 3, 4], 1.0) == 4
    assert quantile([], 0.9) == 0


def test_counts_latency_throughput_and_unavailability() -> None:
    v0 = {"topic": "t0", "partition": 0, "value": "x"}
    ops = []
    t = 0.0
    for _ in range(10):  # a send every 0.1 s for 1 s
        ops.append(op(len(ops), t, "invoke", 0, "send", v0))
        ops.append(op(len(ops), t + 0.01, "ok", 0, "send", {**v0, "offset": 0}))
        t += 0.1
    ops.append(op(len(ops), 1.0, "invoke", "nemesis", "start-partition", {"targets": ["n1"]}))
    ops.append(op(len(ops), 1.05, "info", "nemesis", "start-partition", {"targets": ["n1"]}))
    ops.append(op(len(ops), 1.1, "invoke", 1, "send", v0))
    ops.append(op(len(ops), 3.0, "info", 1, "send", v0))
    ops.append(op(len(ops), 3.5, "invoke", "nemesis", "stop-partition", None))
    ops.append(op(len(ops), 3.6, "info", "nemesis", "stop-partition", None))
    for _ in range(5):
        ops.append(op(len(ops), 4.0, "invoke", 2, "send", v0))
        ops.append(op(len(ops), 4.02, "ok", 2, "send", {**v0, "offset": 1}))
    ops.append(op(len(ops), 4.1, "invoke", 3, "poll", [{"topic": "t0", "partition": 0, "offset": 0}]))
    result = StatsChecker().check(CheckInput(ops))
    stats = result.stats
    assert result.valid is True
    assert stats["ops"]["send"] == {"ok": 15, "fail": 0, "info": 1}
    assert stats["ops"]["poll"] == {"ok": 0, "fail": 0, "info": 1}  # never completed
    assert stats["latency_ms"]["send"]["p50"] == 10.0
    assert stats["latency_ms"]["send"]["max"] == 20.0
    assert stats["faults"] == [{"kind": "partition", "start_s": 1.0, "end_s": 3.6}]
    [window] = stats["unavailability"]["t0/0"]
    assert window["faults"] == ["partition"]
    assert 0.9 < window["start_s"] < 1.0 and window["end_s"] == 4.02
    assert stats["throughput_ok_per_s"] == round(15 / 4.1, 3)


def test_heal_all_ends_every_fault_and_open_faults_last_to_the_end() -> None:
    ops = [op(0, 1, "invoke", "nemesis", "start-clock"), op(1, 2, "invoke", "nemesis", "start-pause"),
           op(2, 3, "info", "nemesis", "heal-all"), op(3, 4, "invoke", "nemesis", "start-kill")]
    intervals = fault_intervals(ops, 10 * S)
    assert intervals == [("clock", S, 3 * S), ("pause", 2 * S, 3 * S), ("kill", 4 * S, 10 * S)]


def test_unavailability_at_the_edges_of_the_history_and_none_within_steady_traffic() -> None:
    v0 = {"topic": "t0", "partition": 0, "value": "x"}
    v1 = {"topic": "t0", "partition": 1, "value": "y"}
    ops = [op(0, 0.0, "invoke", "nemesis", "start-kill")]
    for i in range(20):  # partition 1 answers every 0.1 s throughout; partition 0 only from 3 s on
        t = 0.1 * i
        ops.append(op(len(ops), t, "invoke", 0, "send", v1))
        ops.append(op(len(ops), t + 0.01, "ok", 0, "send", {**v1, "offset": i}))
    for i in range(5):
        t = 3.0 + 0.1 * i
        ops.append(op(len(ops), t, "invoke", 1, "send", v0))
        ops.append(op(len(ops), t + 0.01, "ok", 1, "send", {**v0, "offset": i}))
    ops.append(op(len(ops), 6.0, "info", "nemesis", "stop-kill"))
    windows = StatsChecker().check(CheckInput(ops)).stats["unavailability"]
    assert windows["t0/0"] == [{"start_s": 0.0, "end_s": 3.01, "duration_s": 3.01, "faults": ["kill"]},
                               {"start_s": 3.41, "end_s": 6.0, "duration_s": 2.59, "faults": ["kill"]}]
    assert windows["t0/1"] == [{"start_s": 1.91, "end_s": 6.0, "duration_s": 4.09, "faults": ["kill"]}]
