"""Op columns for the charts, and the process timeline's packed payload."""

from __future__ import annotations

import base64

import numpy as np
from report_fixtures import run_data_from

from floodmark.contracts.history import Op
from floodmark.reports.faults import fault_intervals
from floodmark.reports.op_table import OUTCOMES, build_op_table
from floodmark.reports.process_timeline import timeline_payload


def _history() -> list[Op]:
    v = {"topic": "t0", "partition": 0, "value": "x"}
    return [
        Op(0, 1_000_000_000, "invoke", 0, "send", v),
        Op(1, 1_500_000_000, "invoke", 1, "poll", [{"topic": "t0", "partition": 0, "offset": 0}]),
        Op(2, 2_000_000_000, "info", 0, "send", v, error="timeout"),
        Op(3, 2_100_000_000, "invoke", "nemesis", "start-kill", None),
        Op(4, 2_200_000_000, "info", "nemesis", "start-kill", {"targets": ["n1"]}),
        Op(5, 2_500_000_000, "invoke", 2, "send", v),  # process 0's successor, same worker (concurrency 2)
        Op(6, 3_000_000_000, "fail", 1, "poll", None),
        Op(7, 3_500_000_000, "invoke", 1, "poll", None),  # never completes
    ]


def test_rows_lanes_outcomes_and_pending_ops() -> None:
    data = run_data_from(_history())
    table = build_op_table(data.history, data.completion_of, concurrency=2)
    assert len(table) == 4 and table.invoke_index.tolist() == [0, 1, 5, 7]
    assert [OUTCOMES[c] for c in table.outcome] == ["info", "fail", "pending", "pending"]
    assert table.lane.tolist() == [0, 1, 0, 1] and table.lane_count == 2
    assert table.end_s.tolist() == [2.0, 3.0, 3.5, 3.5] and table.f_names == ["send", "poll"]
    unknown = build_op_table(data.history, data.completion_of, concurrency=None)
    assert unknown.lane.tolist() == [0, 1, 2, 1] and unknown.lane_count == 3


def test_payload_round_trips_through_base64_little_endian_arrays() -> None:
    data = run_data_from(_history())
    table = build_op_table(data.history, data.completion_of, concurrency=2)
    faults = fault_intervals((data.history[i] for i in data.history.nemesis_indices), data.history.end_time)
    payload = timeline_payload(table, faults, data.history, data.completion_of)

    def decode(name: str, dtype: str) -> list:
        return np.frombuffer(base64.b64decode(payload[name]), dtype=np.dtype(dtype).newbyteorder("<")).tolist()

    assert decode("index", "i4") == [0, 1, 5, 7] and decode("lane", "i4") == [0, 1, 0, 1]
    assert decode("start", "f4") == [1.0, 1.5, 2.5, 3.5] and decode("outcome", "u1") == [2, 1, 3, 3]
    assert payload["faults"] == [{"kind": "kill", "start": 2.2, "end": 3.5, "colour": faults[0].colour}]
    assert payload["values"][0].endswith('error="timeout"') and payload["count"] == 4


def test_many_processes_without_concurrency_are_packed_into_non_overlapping_lanes() -> None:
    ops: list[Op] = []
    for k in range(300):  # every op gets a fresh process (as after info), at most 3 in flight
        ops.append(Op(len(ops), k * 10, "invoke", k, "send", None))
        if k >= 2:
            ops.append(Op(len(ops), k * 10 + 5, "ok", k - 2, "send", None))
    data = run_data_from(ops)
    table = build_op_table(data.history, data.completion_of, concurrency=None)
    assert table.lane_count == 3
    for lane in range(3):
        rows = np.nonzero(table.lane == lane)[0]
        assert all(table.end_s[a] < table.start_s[b] for a, b in zip(rows, rows[1:]))
