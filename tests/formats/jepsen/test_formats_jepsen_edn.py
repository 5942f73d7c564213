"""Jepsen EDN histories to ops and back."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floodmark.contracts.history import NEMESIS, HistoryError, Op
from floodmark.formats import edn
from floodmark.formats.jepsen_edn import (
    op_to_edn,
    parse_edn_history,
    read_edn_history,
    write_edn_history,
)


def test_vector_history_becomes_dense_ops() -> None:
    ops = parse_edn_history("""[{:process 0, :type :invoke, :f :write, :value 1}
      {:process 0, :type :ok, :f :write, :value 1, :time 55}
      {:process :nemesis, :type :info, :f :kill, :value nil}]""")
    assert [op.index for op in ops] == [0, 1, 2]
    assert ops[0].type == "invoke" and ops[0].f == "write" and ops[0].value == 1
    assert ops[1].time == 55 and ops[0].time == 0
    assert ops[2].process == "nemesis" and not ops[2].is_client


def test_stream_of_maps_keeps_extra_fields_and_original_index() -> None:
    ops = parse_edn_history('{:process 1, :type :invoke, :f :put, :key "k", :value "v", :index 7}\n'
                            '{:process 1, :type :ok, :f :put, :key "k", :value "v", :error :x}\n')
    assert ops[0].extra == {"key": "k", "jepsen_index": 7}
    assert ops[1].error == "x"


def test_values_become_plain_json_shapes() -> None:
    ops = parse_edn_history("[{:process :nemesis :type :ok :f :txn :value [[:read :x 1] #{:a}] :node :n1}]")
    assert ops[0].value == [["read", "x", 1], ["a"]]
    assert json.loads(json.dumps(ops[0].value)) == [["read", "x", 1], ["a"]]
    # the op's own fields are plain strings
    assert type(ops[0].f) is str and type(ops[0].type) is str and type(ops[0].process) is str
    assert type(ops[0].node) is str


def test_values_remember_what_json_shapes_forget() -> None:
    """A keyword is not a string and a set is not a vector (in EDN, Clojure and Knossos)."""
    ops = parse_edn_history('[{:process 0 :type :ok :f :txn :value [:x "x" #{1} [1] \\c {:k 1} {"k" 1} #t 2]}]')
    keyword, string, a_set, vector, char, keyword_map, string_map, tagged = ops[0].value
    assert isinstance(keyword, edn.Keyword) and type(string) is str
    assert isinstance(a_set, edn.EdnSet) and type(vector) is list
    assert isinstance(char, edn.Char) and char == "c"
    assert all(isinstance(k, edn.Keyword) for k in keyword_map) and all(type(k) is str for k in string_map)
    assert tagged == edn.Tagged("t", 2)


def test_an_edn_history_is_written_back_as_it_was(tmp_path: Path) -> None:
    text = ('{:process 0, :type :ok, :f :write, :value [:x "x" #{1 2} \\c {:k 1} {"k" 1} #t [1]]}\n')
    ops = parse_edn_history(text)
    path = tmp_path / "again.edn"
    write_edn_history(path, ops, keyword_keys=False)
    assert read_edn_history(path)[0].value == ops[0].value
    assert ':value [:x "x" #{1 2} \\c {:k 1} {"k" 1} #t [1]]' in path.read_text()


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("{:process 0 :type :invoke :f :read}\n{:type :ok :f :read}", 2, "no :process"),
        ("{:process 0 :type :done :f :read}", 1, ":type must be"),
        ("[{:process 0 :type :ok :f :r}] {:x 1}", 1, "unexpected form after"),
        ("{:process 0 :type :ok :f :r :time 1.5}", 1, ":time must be an integer"),
        ("[{:process 0 :type :invoke :f :r :value nil}", 1, "never closed"),
        ("[1 2", 1, "never closed"),
        ("[1 2]", 1, "an op vector is [process type f value]"),
        ("[0 :invoke :read nil]\n[0 :done :read nil]", 2, "its type :invoke/:ok/:fail/:info, got [0 :done"),
        ("[[0 :invoke :read nil 1 2]]", 1, "an op vector is"),
        ("[0 :invoke :read nil]\n{:process 0 :type :done :f :read}", 2, ":type must be"),
        ("[{:process 0 :type :invoke :f :r :value nil}\n {:process 0 :type :done :f :r}]", 2, ":type must be"),
    ],
)
def test_malformed_histories_name_line_and_problem(text: str, line: int, problem: str) -> None:
    with pytest.raises(HistoryError) as caught:
        parse_edn_history(text, "x.edn")
    assert caught.value.line == line and problem in caught.value.problem


def test_written_edn_reads_back_identically(tmp_path: Path) -> None:
    ops = [
        Op(0, 10, "invoke", 3, "send", {"topic": "t0", "partition": 1, "value": "3-1"}),
        Op(1, 20, "ok", 3, "send", {"topic": "t0", "partition": 1, "value": "3-1", "offset": 4}, node="n1"),
        Op(2, 30, "info", "nemesis", "start-partition", {"targets": ["n1"]}, error="boom"),
    ]
    path = tmp_path / "history.edn"
    write_edn_history(path, ops)
    text = path.read_text()
    assert ":process :nemesis" in text and ":f :send" in text and ":topic \"t0\"" in text
    assert read_edn_history(path) == ops


def test_a_history_that_cannot_be_written_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    """Before: the EDN was written to a fixed ``history.edn.tmp`` beside the target, left there
    when an op could not be written (and shared by two writers of one target). Now it is
    written as every output is (a temporary file of its own, removed on failure), and a
    directory in the way is refused in one line rather than failing in the rename."""
    from floodmark.errors import UsageError

    path = tmp_path / "history.edn"
    path.write_text("the old history\n")
    ops = [Op(0, 10, "invoke", 0, "write", 1), Op(1, 20, "ok", 0, "write", object())]
    with pytest.raises(TypeError, match="cannot write object as EDN"):
        write_edn_history(path, ops)
    assert path.read_text() == "the old history\n" and [p.name for p in tmp_path.iterdir()] == ["history.edn"]
    (tmp_path / "dir.edn").mkdir()
    with pytest.raises(UsageError, match=f"^{tmp_path / 'dir.edn'}: is a directory$"):
        write_edn_history(tmp_path / "dir.edn", ops[:1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.edn", "history.edn"]


def test_a_stream_is_read_an_op_at_a_time() -> None:
    # Each op is built as its map is read: at the peak, little more than the ops themselves
    # (holding every map until the last was read peaked at 2.5 times the ops).
    text = "".join(f"{{:index {i}, :time {i * 1_000_003}, :type :{('invoke', 'ok')[i % 2]}, :process {i % 10}, "
                   f":f :write, :value {i % 5}}}\n" for i in range(10_000))
    tracemalloc.start()
    ops = parse_edn_history(text)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(ops) == 10_000
    assert peak < 1.3 * kept


def test_a_problem_in_a_stream_is_the_first_in_the_file() -> None:
    # Ops are built as their maps are read, so a bad op is named before a bad form after it.
    with pytest.raises(HistoryError) as caught:
        parse_edn_history("{:process 0 :type :done :f :read}\n{:a 1", "x.edn")
    assert caught.value.line == 1 and ":type must be" in caught.value.problem


def test_knossos_op_vectors_read_as_the_maps_they_stand_for() -> None:
    """Knossos's older test data writes an op as ``[process type f value]``, one per line
    (an error may follow the value), as its ``read-history`` reads them; in a vector too."""
    maps = parse_edn_history("{:process 70 :type :invoke :f :cas :value [2 1]}\n"
                             "{:process 70 :type :fail :f :cas :value [2 1] :error :conn-lost}\n"
                             "{:process :nemesis :type :info :f :start :value nil}\n"
                             "{:process 71 :type :invoke :f :read :value nil}\n")
    stream = parse_edn_history("[70  :invoke :cas  [2 1]]\n[70 :fail :cas [2 1] :conn-lost]\n"
                               "[:nemesis :info :start nil]\n[71 :invoke :read]\n")
    vector = parse_edn_history("[[70 :invoke :cas [2 1]] [70 :fail :cas [2 1] :conn-lost]\n"
                               " [:nemesis :info :start nil] [71 :invoke :read nil]]")
    assert stream == maps and vector == maps
    assert maps[1].error == "conn-lost" and maps[2].process == "nemesis" and maps[3].value is None


@given(st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["invoke", "ok", "fail", "info"]),
                          st.sampled_from(["read", "write", "cas"]),
                          st.one_of(st.none(), st.integers(-5, 5), st.lists(st.integers(0, 4), min_size=2, max_size=2))),
                min_size=1, max_size=12))
def test_op_vectors_and_op_maps_are_the_same_history(ops: list[tuple[int, str, str, object]]) -> None:
    def value(v: object) -> str:
        return "nil" if v is None else edn.dumps(v)

    as_maps = "\n".join(f"{{:process {p} :type :{t} :f :{f} :value {value(v)}}}" for p, t, f, v in ops)
    as_vectors = "\n".join(f"[{p} :{t} :{f} {value(v)}]" for p, t, f, v in ops)
    assert parse_edn_history(as_vectors) == parse_edn_history(as_maps)
    assert parse_edn_history(f"[{as_vectors}]") == parse_edn_history(as_maps)


# ------------------------------------------------------------------ processes


def test_a_keyword_process_and_a_string_process_of_one_name_are_two_processes() -> None:
    """(regression, 2026-11-28) In Clojure ``:a`` is not ``"a"``. Both were named a: an ok of
    process "a" closed the invocation of process :a (a register read by it passed, VALID), and
    :a and "a" each invoking once were refused as one process invoking twice."""
    with pytest.raises(HistoryError) as caught:
        parse_edn_history('{:process :a :type :invoke :f :write :value 1}\n'
                          '{:process "a" :type :ok :f :write :value 1}\n', "x.edn", check_pairs=True)
    assert str(caught.value) == "x.edn:2: a ok completion of process '\"a\"' with no invocation open"
    ops = parse_edn_history('{:process :a :type :invoke :f :write :value 1}\n'
                            '{:process "a" :type :invoke :f :read :value nil}\n'
                            '{:process "a" :type :ok :f :read :value 0}\n'
                            '{:process :a :type :ok :f :write :value 1}\n', check_pairs=True)
    assert [op.process for op in ops] == ["a", '"a"', '"a"', "a"]


def test_only_the_keyword_nemesis_is_the_nemesis() -> None:
    """(regression, 2026-11-28) A string "nemesis" process was the nemesis, whose ops no
    checker judges: a write of 5 by it, then a read of the register's 0, passed. In Clojure
    "nemesis" is not :nemesis; it is an ordinary process, as every other that is no integer."""
    nemesis, string = parse_edn_history('{:process :nemesis :type :info :f :start :value nil}\n'
                                        '{:process "nemesis" :type :invoke :f :write :value 5}\n')
    assert nemesis.process == NEMESIS and not nemesis.is_client
    assert string.process == '"nemesis"' and string.is_client
    with pytest.raises(HistoryError) as caught:
        parse_edn_history('{:process "nemesis" :type :info :f :start :value nil}\n', "x.edn", check_pairs=True)
    assert str(caught.value) == ("x.edn:1: a info completion of process '\"nemesis\"' with no invocation open "
                                 '(the nemesis is :nemesis; a string "nemesis" is an ordinary process)')


def test_a_write_by_a_string_nemesis_process_is_judged(tmp_path: Path) -> None:
    from floodmark.cli import main

    path = tmp_path / "h.edn"
    path.write_text('{:process "nemesis", :type :invoke, :f :write, :value 5}\n'
                    '{:process "nemesis", :type :ok, :f :write, :value 5}\n'
                    "{:process 0, :type :invoke, :f :read, :value nil}\n"
                    "{:process 0, :type :ok, :f :read, :value 0}\n")
    assert main(["check", str(path)]) == 1  # (was 0: the write was the nemesis's)


_PROCESSES = ["0", "1", ":a", '"a"', ":b", '"b"', ":nemesis", '"nemesis"', '"a b"', ":a/b", '"\\"a\\""']


@given(st.lists(st.tuples(st.sampled_from(_PROCESSES), st.sampled_from(["invoke", "ok", "info"])), min_size=1,
                max_size=10))
def test_processes_are_one_exactly_when_clojure_finds_their_values_equal(ops: list[tuple[str, str]]) -> None:
    """Property: two ops are of one process exactly when their ``:process`` values are equal
    in Clojure (an integer, a keyword and a string never are), only ``:nemesis`` is the
    nemesis, and an op written back as EDN has the process it was read with."""
    text = "".join(f"{{:process {p} :type :{t} :f :write :value 1}}\n" for p, t in ops)
    read = parse_edn_history(text)
    values = [edn.loads(p) for p, _ in ops]
    for op, value in zip(read, values, strict=True):
        assert (op.process == NEMESIS) == (type(value) is edn.Keyword and value == "nemesis")
        for other, other_value in zip(read, values, strict=True):
            same = type(value) is type(other_value) and value == other_value
            assert (op.process == other.process) == same
    again = parse_edn_history("\n".join(op_to_edn(op, keyword_keys=False) for op in read))
    assert [op.process for op in again] == [op.process for op in read]
