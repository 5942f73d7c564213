"""The client ops of a run as columns: one row per operation (invocation + completion).

Charts of a million-op history cannot walk Python objects per pixel; they work on numpy
columns instead. A row is one client operation: when it was invoked and completed, how it
ended (ok, fail, info, or still pending when the history ended), what it did (``f``), which
process ran it and on which *worker lane* it belongs. Jepsen draws one lane per worker
thread: a process whose op ended ``info`` is replaced by process ``p + concurrency`` on the
same worker, so the lane is ``process mod concurrency``. Without a known concurrency every
process gets its own lane, unless there are too many to draw; then ops are packed greedily
into the fewest lanes in which none overlap (as many as the peak concurrency).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from floodmark.contracts.history import NEMESIS
from floodmark.reports.history_columns import HistoryColumns

MAX_PROCESS_LANES = 64  # beyond this many distinct processes (concurrency unknown), pack lanes
OUTCOMES = ("ok", "fail", "info", "pending")
OUTCOME_CODE = {name: code for code, name in enumerate(OUTCOMES)}
OUTCOME_COLOURS = {"ok": "#6db36d", "fail": "#e0625a", "info": "#f0b43c", "pending": "#9aa5b1"}


@dataclass
class OpTable:
    start_s: np.ndarray  # float64, invocation time in seconds since test start
    end_s: np.ndarray  # float64, completion time (end of history when pending)
    outcome: np.ndarray  # uint8 codes into OUTCOMES
    f_code: np.ndarray  # uint8/uint16 codes into f_names
    process: np.ndarray  # int64
    lane: np.ndarray  # int32
    invoke_index: np.ndarray  # int64 history index of the invocation
    f_names: list[str]
    lane_count: int
    end_of_history_s: float

    def __len__(self) -> int:
        return int(self.start_s.shape[0])


def build_op_table(history: HistoryColumns, completion_of: dict[int, int], concurrency: int | None) -> OpTable:
    """Columns for every client invocation, in invocation order."""
    types, times, processes_column, fs_column = history.type, history.time, history.process, history.f
    end_ns = history.end_time
    pending = OUTCOME_CODE["pending"]
    f_codes: dict[str, int] = {}
    string_processes: dict[str, int] = {}
    starts: list[int] = []
    ends: list[int] = []
    outcomes: list[int] = []
    fs: list[int] = []
    processes: list[int] = []
    indices: list[int] = []
    for index, op_type in enumerate(types):
        process = processes_column[index]
        if op_type != "invoke" or process == NEMESIS:
            continue
        completion = completion_of.get(index)
        if completion is None:
            ends.append(end_ns)
            outcomes.append(pending)
        else:
            ends.append(times[completion])
            outcomes.append(OUTCOME_CODE[types[completion]])
        starts.append(times[index])
        f = fs_column[index]
        code = f_codes.get(f)
        if code is None:
            code = f_codes[f] = len(f_codes)
        fs.append(code)
        if type(process) is str:  # a named client process: give it a stable negative id
            process = string_processes.setdefault(process, -1 - len(string_processes))
        processes.append(process)
        indices.append(index)
    process_array = np.asarray(processes, dtype=np.int64)
    lane, lane_count = _lanes(process_array, starts, ends, concurrency)
    return OpTable(
        start_s=np.asarray(starts, dtype=np.float64) / 1e9,
        end_s=np.asarray(ends, dtype=np.float64) / 1e9,
        outcome=np.asarray(outcomes, dtype=np.uint8),
        f_code=np.asarray(fs, dtype=np.uint16),
        process=process_array,
        lane=lane,
        invoke_index=np.asarray(indices, dtype=np.int64),
        f_names=list(f_codes),
        lane_count=lane_count,
        end_of_history_s=end_ns / 1e9,
    )


def _lanes(process: np.ndarray, starts: list[int], ends: list[int],
           concurrency: int | None) -> tuple[np.ndarray, int]:
    if process.size == 0:
        return np.zeros(0, dtype=np.int32), 0
    if concurrency and concurrency > 0 and bool((process >= 0).all()):
        lane = (process % concurrency).astype(np.int32)
        return lane, int(lane.max()) + 1
    # Unknown concurrency (or named processes): one lane per distinct process, in order...
    distinct, inverse = np.unique(process, return_inverse=True)
    if distinct.shape[0] <= MAX_PROCESS_LANES:
        return inverse.astype(np.int32), int(distinct.shape[0])
    # ...unless there are too many to draw: then pack ops into as few lanes as never overlap.
    return _packed_lanes(starts, ends)


def _packed_lanes(starts: list[int], ends: list[int]) -> tuple[np.ndarray, int]:
    """Greedy interval partitioning (ops arrive in invocation order): lanes = peak concurrency."""
    busy: list[tuple[int, int]] = []  # (end time, lane) of the op occupying each lane
    free: list[int] = []
    lanes = np.zeros(len(starts), dtype=np.int32)
    count = 0
    for k, (start, end) in enumerate(zip(starts, ends)):
        while busy and busy[0][0] < start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        lanes[k] = lane
        heapq.heappush(busy, (end, lane))
    return lanes, count
