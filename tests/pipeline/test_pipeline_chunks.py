"""Large files cut into chunks: every cut gives the sequential reader's rows and errors."""

import json

import pyarrow as pa
import pytest

from floodmark.checkers import synthetic
from floodmark.checkers.run_partitions import PartitionBounds
from floodmark.contracts.history import HistoryError, read_history, write_history
from floodmark.pipeline.chunk_summaries import judge_history
from floodmark.pipeline.chunks import history_rows, plan_chunks
from floodmark.pipeline.records import _op_row


def first_problem(summaries, path):
    """The history's first problem as (line, problem), as the driver judges the chunks; None if none."""
    try:
        judge_history(summaries, str(path), PartitionBounds(None))
    except HistoryError as e:
        return e.line, e.problem
    return None


def _read_chunked(path, chunk_bytes, witnesses=frozenset()):
    summaries, batches = [], []
    for chunk in plan_chunks(str(path), chunk_bytes):
        batches += list(history_rows(chunk, "r", frozenset(witnesses), summaries.append))
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return rows, summaries


def _first_problem_read_both_ways(path, chunk_bytes):
    """The history's first problem as the chunked reader names it, checked against the
    sequential reader's error: the same line, the same words."""
    with pytest.raises(HistoryError) as sequential:
        read_history(path)
    _, summaries = _read_chunked(path, chunk_bytes)
    line, problem = first_problem(summaries, path)
    assert f"{path}:{line}: {problem}" == str(sequential.value)
    return line, problem


def _history(tmp_path, ops=150):
    path = tmp_path / "history.jsonl"
    write_history(path, synthetic.queue_run(3, ops=ops, partitions=3).history)
    return path


@pytest.mark.parametrize("chunk_bytes", [1, 97, 1000, 4096, 10**9])
def test_any_cut_gives_the_sequential_rows(tmp_path, chunk_bytes):
    path = _history(tmp_path)
    expected = [_op_row("r", op) for op in read_history(path)]
    rows, summaries = _read_chunked(path, chunk_bytes, witnesses={5, 17})
    assert rows == expected
    assert first_problem(summaries, path) is None
    assert sum(s.lines for s in summaries) == len(path.read_text().splitlines())
    times = {i: t for s in summaries for i, t in s.witness_times.items()}
    assert times == {5: expected[5]["time"], 17: expected[17]["time"]}


@pytest.mark.parametrize("chunk_bytes", [50, 700, 10**9])
def test_the_first_problem_is_named_by_its_global_line(tmp_path, chunk_bytes):
    path = _history(tmp_path)
    lines = path.read_text().splitlines()
    lines.insert(40, "")  # a blank line is skipped but still counts as a line
    lines[120] = lines[120].replace('"type":"ok"', '"type":"maybe"').replace('"type":"invoke"', '"type":"maybe"')
    lines[200] = "{not json"
    path.write_text("\n".join(lines) + "\n")
    line, problem = _first_problem_read_both_ways(path, chunk_bytes)
    assert line == 121 and "type must be" in problem


@pytest.mark.parametrize("chunk_bytes", [64, 10**9])
def test_a_gap_in_indices_is_found_across_chunks(tmp_path, chunk_bytes):
    path = _history(tmp_path)
    lines = path.read_text().splitlines()
    del lines[77]
    path.write_text("\n".join(lines) + "\n")
    _, summaries = _read_chunked(path, chunk_bytes)
    assert first_problem(summaries, path) == (78, "index 78 out of sequence (expected 77)")


def test_a_torn_last_line_is_ignored_like_the_reader_does(tmp_path):
    path = _history(tmp_path)
    with open(path, "a") as f:
        f.write('{"index": 99999, "ti')
    rows, summaries = _read_chunked(path, 333)
    assert len(rows) == len(read_history(path))
    assert first_problem(summaries, path) is None


def test_non_ascii_values_round_trip_and_nan_is_refused_as_check_refuses_it(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"index":0,"time":0,"type":"invoke","process":0,"f":"send","value":{"v":"caf\\u00e9"}}\n'
                    '{"index":1,"time":1,"type":"ok","process":0,"f":"send","value":NaN}\n')
    rows, summaries = _read_chunked(path, 10**9)
    assert first_problem(summaries, path) == (2, "nan is not a finite number")
    path.write_text(path.read_text().replace("NaN", "null"))
    rows, summaries = _read_chunked(path, 10**9)
    assert json.loads(rows[0]["value_json"]) == {"v": "café"}
    assert rows[1]["value_json"] == "null" and first_problem(summaries, path) is None


def test_huge_integers_stay_exact(tmp_path):
    # orjson alone would read an integer beyond 64 bits as a float, silently.
    path = _history(tmp_path, ops=20)
    lines = path.read_text().splitlines()
    op = json.loads(lines[3])
    op["value"] = {"topic": "t0", "partition": 0, "value": 123456789012345678901234567890}
    lines[3] = json.dumps(op)
    path.write_text("\n".join(lines) + "\n")
    expected = [_op_row("r", o) for o in read_history(path)]
    rows, _ = _read_chunked(path, 10**9)
    assert rows == expected
    assert '"value":123456789012345678901234567890' in rows[3]["value_json"]


@pytest.mark.parametrize("chunk_bytes", [80, 10**9])
def test_a_malformed_line_is_worded_as_the_readers_word_it(tmp_path, chunk_bytes):
    # A line cut short mid-file (not the torn tail): the chunked reader names the same line
    # and says the same words as the sequential readers, for a history and for node events.
    from floodmark.contracts.node_event_kinds import HwChanged
    from floodmark.contracts.node_events import NodeEventError, NodeEventWriter, iter_events
    from floodmark.contracts.run_ids import RunIdCheck
    from floodmark.pipeline.chunk_summaries import judge_event_file
    from floodmark.pipeline.chunks import event_rows

    path = _history(tmp_path, ops=20)
    lines = path.read_text().splitlines()
    lines[7] = lines[7][:30]
    path.write_text("\n".join(lines) + "\n")
    line, problem = _first_problem_read_both_ways(path, chunk_bytes)
    assert line == 8 and problem.startswith("not valid JSON (") and "column" in problem and " line " not in problem

    events = tmp_path / "n1.jsonl"
    writer = NodeEventWriter(events, "n1")
    for hw in range(5):
        writer.write(1.0, HwChanged(topic="t", partition=0, leader_epoch=1, role="leader", previous=hw, high_watermark=hw + 1, log_end=9))
    writer.close()
    lines = events.read_text().splitlines()
    lines[2] = lines[2][:25]
    events.write_text("\n".join(lines) + "\n")
    with pytest.raises(NodeEventError) as sequential_events:
        list(iter_events(events))
    summaries = []
    for chunk in plan_chunks(str(events), chunk_bytes):
        list(event_rows(chunk, "r", None, None, summaries.append))
    with pytest.raises(NodeEventError) as chunked_events:
        judge_event_file(summaries, str(events), RunIdCheck(None), {}, lambda offsets: (None, None))
    assert str(chunked_events.value) == str(sequential_events.value)


@pytest.mark.parametrize("chunk_bytes", [1, 300, 10**9])
def test_a_byte_order_mark_is_dropped_and_a_key_given_twice_named_as_the_reader_does(tmp_path, chunk_bytes):
    path = _history(tmp_path, ops=30)
    expected = [_op_row("r", op) for op in read_history(path)]
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    rows, summaries = _read_chunked(path, chunk_bytes)
    assert rows == expected and first_problem(summaries, path) is None
    lines = path.read_text().splitlines()
    lines[9] = lines[9].replace('"type":', '"type":"fail","type":', 1)
    path.write_text("\n".join(lines) + "\n")
    line, problem = _first_problem_read_both_ways(path, chunk_bytes)
    assert line == 10 and problem == "the key 'type' twice in one object (which one was meant cannot be told)"
