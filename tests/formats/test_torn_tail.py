"""A torn last line: only a line cut short is forgiven, and never silently.

A harness killed mid-write leaves the beginning of a JSON line with no newline after it.
The history's readers (the contract's, the report's, the pipeline's) leave that line out
and say so; a complete last line, or one malformed where it stands, is refused like any
other line, whether or not a newline follows it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.contracts.history import HistoryError, Op, OpsRead, parse_history, read_history
from floodmark.inputs.torn_lines import cut_short

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


def _parses(text: bytes) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _history(values: list[Any]) -> bytes:
    ops = [Op(i, i, "invoke" if i % 2 == 0 else "ok", 0, "write", v) for i, v in enumerate(values)]
    return b"".join(op.to_json().encode() + b"\n" for op in ops)


@settings(max_examples=300, deadline=None)
@given(_values, st.booleans(), st.data())
def test_every_beginning_of_a_json_text_is_cut_short_and_nothing_else_is(value: Any, ascii_only: bool,
                                                                        data: st.DataObject) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    cut = data.draw(st.integers(1, len(text)))
    prefix = text[:cut]
    assert cut_short(prefix) is (not _parses(prefix) and bool(prefix.strip()))
    assert not cut_short(text)
    assert not cut_short(text + data.draw(st.sampled_from([b"x", b"]", b"}", b",1]", b'"', b" 1"])))


@pytest.mark.parametrize("malformed", [b'{"a" 1', b'{"a":1,]', b'{"a":"\\x', b'{"a":"b\tc', b"garbage",
                                       b'{"a":"\\u00zz', b"\xff{", b"[" * 200, b'{"a":1}}'])
def test_a_line_malformed_where_it_stands_is_not_cut_short(malformed: bytes) -> None:
    assert not cut_short(malformed)


@settings(max_examples=200, deadline=None)
@given(st.lists(_values, min_size=1, max_size=6), st.data())
def test_a_history_cut_anywhere_reads_every_whole_line_and_names_the_torn_one(values: list[Any],
                                                                             data: st.DataObject) -> None:
    whole = _history(values)
    cut = data.draw(st.integers(1, len(whole)))
    torn = whole[:cut]
    lines_whole = torn.count(b"\n")
    last_line_whole = _parses(torn.rsplit(b"\n", 1)[-1])  # cut just before its newline: complete, so read
    ops = parse_history(torn, "h.jsonl", check_pairs=False)
    assert isinstance(ops, OpsRead)
    assert [op.index for op in ops] == list(range(lines_whole + last_line_whole))
    if torn.endswith(b"\n") or last_line_whole:
        assert ops.torn_tail is None
    else:
        assert ops.torn_tail is not None and ops.torn_tail.line == lines_whole + 1
        assert str(ops.torn_tail).startswith(f"h.jsonl:{lines_whole + 1}: not read: the last line is cut short")


@pytest.mark.parametrize("newline", [b"\n", b""])
def test_a_complete_last_line_with_a_bad_field_is_refused_with_or_without_its_newline(tmp_path: Path,
                                                                                       newline: bytes) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(_history([1]) + b'{"index":1,"time":1,"type":"ok","process":0,"f":"write","node":5}' + newline)
    with pytest.raises(HistoryError, match="h.jsonl:2: node must be a string"):
        read_history(path)


def test_a_last_line_that_is_garbage_is_refused_not_forgiven(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(_history([1]) + b'{"index":1}x')
    with pytest.raises(HistoryError, match="h.jsonl:2: not valid JSON"):
        read_history(path)


def test_the_report_and_the_pipeline_forgive_what_the_reader_forgives(tmp_path: Path) -> None:
    from floodmark.pipeline.chunks import Chunk, ChunkSummary, history_rows
    from floodmark.reports.history_columns import load_history as load_columns

    def pipeline(path: Path) -> tuple[int, tuple[int, str] | None]:
        summaries: list[ChunkSummary] = []
        rows = sum(b.num_rows for b in history_rows(Chunk(str(path), 0, 0, path.stat().st_size, True), "r",
                                                    frozenset(), summaries.append))
        return rows, summaries[0].error

    path = tmp_path / "h.jsonl"
    path.write_bytes(_history([1, 2]) + b'{"index":2,"ti')
    assert len(read_history(path)) == len(load_columns(path)) == pipeline(path)[0] == 2
    assert pipeline(path)[1] is None
    path.write_bytes(_history([1, 2]) + b'{"index":2}x')
    with pytest.raises(HistoryError, match=":3: not valid JSON"):
        load_columns(path)
    assert pipeline(path)[1] is not None and pipeline(path)[1][0] == 3  # type: ignore[index]
    path.write_bytes(_history([1, 2]) + b'{"index":2,"time":2,"type":"ok","process":0,"f":"write","node":5}')
    assert pipeline(path)[1] == (3, "node must be a string, got 5")


def _register_lines(reads: list[int | None]) -> list[bytes]:
    """A write of 1, then one read after another, each returning what ``reads`` says."""
    ops = [Op(0, 0, "invoke", 0, "write", 1), Op(1, 1, "ok", 0, "write", 1)]
    for value in reads:
        ops += [Op(len(ops), len(ops), "invoke", 1, "read", None), Op(len(ops) + 1, len(ops) + 1, "ok", 1, "read", value)]
    return [op.to_json().encode() + b"\n" for op in ops]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1, 2]), min_size=1, max_size=4), st.data())
def test_no_checker_is_valid_about_a_last_line_it_left_unread(reads: list[int], data: st.DataObject) -> None:
    """The line a killed writer cut short recorded an op no checker read, which may have been
    the anomaly (a read of a value never written, here): the verdict on the rest is unknown at
    best, and an anomaly found in what was read stands (the audit's wrong VALID)."""
    from floodmark.checkers.registry import judge_history

    lines = _register_lines(reads)
    last = lines[-1]
    torn = b"".join(lines[:-1]) + last[: data.draw(st.integers(1, len(last) - 3))]  # (a cut that keeps the whole value never parses)
    ops = parse_history(torn, "h.jsonl")
    assert ops.torn_tail is not None
    judged = judge_history(ops, checkers=["linearizable", "stats"])
    read_invalid = 2 in reads[:-1]  # a read of 2 (never written) among the lines read
    assert judged["linearizable"].valid == (False if read_invalid else "unknown")
    assert judged["stats"].valid is True  # (it judges nothing)
    if not read_invalid:
        assert judged["linearizable"].stats["unjudged_because"].startswith(
            f"h.jsonl:{len(lines)}: the last line, cut short, was not read")
    whole = judge_history(parse_history(b"".join(lines), "h.jsonl"), checkers=["linearizable"])
    assert whole["linearizable"].valid is (2 not in reads)
