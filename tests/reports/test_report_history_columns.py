"""Loading a history for reporting: columns, lazy ops, the contract's validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from floodmark.contracts.history import HistoryError, Op, pair_ops, write_history
from floodmark.reports.history_columns import HistoryColumns, load_history


def _ops() -> list[Op]:
    return [
        Op(0, 10, "invoke", 0, "send", {"topic": "t0", "partition": 0, "value": "0-1"}),
        Op(1, 20, "invoke", "nemesis", "start-kill", None),
        Op(2, 30, "ok", 0, "send", {"topic": "t0", "partition": 0, "value": "0-1", "offset": 0}, node="n1"),
        Op(3, 40, "invoke", 1, "poll", [{"topic": "t0", "partition": 0, "offset": 0}]),
        Op(4, 50, "info", "nemesis", "start-kill", {"pids": [7]}),
    ]


def test_columns_lazy_ops_and_pairs_match_the_contract(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_history(path, _ops())
    history = load_history(path)
    assert len(history) == 5 and history.time == [10, 20, 30, 40, 50]
    assert history.type[2] == "ok" and history.f[3] == "poll" and history.nemesis_indices == [1, 4]
    assert history[2] == _ops()[2] and history[-1].value == {"pids": [7]} and history[2].node == "n1"
    assert history.pairs() == pair_ops(_ops())
    assert list(history) == _ops() and history[1:3] == _ops()[1:3]
    assert HistoryColumns.from_ops(_ops()).pairs() == {0: 2, 1: 4}


def test_torn_last_line_is_ignored_but_bad_lines_elsewhere_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_history(path, _ops())
    with open(path, "a") as f:
        f.write('{"index": 5, "time": 6')
    assert len(load_history(path)) == 5
    lines = path.read_text().splitlines()
    lines[2] = "{nope"
    path.write_text("\n".join(lines[:5]) + "\n")
    with pytest.raises(HistoryError) as e:
        load_history(path)
    assert e.value.line == 3 and "not valid JSON" in e.value.problem


@pytest.mark.parametrize("change, problem", [
    ({"index": 7}, "out of sequence"),
    ({"time": "soon"}, "time must be an integer"),
    ({"type": "done"}, "type must be one of"),
    ({"process": [1]}, "process must be"),
    ({"f": 3}, "f must be a string"),
])
def test_malformed_fields_name_the_line_and_problem(tmp_path: Path, change: dict, problem: str) -> None:
    rows = [op.to_dict() for op in _ops()]
    rows[3].update(change)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(HistoryError) as e:
        load_history(path)
    assert e.value.line == 4 and problem in e.value.problem


def test_missing_field_is_named(tmp_path: Path) -> None:
    rows = [op.to_dict() for op in _ops()]
    del rows[1]["f"]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(HistoryError, match="missing field 'f'"):
        load_history(path)


def test_a_byte_order_mark_is_dropped_and_a_key_given_twice_refused(tmp_path: Path) -> None:
    """As the history's own reader does: a BOM some editor saved is no part of the first op,
    and an op naming a key twice (``"type":"fail","type":"ok"``) is refused, naming the key."""
    path = tmp_path / "history.jsonl"
    write_history(path, _ops())
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert list(load_history(path)) == _ops()
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"type":"ok"', b'"type":"fail","type":"ok"')
    path.write_bytes(b"".join(lines))
    with pytest.raises(HistoryError) as refused:
        load_history(path)
    assert str(refused.value) == f"{path}:3: the key 'type' twice in one object (which one was meant cannot be told)"
    lines[2] = lines[2].replace(b'"offset":0', b'"offset":0,"offset":7')  # inside the value
    path.write_bytes(b"".join(lines).replace(b'"type":"fail",', b""))
    with pytest.raises(HistoryError, match=f"^{path}:3: the key 'offset' twice"):
        load_history(path)
