"""Recognising a history's format from its content."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.contracts.history import HistoryError, Op, write_history
from floodmark.formats.detect import detect_format, load_history


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
    path.write_text('{"index":0,"time":0,"type":"invoke","process":0,"f":"r","value":null}\n{"index":1,"time":1,"type":"bad","process":0,"f":"r"}\n')
    with pytest.raises(HistoryError) as caught:
        load_history(path)
    assert caught.value.line == 2


# ------------------------------------------- structure before the text-log marker (A5, E2)

LOG_LINE = "INFO  jepsen.util - 0\t:invoke\t:write\t1"


def jsonl_ops(values: list[object]) -> bytes:
    ops = []
    for i, value in enumerate(values):
        ops.append(Op(2 * i, 2 * i, "invoke", i, "write", value))
        ops.append(Op(2 * i + 1, 2 * i + 1, "ok", i, "write", value))
    return b"".join((json.dumps(op.to_dict()) + "\n").encode() for op in ops)


def test_a_history_quoting_a_log_line_is_that_history_not_a_log(tmp_path: Path) -> None:
    # Audit case 06: the first op's value held the marker, and the history was read as a
    # text log of one line; the other ops were never read.
    jsonl = tmp_path / "h.jsonl"
    jsonl.write_bytes(jsonl_ops([f"copied from {LOG_LINE}", 2]))
    assert detect_format(jsonl) == "jsonl" and len(load_history(jsonl).ops) == 4
    edn = tmp_path / "h.edn"
    edn.write_text(f'{{:process 0, :type :invoke, :f :write, :value "{LOG_LINE}"}}\n'
                   f'{{:process 0, :type :ok, :f :write, :value "{LOG_LINE}"}}\n')
    assert detect_format(edn) == "edn" and len(load_history(edn).ops) == 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet=st.sampled_from(list("INFO jepsn.util-\t:invoke\n\"{[")) | st.characters(exclude_categories=("Cs",))),
                min_size=1, max_size=4),
       st.text(alphabet=" \t\r\n", max_size=200))
def test_any_values_and_leading_blanks_leave_a_jsonl_history_jsonl(tmp_path: Path, values: list[str],
                                                                   blanks: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(blanks.encode() + jsonl_ops(values))
    assert detect_format(path) == "jsonl"
    assert [op.value for op in load_history(path).ops] == [v for v in values for _ in range(2)]


@pytest.mark.parametrize("blank", ["\n", "\r\n", "  \t\n", " " * 1000 + "\n"])
def test_blank_lines_of_any_length_before_the_history_are_skipped(tmp_path: Path, blank: str) -> None:
    # Audit E2: detection looked at the first 64 KiB only, and called the file empty.
    path = tmp_path / "h.jsonl"
    path.write_bytes(blank.encode() * (70_000 // len(blank) + 1) + jsonl_ops([1]))
    assert detect_format(path) == "jsonl" and len(load_history(path).ops) == 2
    path.write_bytes(blank.encode() * (70_000 // len(blank) + 1) + b"; a comment\n[{:process 0 :type :invoke :f :r}]")
    assert detect_format(path) == "edn"
    path.write_bytes(blank.encode() * (70_000 // len(blank) + 1))
    with pytest.raises(HistoryError, match="empty file"):
        detect_format(path)
    path.write_bytes(b"\xef\xbb\xbf" + blank.encode() * 10 + b"; only this\n" + blank.encode())
    with pytest.raises(HistoryError, match="only comments"):
        detect_format(path)


def test_comments_of_any_length_before_an_edn_history_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "h.edn"
    path.write_bytes(b"; a comment\n\n" * 20_000 + b"[{:process 0 :type :invoke :f :read :value nil}]\n")
    assert detect_format(path) == "edn" and len(load_history(path).ops) == 1


def test_a_text_log_is_recognised_after_any_preamble_and_with_any_spacing(tmp_path: Path) -> None:
    path = tmp_path / "h.log"
    preamble = "INFO  jepsen.os.debian - n1 installing packages\n" * 2000  # beyond 64 KiB
    path.write_text(preamble + "INFO  jepsen.util -\t0\t:invoke\t:read\tnil\n")
    assert detect_format(path) == "jepsen-text" and len(load_history(path).ops) == 1


@given(document=st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), min_size=1, max_size=4),
       indent=st.integers(min_value=0, max_value=4))
@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_json_document_over_many_lines_is_named_not_taken_for_edn(tmp_path: Path, document: dict[str, object],
                                                                     indent: int) -> None:
    # The audit's F14: results.json handed to check was read as EDN ("empty keyword ':'").
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document, indent=indent or None) if indent else "{\n" + json.dumps(document)[1:])
    with pytest.raises(HistoryError, match="not a history: one JSON document over many lines"):
        detect_format(path)


# (regression, 2026-11-28: a log whose records start with a bracketed timestamp or thread, or
# whose chatter starts like EDN, was read as EDN and refused with an EDN message)
_LOG_OPS = ("0\t:invoke\t:write\t1", "0\t:ok\t:write\t1", "1\t:invoke\t:read\tnil", "1\t:ok\t:read\t2")


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(["[", "{", "(", "#", "^"]).flatmap(
           lambda first: st.text(alphabet=st.characters(exclude_categories=("Cs", "Cc", "Zl", "Zp"),
                                                        exclude_characters='"'), max_size=30)
           .map(lambda rest: first + rest)),
       chatter=st.sampled_from(["", "{this is chatter}\n", "# log start\n", "[main] starting\n"]))
def test_a_text_log_whose_lines_start_like_edn_is_read_as_the_log(tmp_path: Path, prefix: str, chatter: str) -> None:
    plain = tmp_path / "plain.log"
    plain.write_text("".join(f"INFO  jepsen.util - {op}\n" for op in _LOG_OPS))
    prefixed = tmp_path / "prefixed.log"
    prefixed.write_text(chatter + "".join(f"{prefix} INFO  jepsen.util - {op}\n" for op in _LOG_OPS))
    loaded = load_history(prefixed)
    assert loaded.format == "jepsen-text"
    assert [(op.process, op.type, op.f, op.value) for op in loaded.ops] == \
           [(op.process, op.type, op.f, op.value) for op in load_history(plain).ops]


def test_an_edn_history_that_is_damaged_and_quotes_log_lines_is_still_refused_as_edn(tmp_path: Path) -> None:
    # Only an unquoted record makes a log: a quoted one inside broken EDN leaves it EDN.
    path = tmp_path / "h.edn"
    path.write_text('{:process 0 :type :invoke :f :write :value "INFO  jepsen.util - 0\t:invoke\t:write\t1"}\n'
                    "{:process 0 :type :ok :f :write\n")
    with pytest.raises(HistoryError) as caught:
        load_history(path)
    assert caught.value.line == 2 and "never closed" in str(caught.value)


@pytest.mark.parametrize("keys", ['"{}"', "{}", ":{}"])
def test_an_edn_stream_of_op_maps_with_string_keys_is_edn_not_broken_json(tmp_path: Path, keys: str) -> None:
    # (regression, hunt 2026-11-29: a stream of {"process" 0, "type" :invoke ...} began like
    # JSON and was refused as "not valid JSON", though its vector read, judged, as EDN)
    fields = ("process", "type", "f", "value")
    ops = [(0, ":invoke", ":write", 1), (0, ":ok", ":write", 1), (1, ":invoke", ":read", "nil"), (1, ":ok", ":read", 2)]
    path = tmp_path / "h.edn"
    path.write_text("".join("{" + ", ".join(f"{keys.format(k)} {v}" for k, v in zip(fields, op, strict=True)) + "}\n"
                            for op in ops))
    loaded = load_history(path)
    assert loaded.format == "edn"
    assert [(op.process, op.type, op.f, op.value) for op in loaded.ops] == \
           [(0, "invoke", "write", 1), (0, "ok", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 2)]


def test_a_damaged_jsonl_op_is_still_refused_as_json(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"index":0,"time":0,"type":"invoke","process":0,"f":"r","value":null,}\n')
    with pytest.raises(HistoryError, match=r"h\.jsonl:1: not valid JSON"):
        load_history(path)


def test_a_long_line_naming_the_logger_many_times_is_looked_at_once(tmp_path: Path) -> None:
    # A file that starts like EDN and is none is looked at for op records; its line was
    # decoded and searched again for each 'jepsen.util:' in it (100 kB: 8 s; 1 MB: minutes).
    path = tmp_path / "h.log"
    path.write_bytes(b"{" + b" jepsen.util:" * 8000 + b"\nINFO  jepsen.util - 0\t:invoke\t:read\tnil\n")
    started = time.perf_counter()
    assert load_history(path).format == "jepsen-text"
    assert time.perf_counter() - started < 0.5
