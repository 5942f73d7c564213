import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.contracts.history import (
    OP_TYPES,
    HistoryError,
    HistoryWriter,
    Op,
    iter_history,
    op_from_dict,
    pair_ops,
    read_history,
    write_history,
)


def test_writer_appends_dense_flushed_lines(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        w.append(10, "invoke", 0, "send", {"topic": "t0", "partition": 1, "value": "0-1"})
        # Readable before close: every line is flushed as written.
        assert len(path.read_text().splitlines()) == 1
        w.append(20, "ok", 0, "send", {"topic": "t0", "partition": 1, "value": "0-1", "offset": 0})
        w.append(30, "info", "nemesis", "start-partition", {"shape": "halves"})
    ops = read_history(path)
    assert [o.index for o in ops] == [0, 1, 2]
    assert ops[1].value["offset"] == 0
    assert ops[2].process == "nemesis" and not ops[2].is_client


def test_round_trip_keeps_optional_and_extra_fields(tmp_path):
    op = Op(0, 5, "fail", 3, "send", {"v": 1}, node="n2", error="NOT_LEADER", extra={"x": 1})
    path = tmp_path / "h.jsonl"
    write_history(path, [op])
    (back,) = read_history(path)
    assert back == op and back.extra == {"x": 1} and back.node == "n2"


def test_torn_tail_is_ignored_but_mid_file_garbage_is_an_error(tmp_path):
    good = Op(0, 1, "invoke", 0, "poll").to_json()
    path = tmp_path / "h.jsonl"
    path.write_text(good + "\n" + '{"index": 1, "ti')
    assert len(list(iter_history(path))) == 1
    path.write_text(good + "\n" + "{oops\n" + good + "\n")
    with pytest.raises(HistoryError) as e:
        list(iter_history(path))
    assert e.value.line == 2 and "h.jsonl:2" in str(e.value)


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"time": 0, "type": "ok", "process": 0, "f": "x"}, "missing field 'index'"),
        ({"index": -1, "time": 0, "type": "ok", "process": 0, "f": "x"}, "index"),
        ({"index": 0, "time": 0, "type": "done", "process": 0, "f": "x"}, "type must be"),
        ({"index": 0, "time": 0, "type": "ok", "process": 1.5, "f": "x"}, "process"),
        ([1, 2], "expected a JSON object"),
        # (regression, 2026-11-28: a read completed with "vaule": 7 was judged a read of null)
        ({"index": 0, "time": 0, "type": "ok", "process": 0, "f": "read", "vaule": 7}, "missing field 'value'"),
        # (regression, 2026-11-28: a get completed with {"key": "x", "vaule": 7}, and a log read with
        # "vaule" in its completion, were judged a get of null and a read of nothing)
        ({"index": 0, "time": 0, "type": "ok", "process": 0, "f": "get", "value": {"key": "x", "vaule": 7}},
         r"^f.jsonl:7: missing field 'value' in its key-value map \(null if the key holds none\)$"),
        ({"index": 0, "time": 0, "type": "ok", "process": 0, "f": "read",
          "value": {"topic": "t0", "partition": 0, "offset": 3, "vaule": 7}},
         r"^f.jsonl:7: missing field 'value' in the read's completion \(null for a read of nothing\)$"),
    ],
)
def test_malformed_ops_name_the_problem(record, problem):
    with pytest.raises(HistoryError, match=problem):
        op_from_dict(record, "f.jsonl", 7)


_INNER_FIELDS = ["key", "topic", "partition", "offset", "value", "vaule"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([0, 3, "nemesis", "w"]), st.sampled_from(sorted(OP_TYPES)),
       st.sampled_from(["get", "put", "append", "read", "write", "cas", "send", "poll", "final-read"]),
       st.sets(st.sampled_from(_INNER_FIELDS)))
def test_an_inner_value_is_required_exactly_where_it_is_read(process, op_type, f, fields):
    """Property: a client op's object value without a "value" is refused, naming its line, when
    it is a key-value map (a get, put or append naming a "key") or an ok read's log completion
    (naming a "topic" and an "offset"), and read as it is otherwise (a read invoked, one that
    failed, the nemesis's); the pipeline's fast path lets through exactly what the reader reads."""
    from floodmark.pipeline.chunks import _valid_op

    record = {"index": 0, "time": 0, "type": op_type, "process": process, "f": f,
              "value": {name: 1 for name in fields}}
    kv_map = "key" in fields and f in ("get", "put", "append")
    log_read = f == "read" and op_type == "ok" and {"topic", "offset"} <= fields
    refused = process != "nemesis" and "value" not in fields and (kv_map or log_read)
    if refused:
        with pytest.raises(HistoryError, match=r"^f.jsonl:7: missing field 'value' in "):
            op_from_dict(record, "f.jsonl", 7)
    else:
        assert op_from_dict(record, "f.jsonl", 7).value == record["value"]
    assert _valid_op(record) is not refused


def test_indices_must_be_dense(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(json.dumps(Op(i, i, "invoke", 0, "x").to_dict()) for i in (0, 2)) + "\n")
    with pytest.raises(HistoryError, match="out of sequence"):
        read_history(path)


def test_pair_ops_matches_completions_per_process():
    ops = [
        Op(0, 0, "invoke", 0, "send"),
        Op(1, 1, "invoke", 1, "send"),
        Op(2, 2, "ok", 1, "send"),
        Op(3, 3, "info", 0, "send"),
        Op(4, 4, "invoke", 2, "poll"),
    ]
    assert pair_ops(ops) == {0: 3, 1: 2}


def test_a_completion_of_another_function_than_the_one_invoked_is_refused(tmp_path) -> None:
    from floodmark.contracts.history import HistoryError, read_history

    path = tmp_path / "history.jsonl"
    path.write_text('{"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "read", "value": null}\n'
                    '{"index": 1, "time": 1, "type": "ok", "process": 0, "f": "re", "value": 1}\n')
    with pytest.raises(HistoryError, match="history.jsonl:2: a ok completion of 're' closes process 0's invocation of 'read' on line 1"):
        read_history(path, check_pairs=True)


@pytest.mark.parametrize("next_type", ["invoke", "ok", "info"])
def test_an_op_of_a_process_after_its_op_ended_info_is_refused(tmp_path, next_type) -> None:
    # Found by hunting a real run's history: a send turned info whose process went on sending
    # was judged VALID, though a process whose op ended info never issues another (it may
    # still be acting in the system; the harness goes on under a new process, as Jepsen does).
    path = tmp_path / "history.jsonl"
    ops = [Op(0, 0, "invoke", 0, "send", {"topic": "t0", "partition": 0, "value": "a"}),
           Op(1, 1, "info", 0, "send", {"topic": "t0", "partition": 0, "value": "a"}),
           Op(2, 2, "invoke", 1, "send", {"topic": "t0", "partition": 0, "value": "b"}),
           Op(3, 3, "ok", 1, "send", {"topic": "t0", "partition": 0, "value": "b", "offset": 0}),
           Op(4, 4, next_type, 0, "send", {"topic": "t0", "partition": 0, "value": "c"})]
    write_history(path, ops)
    article = "an"
    with pytest.raises(HistoryError, match=f"history.jsonl:5: {article} {next_type} of process 0 after its op on "
                                           "line 2 ended info: a process whose op ended info never issues another"):
        read_history(path, check_pairs=True)
    write_history(path, ops[:4] + [Op(4, 4, "invoke", 2, "send", {"topic": "t0", "partition": 0, "value": "c"})])
    assert len(read_history(path, check_pairs=True)) == 5  # its worker, as a new process: read


def _with_a_key_twice(tmp_path):
    ops = [Op(0, 0, "invoke", 0, "send", {"topic": "t0", "partition": 0, "value": "a"}),
           Op(1, 1, "ok", 0, "send", {"topic": "t0", "partition": 0, "value": "a", "offset": 0})]
    path = tmp_path / "history.jsonl"
    write_history(path, ops)
    path.write_text(path.read_text().replace('"type":"ok"', '"type":"fail","type":"ok"'))
    return path, ops


def test_an_op_naming_a_key_twice_is_refused_by_every_reader(tmp_path):
    """orjson keeps the last of two values: ``"type":"fail","type":"ok"`` read as an ok send,
    and judged so. Which was meant cannot be told: every reader refuses the line."""
    from floodmark.contracts.history import parse_history
    from floodmark.formats.detect import load_history

    path, _ = _with_a_key_twice(tmp_path)
    problem = f"{path}:2: the key 'type' twice in one object (which one was meant cannot be told)"
    for read in (read_history, lambda p: list(iter_history(p)), lambda p: parse_history(p.read_bytes(), str(p)),
                 lambda p: load_history(str(p))):
        with pytest.raises(HistoryError) as refused:
            read(path)
        assert str(refused.value) == problem


def test_a_history_starting_with_a_byte_order_mark_reads_as_without(tmp_path):
    from floodmark.contracts.history import parse_history
    from floodmark.formats.detect import load_history

    path, ops = _with_a_key_twice(tmp_path)
    write_history(path, ops)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert read_history(path, check_pairs=True) == ops
    assert list(iter_history(path)) == ops
    assert parse_history(path.read_bytes(), str(path)) == ops
    loaded = load_history(str(path))
    assert loaded.format == "jsonl" and loaded.ops == ops


@pytest.mark.parametrize("times", [(5, 4), (0, -1), (10, 10, 9)])
def test_time_going_back_is_refused_where_it_goes_back(tmp_path, times):
    """One monotonic clock stamps every op as it is recorded: a history whose time goes back
    was reordered or edited, and is refused naming the line (it was judged as it stood)."""
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(Op(i, t, "invoke", i, "x").to_dict()) + "\n" for i, t in enumerate(times)))
    with pytest.raises(HistoryError, match=rf"h.jsonl:{len(times)}: time {times[-1]} is before the previous op's"):
        read_history(path)
    from floodmark.contracts.history import parse_history

    with pytest.raises(HistoryError, match="is before the previous op's"):
        parse_history(path.read_bytes(), str(path))


def test_equal_times_are_in_order(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(Op(i, 7, "invoke", i, "x").to_dict()) + "\n" for i in range(3)))
    assert len(read_history(path)) == 3
