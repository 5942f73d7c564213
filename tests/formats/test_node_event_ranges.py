"""Node events' integer fields: each reads exactly within its range, what the field is in
Kafka's protocol, and is refused outside it in one line naming the file, the line and the field
(:mod:`floodmark.contracts.node_event_ranges`). The inputs that once gave a verdict instead
(kept in ``tests/fuzz_regressions/node-events/bounds-*``) are refused end to end, through
``floodmark check``."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
import tempfile
import typing
from pathlib import Path
from typing import Any

import pytest
from checkers_fixtures import make_run_dir
from hypothesis import given, settings
from hypothesis import strategies as st
from node_event_examples import WRITTEN, line

from floodmark.cli import main
from floodmark.contracts.node_events import NodeEventError, event_from_dict, iter_events

INT32, INT64 = 2**31 - 1, 2**63 - 1
# Each integer field's range, by name, as the test reads Kafka's protocol (stated apart from
# the reader's table, so a slip in either is a failure): offsets 64-bit from 0, leader epochs
# 32-bit from -1, partitions and broker ids 32-bit from 0 (a leader or a fetching replica from
# -1: none, a client), controller epochs and ZooKeeper versions any 32-bit integer, zxids
# 64-bit from 0, incarnations 64-bit from -1, acks -1, 0 or 1.
EXPECTED: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("offset", "first_offset", "from_offset", "to_offset", "high_watermark", "previous",
                     "log_end", "joined_log_end", "joined_progress"), (0, INT64)),
    **dict.fromkeys(("leader_epoch", "epoch", "epochs", "request_epoch", "current_leader_epoch",
                     "requested_leader_epoch"), (-1, INT32)),
    **dict.fromkeys(("partition", "partitions", "broker", "isr", "joined", "requester"), (0, INT32)),
    **dict.fromkeys(("leader", "replica"), (-1, INT32)),
    **dict.fromkeys(("controller_epoch", "zk_version"), (-2**31, INT32)),
    "zxid": (0, INT64),
    **dict.fromkeys(("incarnation", "requester_incarnation"), (-1, INT64)),
    "acks": (-1, 1),
}
# Where a kind says a broker leads (or the controller chose one to), its leader epoch is from
# 0, and an ISR written for a leader names one.
LEADS = (0, INT32)
EXPECTED_IN_KIND = {("became_leader", "leader_epoch"): LEADS, ("acked", "leader_epoch"): LEADS,
                    ("isr_changed", "leader_epoch"): LEADS, ("leader_elected", "leader_epoch"): LEADS,
                    ("isr_written", "leader_epoch"): LEADS, ("isr_written", "requested_leader_epoch"): LEADS,
                    ("isr_written", "leader"): (0, INT32)}


def _holds_integers(hint: Any) -> bool:
    if hint is int:
        return True
    return any(_holds_integers(a) for a in typing.get_args(hint) if a is not Ellipsis)


def _integer_fields(body: Any) -> dict[str, Any]:
    """The fields of ``body``'s kind that hold integers, each with a value in range."""
    hints = typing.get_type_hints(type(body))
    return {f.name: [1] if "tuple" in str(hints[f.name]) else 1
            for f in dataclasses.fields(body) if _holds_integers(hints[f.name])}


# Every example line with each of its kind's integer fields present (an optional one absent
# from the example given a value in range), and those fields.
FULL = []
for _rest, _body in WRITTEN:
    _d = json.loads("{" + _rest + "}")
    _integers = _integer_fields(_body)
    FULL.append(({**_integers, **_d}, list(_integers)))
CASES = [(n, name) for n, (_, names) in enumerate(FULL) for name in names]


def expected_range(kind: str, name: str) -> tuple[int, int]:
    return EXPECTED_IN_KIND.get((kind, name)) or EXPECTED[name]


def test_every_integer_field_of_every_kind_has_an_expected_range() -> None:
    assert {name for _, name in CASES} == set(EXPECTED)
    assert {f"{d['kind']}.{name}" for d, names in FULL for name in names} >= {
        f"{kind}.{name}" for kind, name in EXPECTED_IN_KIND}


def _placed(d: dict[str, Any], name: str, value: int) -> dict[str, Any]:
    """``d`` with ``value`` as the integer of field ``name`` (in a list's last item where it
    is a list)."""
    fields = {"node": "n1", "seq": 0, "wall": 1.5, **d}
    if name == "partitions":  # (topic, partition) pairs
        fields[name] = [["t", 0], ["t", value]]
    elif isinstance(d[name], list):
        fields[name] = [*d[name][:1], value]
    else:
        fields[name] = value
    return fields


def _edges(kind_and_name: tuple[int, str]) -> st.SearchStrategy[int]:
    d, _ = FULL[kind_and_name[0]]
    lowest, highest = expected_range(d["kind"], kind_and_name[1])
    return st.sampled_from((lowest - 1, lowest, highest, highest + 1, 2**31, 2**63, 10**41, -2**63 - 1))


_values = st.integers(-2**70, 2**70) | st.integers(-3, 3) | st.integers(10**20, 10**400) | st.integers(-10**400, -10**20)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(CASES).flatmap(lambda case: st.tuples(st.just(case), _values | _edges(case))))
def test_an_integer_field_reads_exactly_when_within_its_range(drawn: tuple[tuple[int, str], int]) -> None:
    """Property: in every kind, each integer (of a field, or in a field's list) reads as
    written within its field's range, and outside it is refused as malformed, in one line
    naming the file, the line, the kind and the field: never read as a number no node can
    write (a wrong verdict instead of an error)."""
    (number, name), value = drawn
    d, _ = FULL[number]
    lowest, highest = expected_range(d["kind"], name)
    fields = _placed(d, name, value)
    if lowest <= value <= highest:
        got = getattr(event_from_dict(fields, "n1.jsonl", 1).body, name)
        assert got == (tuple(tuple(i) if isinstance(i, list) else i for i in fields[name])
                       if isinstance(got, tuple) else value)
    else:
        with pytest.raises(NodeEventError) as refused:
            event_from_dict(fields, "n1.jsonl", 1)
        message = str(refused.value)
        assert message.startswith(f"n1.jsonl:1: {d['kind']}: {name} "), message
        assert "\n" not in message and len(message) < 300, message


@pytest.mark.parametrize(("rest", "problem"), [
    ('"kind":"became_follower","topic":"t","partition":0,"leader_epoch":-2,"leader":1,"log_end":0',
     "became_follower: leader_epoch must be a leader epoch (-1 for none known, or more), got -2"),
    ('"kind":"appended","topic":"t","partition":0,"offset":-1,"epoch":0,"values":["a"],"role":"leader"',
     "appended: offset must be a whole number from 0, got -1"),
    ('"kind":"appended","topic":"t","partition":0,"offset":0,"epoch":0,"values":["a"],"role":"follower",'
     '"epochs":[0,-7]', "appended: epochs must be a leader epoch (-1 for none known, or more), got -7"),
    ('"kind":"hw_changed","topic":"t","partition":-3,"leader_epoch":0,"role":"leader","previous":0,'
     '"high_watermark":1,"log_end":1', "hw_changed: partition must be a whole number from 0, got -3"),
    ('"kind":"acked","topic":"t","partition":0,"offset":3,"high_watermark":-1,"acks":-1',
     "acked: high_watermark must be a whole number from 0, got -1"),
    # beyond the field's width in Kafka's protocol
    ('"kind":"acked","topic":"t","partition":0,"offset":3,"first_offset":100000000000000000000000000000000000000000,'
     '"high_watermark":3,"acks":-1', "acked: first_offset of 42 digits is beyond 2**63-1 (no log has such an "
                                     "offset: offsets are 64-bit)"),
    ('"kind":"acked","topic":"t","partition":0,"offset":3,"first_offset":9223372036854775808,'
     '"high_watermark":3,"acks":-1', "acked: first_offset 9223372036854775808 is beyond 2**63-1 (no log has "
                                     "such an offset: offsets are 64-bit)"),
    ('"kind":"acked","topic":"t","partition":0,"offset":3,"high_watermark":3,"acks":-1,'
     '"leader_epoch":99999999999999999999999', "acked: leader_epoch 99999999999999999999999 is beyond 2**31-1 "
                                               "(no leader has such an epoch: leader epochs are 32-bit)"),
    ('"kind":"became_follower","topic":"t","partition":2147483648,"leader_epoch":1,"leader":1,"log_end":0',
     "became_follower: partition 2147483648 is beyond 2**31-1 (no topic has such a partition: partition "
     "numbers are 32-bit)"),
    # a value whose meaning is closed
    ('"kind":"acked","topic":"t","partition":0,"offset":3,"high_watermark":3,"acks":2',
     "acked: acks must be -1 (all), 0 or 1, got 2"),
    # what the kind makes impossible: a leader without an epoch
    ('"kind":"became_leader","topic":"t","partition":0,"leader_epoch":-1,"isr":[1],"log_end":0,"high_watermark":0',
     "became_leader: leader_epoch must be a leader's epoch (from 0: a leader always has one), got -1"),
])
def test_an_integer_outside_its_range_names_the_file_line_field_and_why(tmp_path, rest, problem) -> None:
    path = tmp_path / "n1.jsonl"
    path.write_text(line(0, '"kind":"started","broker":1') + line(1, rest))
    with pytest.raises(NodeEventError) as refused:
        list(iter_events(path))
    assert str(refused.value) == f"{path}:2: {problem}"


@pytest.mark.parametrize(("envelope", "problem"), [
    ('"seq":9223372036854775808,"wall":1.5', "seq 9223372036854775808 is beyond 2**63-1 (no node numbers so many "
                                             "events: seq is 64-bit)"),
    ('"seq":1,"wall":1e16', "wall must be a time in seconds within 1e15 of 1970 (some 30 million years: no clock "
                            "is skewed so far), got 1e+16"),
    ('"seq":1,"wall":1e400', "inf is not a finite number"),
])
def test_an_envelope_beyond_any_node_names_the_file_and_line(tmp_path, envelope, problem) -> None:
    path = tmp_path / "n1.jsonl"
    path.write_text(line(0, '"kind":"started","broker":1') + f'{{"node":"n1",{envelope},"kind":"stopped"}}\n')
    with pytest.raises(NodeEventError) as refused:
        list(iter_events(path))
    assert str(refused.value) == f"{path}:2: {problem}"


# ---------------------------------------------------------------------- through floodmark check

REGRESSIONS = Path(__file__).resolve().parents[1] / "fuzz_regressions" / "node-events"
BOUNDS_REGRESSIONS = sorted(REGRESSIONS.glob("bounds-*"))


def test_the_bounds_regressions_are_there() -> None:
    assert len(BOUNDS_REGRESSIONS) >= 3


@pytest.mark.parametrize("regression", BOUNDS_REGRESSIONS, ids=lambda p: p.name)
def test_an_acknowledgement_beyond_its_range_is_an_error_through_check(regression: Path) -> None:
    """Each kept input (an ``acked`` line with an integer no node can write, which once gave
    a verdict: VALID for an offset beyond 64 bits, INVALID for a leader epoch beyond 32) put
    in place of an acknowledgement of a valid run: ``floodmark check`` exits 254 with one line
    naming the file, the line and the field, and no traceback."""
    hostile = json.loads(regression.read_text())
    [wrong] = [k for k, v in hostile.items() if type(v) is int and v > 2**31 - 1]  # the field no node can write
    with tempfile.TemporaryDirectory() as directory:
        run = make_run_dir(Path(directory))
        path, number = _first_acknowledgement(run)
        lines = path.read_text().splitlines(keepends=True)
        event = json.loads(lines[number - 1])
        lines[number - 1] = json.dumps({**event, wrong: hostile[wrong]}, separators=(",", ":")) + "\n"
        path.write_text("".join(lines))
        (run / "digest.json").unlink(missing_ok=True)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["check", str(run)])
        assert code == 254, out.getvalue() + err.getvalue()
        said = err.getvalue().strip()
        assert len(said.splitlines()) == 1 and "Traceback" not in said + out.getvalue(), said
        assert f"{path}:{number}: acked: {wrong} " in said, said


def _first_acknowledgement(run: Path) -> tuple[Path, int]:
    for path in sorted((run / "events").glob("*.jsonl")):
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            if json.loads(text)["kind"] == "acked":
                return path, number
    raise AssertionError(f"{run}: no acknowledgement")


def test_the_run_the_regressions_are_put_in_is_valid() -> None:
    with tempfile.TemporaryDirectory() as directory:
        run = Path(shutil.copytree(make_run_dir(Path(directory) / "a"), Path(directory) / "b"))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["check", str(run)])
        assert code == 0, out.getvalue() + err.getvalue()
