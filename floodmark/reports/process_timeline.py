"""The per-process op timeline (Jepsen's timeline.html), for histories of any size.

Jepsen draws every op as a box in its process's column, coloured by outcome. That is the
fastest way to see *when* things went wrong (a column of yellow timeouts under a partition)
but one DOM element per op freezes a browser long before 100,000 ops. Here the page gets
the ops as packed binary columns (base64 of little-endian typed arrays) and draws them on a
canvas, only the visible time window, one lane per worker:

- zoomed out, each lane is rasterised pixel column by pixel column, keeping the most severe
  outcome in each pixel (info over fail over ok), so a million ops draw in milliseconds
  and no failure disappears into a crowd of successes;
- zoomed in (few ops visible), ops are drawn as boxes and a click shows the op.

Short value summaries are included for small histories only (they would dominate the page
size of a large one); the op's history index is always shown, to look it up in history.jsonl.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np

from floodmark.contracts.history import Op
from floodmark.reports.faults import FaultInterval
from floodmark.reports.op_table import OUTCOME_COLOURS, OUTCOMES, OpTable
from floodmark.reports.run_data import short_json

MAX_VALUE_SUMMARIES = 20_000


def _b64(array: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()).decode("ascii")


def timeline_payload(table: OpTable, faults: list[FaultInterval], history: Sequence[Op],
                     completion_of: dict[int, int]) -> dict[str, Any]:
    """The JSON object the page's timeline script reads (see static/report.js)."""
    payload: dict[str, Any] = {
        "count": len(table),
        "lanes": table.lane_count,
        "end": table.end_of_history_s,
        "f_names": table.f_names,
        "outcomes": list(OUTCOMES),
        "outcome_colours": [OUTCOME_COLOURS[o] for o in OUTCOMES],
        "start": _b64(table.start_s, "f4"),
        "stop": _b64(table.end_s, "f4"),
        "outcome": _b64(table.outcome, "u1"),
        "f": _b64(table.f_code, "u2"),
        "lane": _b64(table.lane, "i4"),
        "process": _b64(table.process, "i4"),
        "index": _b64(table.invoke_index, "i4"),
        "faults": [{"kind": f.kind, "start": f.start_s, "end": f.end_s, "colour": f.colour} for f in faults],
        "values": None,
    }
    if len(table) <= MAX_VALUE_SUMMARIES:
        summaries = []
        for index in table.invoke_index.tolist():
            completion = completion_of.get(index)
            op = history[completion] if completion is not None else history[index]
            text = short_json(op.value, 120)
            if op.error is not None:
                text += " error=" + short_json(op.error, 60)
            summaries.append(text)
        payload["values"] = summaries
    return payload
