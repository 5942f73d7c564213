"""Recognising a history's format from its content."""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.formats.detect import detect_format, load_history
from floodmark.history import HistoryError, Op, write_history


def test_each_format_is_recognised_regardless_of_name(tmp_path: Path) -> None:
    jsonl = tmp_path / "a.txt"
    write_history(jsonl, [Op(0, 0, "invoke", 0, "read", None), Op(1, 1, "ok", 0, "read", 1)])
    edn_stream = tmp_path / "b.log"
    edn_stream.write_text("; comment\n{:process 0, :type :invoke, :f :read, :value nil}\n")
    edn_vector = tmp_path / "c.jsonl"
    edn_vector.write_text("[{:process 0, :type :invoke, :f :read, :value nil}]\n")
    text = tmp_path / "d.edn"
    text.write_text("preamble\nINFO  jepsen.util - 0\t:invoke\t:read\tnil\n")
    assert detect_format(jsonl) == "jsonl"
    assert detect_format(edn_stream) == "edn"
    assert detect_format(edn_vector) == "edn"
    assert detect_format(text) == "jepsen-text"
    assert load_history(jsonl).ops[1].value == 1
    assert load_history(text).ops[0].f == "read"


def test_unrecognisable_and_empty_files_are_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_text("\nhello world\n")
    with pytest.raises(HistoryError, match="junk:2: not a history"):
        detect_format(junk)
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(HistoryError, match="empty file"):
        load_history(empty)


def test_malformed_jsonl_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"index":0,"time":0,"type":"invoke","process":0,"f":"r"}\n{"index":1,"time":1,"type":"bad","process":0,"f":"r"}\n')
    with pytest.raises(HistoryError) as caught:
        load_history(path)
    assert caught.value.line == 2
