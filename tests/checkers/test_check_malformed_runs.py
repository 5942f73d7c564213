"""``floodmark check`` on semantically malformed run directories: never a traceback, never an
exit code outside {0, 1, 2, 254}, and never VALID about a run it did not read or understand.

A valid run directory (the synthetic queue run the checker tests use, with node events and
test.yaml) is damaged in one of the ways a history or event file can be: a duplicate index,
time going back, a completion without an invocation, a second invocation on one process, an
op of a process after one of its ops ended info, an ok op whose value has the wrong type,
records read backwards, integers beyond 64 bits,
NaN and Infinity, lines that are no objects, byte order marks, CRLF line ends, a line cut
short, events with a number missing, events of a broker the run does not have, events after
a clean stop with no start between, a test.yaml that disagrees with the history. Hypothesis
picks the damage and where it lands; each damage says whether the run may still be judged
valid (a byte order mark at the start and CRLF line ends change nothing) or must not be.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from checkers_fixtures import make_run_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.checkers.registry import judge_history
from floodmark.cli import main
from floodmark.contracts.history import OpsRead, op_from_dict

EXIT_CODES = {0, 1, 2, 254}
_TEMPLATE: list[Path] = []


def _template() -> Path:
    """One valid run directory, made once, copied for each example."""
    if not _TEMPLATE:
        _TEMPLATE.append(make_run_dir(Path(tempfile.mkdtemp(prefix="floodmark-malformed-"))))
    return _TEMPLATE[0]


def check(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", str(path)])
    return code, out.getvalue(), err.getvalue()


def _rows(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]


def _write(run: Path, rows: list[Any]) -> None:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    (run / "history.jsonl").write_text(text)


def _index(rows: list[dict[str, Any]], data: st.DataObject, where: Callable[[dict[str, Any]], bool]) -> int:
    return data.draw(st.sampled_from([i for i, r in enumerate(rows) if where(r)]))


def _ok(f: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["type"] == "ok" and r["f"] == f and bool(r["value"])


def _invocation_of(rows: list[dict[str, Any]], at: int) -> int:
    return max(i for i in range(at) if rows[i]["type"] == "invoke" and rows[i]["process"] == rows[at]["process"])


# Each damage changes the run directory; it returns False where the run must not be VALID.
Damage = Callable[[Path, st.DataObject], bool]


def duplicate_index(run: Path, data: st.DataObject) -> bool:
    rows = _rows(run)
    at = data.draw(st.integers(1, len(rows) - 1))
    rows[at]["index"] = rows[at - 1]["index"]
    _write(run, rows)
    return False


def time_goes_back(run: Path, data: st.DataObject) -> bool:
    rows = _rows(run)
    at = data.draw(st.integers(1, len(rows) - 1))
    rows[at]["time"] = rows[at - 1]["time"] - data.draw(st.integers(1, 10**12))
    _write(run, rows)
    return False


def completion_without_invocation(run: Path, data: st.DataObject) -> bool:
    rows = _rows(run)
    completion = _index(rows, data, lambda r: r["type"] != "invoke" and r["process"] != "nemesis")
    del rows[_invocation_of(rows, completion)]
    for number, row in enumerate(rows):
        row["index"] = number
    _write(run, rows)
    return False


def invoke_twice(run: Path, data: st.DataObject) -> bool:
    rows = _rows(run)
    rows[_index(rows, data, lambda r: r["type"] != "invoke" and r["process"] != "nemesis")]["type"] = "invoke"
    _write(run, rows)
    return False


def an_op_after_info(run: Path, data: st.DataObject) -> bool:
    """A completion turned info whose process goes on: no process does after an op ended info."""
    rows = _rows(run)
    later = {r["process"] for r in rows[len(rows) // 2:]}
    rows[_index(rows, data, lambda r: r["type"] == "ok" and r["process"] in later
                and r["index"] < len(rows) // 2)]["type"] = "info"
    _write(run, rows)
    return False


ODD_VALUES = st.sampled_from([None, 1.5, True, "x", [1], {"a": 1}, [[1, 2]], [{"topic": "t0"}]])


def ok_value_of_the_wrong_type(run: Path, data: st.DataObject) -> bool:
    rows = _rows(run)
    f = data.draw(st.sampled_from(["send", "poll", "drain"]))
    at = _index(rows, data, _ok(f))
    if f == "send" and data.draw(st.booleans()):
        rows[at]["value"]["offset"] = data.draw(st.sampled_from([None, 1.5, True, "3", [0], -1]))
    elif f == "send":
        value = data.draw(st.sampled_from([1.5, True, None, [1]]))
        rows[at]["value"]["value"] = rows[_invocation_of(rows, at)]["value"]["value"] = value
    else:
        rows[at]["value"] = data.draw(ODD_VALUES)
    _write(run, rows)
    return False


def records_read_backwards(run: Path, data: st.DataObject) -> bool:
    rows = _rows(run)
    at = _index(rows, data, lambda r: _ok("poll")(r) and any(len(b["records"]) > 1 for b in r["value"]))
    batch = next(b for b in rows[at]["value"] if len(b["records"]) > 1)
    batch["records"].reverse()
    _write(run, rows)
    return False


def integer_beyond_64_bits(run: Path, data: st.DataObject) -> bool:
    rows = _rows(run)
    huge = 2**63 + data.draw(st.integers(0, 2**80))
    at = _index(rows, data, lambda r: _ok("send")(r) or (_ok("poll")(r) and any(b["records"] for b in r["value"])))
    if rows[at]["f"] == "send":
        rows[at]["value"]["offset"] = huge
    else:
        next(b for b in rows[at]["value"] if b["records"])["records"][0][0] = huge
    _write(run, rows)
    return False


def not_a_number(run: Path, data: st.DataObject) -> bool:
    rows = _rows(run)
    at = _index(rows, data, _ok("send"))
    token = data.draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))
    lines: list[Any] = [json.dumps(r) for r in rows]
    lines[at] = lines[at].replace(f'"offset": {rows[at]["value"]["offset"]}', f'"offset": {token}')
    _write(run, lines)
    return False


def a_line_that_is_no_object(run: Path, data: st.DataObject) -> bool:
    rows: list[Any] = _rows(run)
    rows.insert(data.draw(st.integers(0, len(rows) - 1)), data.draw(st.sampled_from(["[1]", "1", "null", '"op"', "[]"])))
    _write(run, rows)
    return False


def byte_order_mark(run: Path, data: st.DataObject) -> bool:
    path = run / data.draw(st.sampled_from(["history.jsonl", "events/n1.jsonl", "test.yaml"]))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    return True  # dropped where a file starts: the same run


def byte_order_mark_inside(run: Path, data: st.DataObject) -> bool:
    path = run / data.draw(st.sampled_from(["history.jsonl", "events/n1.jsonl"]))
    lines = path.read_bytes().splitlines(keepends=True)
    at = data.draw(st.integers(1, len(lines) - 1))
    lines[at] = b"\xef\xbb\xbf" + lines[at]
    path.write_bytes(b"".join(lines))
    return False


def crlf(run: Path, data: st.DataObject) -> bool:
    path = run / data.draw(st.sampled_from(["history.jsonl", "events/n2.jsonl"]))
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    return True


def a_line_cut_short_inside(run: Path, data: st.DataObject) -> bool:
    path = run / data.draw(st.sampled_from(["history.jsonl", "events/n1.jsonl", "events/n3.jsonl"]))
    lines = path.read_bytes().splitlines(keepends=True)
    at = data.draw(st.integers(0, len(lines) - 2))
    lines[at] = lines[at][: data.draw(st.integers(1, len(lines[at]) - 2))] + b"\n"
    path.write_bytes(b"".join(lines))
    return False


def events_with_a_number_missing(run: Path, data: st.DataObject) -> bool:
    path = run / "events" / data.draw(st.sampled_from(["n1.jsonl", "n2.jsonl", "n3.jsonl"]))
    lines = path.read_text().splitlines(keepends=True)
    del lines[data.draw(st.integers(0, len(lines) - 2))]
    path.write_text("".join(lines))
    return False


def events_of_a_node_the_run_does_not_have(run: Path, data: st.DataObject) -> bool:
    events = run / "events"
    source = data.draw(st.sampled_from(["n1", "n2", "n3"]))
    text = (events / f"{source}.jsonl").read_text().replace(f'"node":"{source}"', '"node":"n9"')
    (events / "n9.jsonl").write_text(text)
    return False


def events_after_a_clean_stop(run: Path, data: st.DataObject) -> bool:
    """A ``stopped`` with more of the node's events after it and no ``started`` between: the
    hw checker started the broker afresh at the stop, so a HW lowered after it passed."""
    path = run / "events" / data.draw(st.sampled_from(["n1.jsonl", "n2.jsonl", "n3.jsonl"]))
    events = [json.loads(line) for line in path.read_text().splitlines()]
    at = data.draw(st.integers(0, len(events) - 1))
    events.insert(at, {"node": events[at]["node"], "seq": at, "wall": events[at]["wall"], "kind": "stopped"})
    for seq, event in enumerate(events):
        event["seq"] = seq
    path.write_text("".join(json.dumps(event, separators=(",", ":")) + "\n" for event in events))
    return False


def events_missing(run: Path, data: st.DataObject) -> bool:
    node = data.draw(st.sampled_from(["n1", "n2", "n3", "all"]))
    if node == "all":
        shutil.rmtree(run / "events")
    elif data.draw(st.booleans()):
        (run / "events" / f"{node}.jsonl").unlink()
    else:
        (run / "events" / f"{node}.jsonl").write_text("")
    return False


def a_test_yaml_that_disagrees(run: Path, data: st.DataObject) -> bool:
    config = yaml.safe_load((run / "test.yaml").read_text())
    key, value = data.draw(st.sampled_from([("partitions", 1), ("topics", 0), ("nodes", 2), ("nodes", 5),
                                            ("workload", "log-lin")]))
    if key == "topics":  # (the history and events use t0 only: a topic fewer than t0 is none)
        value = 1
        config["partitions"] = 1
    config[key] = value
    (run / "test.yaml").write_text(yaml.safe_dump(config))
    return False


DAMAGES: list[Damage] = [
    duplicate_index, time_goes_back, completion_without_invocation, invoke_twice, an_op_after_info,
    ok_value_of_the_wrong_type,
    records_read_backwards, integer_beyond_64_bits, not_a_number, a_line_that_is_no_object, byte_order_mark,
    byte_order_mark_inside, crlf, a_line_cut_short_inside, events_with_a_number_missing,
    events_of_a_node_the_run_does_not_have, events_after_a_clean_stop, events_missing, a_test_yaml_that_disagrees,
]


def test_the_undamaged_run_is_valid() -> None:
    with tempfile.TemporaryDirectory() as directory:
        run = Path(shutil.copytree(_template(), Path(directory) / "run"))
        code, out, err = check(run)
        assert code == 0, out + err


def _judged(damage: Damage, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as directory:
        run = Path(shutil.copytree(_template(), Path(directory) / "run"))
        may_be_valid = damage(run, data)
        code, out, err = check(run)
        assert code in EXIT_CODES, (damage.__name__, code, out, err)
        # (a checker that crashed is unknown, with its error; a history that does not fit the
        # run's model is unknown for that reason, which names the op, and is no crash)
        assert "Traceback" not in out + err and "[error:" not in out, (damage.__name__, out, err)
        if code == 254:
            assert len(err.strip().splitlines()) == 1, err  # one line naming what is wrong
        assert may_be_valid or code != 0, (damage.__name__, out, err)
        if code != 254 and (run / "history.jsonl").is_file():
            _the_checkers_directly(run)


def _the_checkers_directly(run: Path) -> None:
    """The checker functions, on what the reader gave: none crashes (an error is unknown, and
    hides what the checker would have said)."""
    rows = [json.loads(line) for line in (run / "history.jsonl").read_bytes().splitlines() if line.strip()]
    ops = OpsRead(op_from_dict(r) for r in rows)
    for name, result in judge_history(ops, {}, None, checkers=["durability", "queue", "hw", "stats"]).items():
        assert "error" not in (result.stats or {}), (name, result.stats)


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__)
def test_a_damaged_run_is_never_valid_and_never_a_traceback(damage: Damage) -> None:
    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def judged(data: st.DataObject) -> None:
        _judged(damage, data)

    judged()


@pytest.mark.parametrize("name", ["history.jsonl", "events/n2.jsonl"])
def test_a_torn_last_line_is_said_and_leaves_no_op_vouched_for(name: str) -> None:
    """A last line cut short (a writer killed mid-line) is forgiven, with a warning naming it:
    never an error, and the ops before it are judged as they are."""
    with tempfile.TemporaryDirectory() as directory:
        run = Path(shutil.copytree(_template(), Path(directory) / "run"))
        path = run / name
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 20])
        code, out, err = check(run)
        assert code in (0, 1, 2), out + err
        assert "cut short" in err and name in err, err


@pytest.mark.parametrize("history", ["directory", "device"])
def test_a_history_that_is_no_file_is_named_as_such(history: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """It was refused as 'not a run directory (no history.jsonl)', naming the wrong cause."""
    run = tmp_path / "run"
    run.mkdir()
    if history == "directory":
        (run / "history.jsonl").mkdir()
    else:
        (run / "history.jsonl").symlink_to("/dev/zero")
    assert main(["check", str(run)]) == 254
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [f"floodmark check: error: {run / 'history.jsonl'}: {'is a directory, not a file' if history == 'directory' else 'is not a regular file'}: a run's history is a regular file"]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_test_yaml_that_is_a_fifo_or_a_device_is_named_at_once(kind: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO test.yaml was waited on for 10 s (a device read up to 1 MiB) before it was refused,
    where FIFO event and digest files are named at once."""
    run = Path(shutil.copytree(_template(), tmp_path / "run"))
    (run / "test.yaml").unlink()
    if kind == "fifo":
        os.mkfifo(run / "test.yaml")
    else:
        (run / "test.yaml").symlink_to("/dev/zero")
    started = time.monotonic()
    assert main(["check", str(run)]) == 254
    assert time.monotonic() - started < 5
    said = capsys.readouterr().err.strip().splitlines()
    problem = "is a FIFO, not a file" if kind == "fifo" else "is not a regular file"
    assert said == [f"floodmark check: error: {run / 'test.yaml'}: {problem}"]


@pytest.mark.parametrize("results", ["absent", "present"])
def test_a_run_directory_it_may_not_write_names_the_refusal(results: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """With no results.json yet, a read-only run directory was said to be 'no such file or
    directory' (results.json's absence, not why it could not be written). The tests run as
    root, whom a directory's mode does not stop: the kernel's refusal is stood in for where
    the temporary file is made."""
    import errno

    run = Path(shutil.copytree(_template(), tmp_path / "run"))
    (run / "results.json").unlink(missing_ok=True)
    if results == "present":
        assert main(["check", str(run)]) == 0
        capsys.readouterr()

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    assert main(["check", str(run)]) == 254
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [f"floodmark check: error: {run / 'results.json'}: cannot write: permission denied"]
