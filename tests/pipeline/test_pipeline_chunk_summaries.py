"""The chunks' summaries, reduced in chunk order, refuse a file exactly where check's reader does.

Property-based: histories and node event files, mostly well-formed and damaged here and
there (a pairing broken, a process going on after an op of it ended info, time going back, an index missing, blank lines, a seq again or out
of order, a stop followed by life, a claim to be another broker, another run's start, a topic
the run lacks), cut at every chunk size; the reduction of the chunks' summaries
(:func:`judge_history`, :func:`judge_event_file`) must say what the sequential readers say,
word for word, or accept what they accept. The extra pass over a file whose seqs do not rise
is done here in Python over the same rows the Spark pass reads (:func:`seq_rows`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.checkers.run_partitions import PartitionBounds
from floodmark.contracts.history import HistoryError, read_history
from floodmark.contracts.node_events import NodeEventError, read_events_dir
from floodmark.contracts.node_files import Claim, Life
from floodmark.contracts.run_ids import RunIdCheck, StatedRun
from floodmark.pipeline.chunk_summaries import (
    ChunkSummary,
    EventChunk,
    HistoryChunk,
    judge_event_file,
    judge_history,
)
from floodmark.pipeline.chunks import event_rows, history_rows, plan_chunks, seq_rows

CHUNK_SIZES = st.sampled_from([1, 40, 97, 250, 1000, 10**9])


def _said(call: Any) -> str:
    """What ``call()`` raises (a file's refusal, in words), or "accepted" with what it returns."""
    try:
        return f"accepted {call()!r}"
    except (HistoryError, NodeEventError) as e:
        return str(e)


# --------------------------------------------------------------------------- histories

_STEP = st.tuples(st.integers(0, 2),  # the process (2 is the nemesis)
                  st.integers(0, 30),  # a damage, now and then: 0 breaks the pairing, 1 the time, 2 the index,
                  # 3 ends a completion info (its process is retired: another op of it is refused)
                  st.booleans())  # a blank line after it


def _history_lines(steps: list[tuple[int, int, bool]]) -> bytes:
    lines: list[str] = []
    open_: set[int] = set()
    index = time = 0
    for process, damage, blank in steps:
        time += -5 if damage == 1 else 3
        index += 2 if damage == 2 else 1
        if process == 2:
            op = {"type": "info", "process": "nemesis", "f": "start-partition", "value": None}
        else:
            invoke = (process not in open_) != (damage == 0)
            open_ ^= {process}
            completion = "info" if damage == 3 else "ok"
            op = {"type": "invoke" if invoke else completion, "process": process, "f": "send",
                  "value": [process, index]}
        lines.append(json.dumps({"index": index - 1, "time": time, **op}))
        if blank:
            lines.append("")
    return "".join(f"{line}\n" for line in lines).encode()


def _judged_in_chunks(path: Path, chunk_bytes: int) -> str:
    summaries: list[ChunkSummary] = []
    for chunk in plan_chunks(str(path), chunk_bytes):
        list(history_rows(chunk, "r", frozenset(), summaries.append))

    def totals() -> tuple[int, int | None, int | None]:
        judged = judge_history([s for s in summaries if isinstance(s, HistoryChunk)], str(path),
                               PartitionBounds(None))
        return judged.ops, judged.first_time, judged.last_time

    return _said(totals)


@settings(max_examples=300, deadline=None)
@given(st.lists(_STEP, max_size=40), CHUNK_SIZES)
def test_a_history_in_chunks_is_refused_where_and_as_the_reader_refuses_it(steps, chunk_bytes):
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "history.jsonl"
        path.write_bytes(_history_lines(steps))

        def whole() -> tuple[int, int | None, int | None]:
            ops = read_history(path, check_pairs=True)
            return len(ops), ops[0].time if ops else None, ops[-1].time if ops else None

        assert _judged_in_chunks(path, chunk_bytes) == _said(whole)


# --------------------------------------------------------------------------- node events

STATED = StatedRun("r1", "test.yaml")
TOPICS = {"t0": 3, "t1": 3}

_EVENT = st.tuples(
    st.sampled_from(["hw_changed"] * 6 + ["started", "stopped", "controller_elected"]),
    st.sampled_from([1] * 12 + [0, -2]),  # the seq's step: now and then the same again, or back
    st.sampled_from(["n1"] * 30 + ["n2"]),  # the node the line says
    st.sampled_from([1] * 12 + [2]),  # the broker a start or an election says the node is
    st.sampled_from(["r1"] * 12 + ["r2", None]),  # the run a start names
    st.sampled_from(["t0"] * 12 + ["t1", "t9"]),  # the topic
    st.sampled_from([0, 1, 2] * 6 + [3]),  # the partition
    st.booleans(),  # a blank line after it
)


def _event_lines(node: str, events: list[tuple[Any, ...]], start: bool) -> bytes:
    lines: list[str] = []
    seq = -1
    if start:
        events = [("started", 1, node, int(node[1:]), "r1", "t0", 0, False), *events]
    for kind, step, said, broker, run_id, topic, partition, blank in events:
        seq = max(seq + step, 0)
        event: dict[str, Any] = {"node": said, "seq": seq, "wall": 1.0, "kind": kind}
        if kind == "started":
            event |= {"broker": broker, "run_id": run_id} if run_id else {"broker": broker}
        elif kind == "controller_elected":
            event |= {"controller_epoch": 1, "broker": broker}
        elif kind == "hw_changed":
            event |= {"topic": topic, "partition": partition, "leader_epoch": 0, "role": "leader", "previous": 0,
                      "high_watermark": 1, "log_end": 1}
        lines.append(json.dumps(event))
        if blank:
            lines.append("")
    return "".join(f"{line}\n" for line in lines).encode()


def _reorder_in_python(path: str, chunk_bytes: int):
    """The extra pass of ingest_large._reordered, over the same rows, without Spark."""

    def reorder(offsets: dict[int, int]) -> tuple[tuple[int, int, int] | None, Life | None]:
        rows = [row for chunk in plan_chunks(path, chunk_bytes) for batch in seq_rows(chunk, offsets[chunk.number])
                for row in batch.to_pylist()]
        seen: dict[int, int] = {}
        for row in sorted(rows, key=lambda r: r["line"]):
            if row["seq"] in seen:
                return (row["line"], row["seq"], seen[row["seq"]]), None
            seen[row["seq"]] = row["line"]
        ordered = sorted(rows, key=lambda r: r["seq"])
        for before, row in zip(ordered, ordered[1:], strict=False):
            if before["kind"] == "stopped" and row["kind"] != "started":
                return None, (row["line"], row["kind"], before["line"])
        return None, None

    return reorder


def _judge_events_in_chunks(events: Path, chunk_bytes: int, stated: StatedRun | None) -> str:
    runs, claims = RunIdCheck(stated), dict[int, Claim]()
    cut: set[str] = set()

    def judge() -> list[str]:
        for path in sorted(str(p) for p in events.glob("*.jsonl")):
            summaries: list[ChunkSummary] = []
            for chunk in plan_chunks(path, chunk_bytes):
                list(event_rows(chunk, "r", set(TOPICS), TOPICS, summaries.append))
            chunks = [s for s in summaries if isinstance(s, EventChunk)]
            judge_event_file(chunks, path, runs, claims, _reorder_in_python(path, chunk_bytes))
            cut.update(Path(s.path).stem for s in chunks if s.cut_short)
        return sorted(cut)

    return _said(judge)


@settings(max_examples=300, deadline=None)
@given(st.lists(_EVENT, max_size=30), st.lists(_EVENT, max_size=6), st.booleans(), st.booleans(), CHUNK_SIZES)
def test_node_events_in_chunks_are_refused_where_and_as_the_reader_refuses_them(
        n1, n2, n1_starts, stated, chunk_bytes):
    with tempfile.TemporaryDirectory() as scratch:
        events = Path(scratch) / "events"
        events.mkdir()
        (events / "n1.jsonl").write_bytes(_event_lines("n1", n1, n1_starts))
        (events / "n2.jsonl").write_bytes(_event_lines("n2", n2, True))

        def whole() -> list[str]:
            cut: set[str] = set()
            read_events_dir(events, topics=set(TOPICS), partitions=TOPICS, cut_short=cut,
                            run=STATED if stated else None)
            return sorted(cut)

        assert _judge_events_in_chunks(events, chunk_bytes, STATED if stated else None) == _said(whole)


@settings(max_examples=100, deadline=None)
@given(st.lists(_EVENT, min_size=1, max_size=30), CHUNK_SIZES, st.integers(1, 30))
def test_an_event_file_cut_short_is_told_and_judged_as_the_reader_judges_it(events_, chunk_bytes, cut):
    with tempfile.TemporaryDirectory() as scratch:
        events = Path(scratch) / "events"
        events.mkdir()
        data = _event_lines("n1", events_, True)
        (events / "n1.jsonl").write_bytes(data[:-cut])

        def whole() -> list[str]:
            found: set[str] = set()
            read_events_dir(events, topics=set(TOPICS), partitions=TOPICS, cut_short=found, run=STATED)
            return sorted(found)

        assert _judge_events_in_chunks(events, chunk_bytes, STATED) == _said(whole)
