"""A damaged run is refused alike by `floodmark check`, the small ingest path and the large one.

One small sim run is copied and damaged once per rule `check` applies to a run's files (the
values a JSON line may hold, the head of a file, the order of a history, which node an event
file is, which run it is of, a node's lives): `check` refuses each copy with one line naming
the file and the line, and `analyze` must refuse it with the very same line whether it reads
the run with one task or cuts its files into many chunks (forced here with a tiny threshold
and chunk size, so each file is several chunks), and leave nothing of it in the store.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from spark_fixtures import spark  # noqa: F401

from floodmark.checkers.registry import check_run
from floodmark.cli import main
from floodmark.errors import SourceError, UsageError
from floodmark.pipeline.ingest import ingest, load_table
from floodmark.pipeline.records import find_runs, run_id_of

pytestmark = pytest.mark.spark

CHUNK_BYTES = 40_000  # the sim run's history is ~290 KB and each event file ~200 KB: several chunks each


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _write(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def _with_field(line: bytes, text: str) -> bytes:
    """``line`` (a JSON object and its newline) with ``text`` (``"name":value``) added last."""
    return line.rstrip(b"\n")[:-1] + b"," + text.encode() + b"}\n"


def _edit_line(path: Path, number: int, edit: Callable[[bytes], bytes]) -> None:
    lines = _lines(path)
    lines[number - 1] = edit(lines[number - 1])
    _write(path, lines)


def _add_field(file: str, number: int, text: str) -> Callable[[Path], None]:
    return lambda run: _edit_line(run / file, number, lambda line: _with_field(line, text))


def _event(run: Path, node: str, number: int) -> dict:
    return json.loads(_lines(run / "events" / f"{node}.jsonl")[number - 1])


def _set_event(run: Path, node: str, number: int, event: dict) -> None:
    _edit_line(run / "events" / f"{node}.jsonl", number, lambda _: (json.dumps(event) + "\n").encode())


def _reencode(file: str) -> Callable[[Path], None]:
    return lambda run: (run / file).write_bytes((run / file).read_text().encode("utf-16"))


def _blank_then_unpaired(run: Path) -> None:
    """A blank line early, then an invocation turned into a completion with none open."""
    path = run / "history.jsonl"
    lines = _lines(path)
    lines.insert(10, b"\n")
    for number in range(len(lines) // 2, len(lines)):
        if lines[number].strip():
            op = json.loads(lines[number])
            if op["type"] == "invoke" and op["process"] != "nemesis":
                lines[number] = (json.dumps({**op, "type": "ok"}) + "\n").encode()
                break
    _write(path, lines)


def _blank_then_time_back(run: Path) -> None:
    path = run / "history.jsonl"
    lines = _lines(path)
    lines.insert(5, b"\n")
    op = json.loads(lines[1500])
    lines[1500] = (json.dumps({**op, "time": 1}) + "\n").encode()
    _write(path, lines)


def _blank_then_index_gap(run: Path) -> None:
    path = run / "history.jsonl"
    lines = _lines(path)
    lines.insert(3, b"\n")
    del lines[1200]
    _write(path, lines)


def _nul(run: Path) -> None:
    """A NUL byte in n2's line 300 (within the head check reads), a line that is bad JSON too."""
    _edit_line(run / "events" / "n2.jsonl", 300, lambda line: line.replace(b'"kind"', b'"ki\0nd"', 1))


def _foreign_node(run: Path) -> None:
    _set_event(run, "n1", 700, {**_event(run, "n1", 700), "node": "n2"})


def _seq_again_far(run: Path) -> None:
    """Line 100's seq again on line 900 (another chunk's)."""
    _set_event(run, "n1", 900, {**_event(run, "n1", 900), "seq": _event(run, "n1", 100)["seq"]})


def _seq_again_near(run: Path) -> None:
    _set_event(run, "n1", 501, {**_event(run, "n1", 501), "seq": _event(run, "n1", 500)["seq"]})


def _stopped(run: Path, node: str, number: int) -> None:
    e = _event(run, node, number)
    _set_event(run, node, number, {"node": e["node"], "seq": e["seq"], "wall": e["wall"], "kind": "stopped"})


def _life_after_stop(run: Path) -> None:
    _stopped(run, "n3", 600)


def _life_after_stop_in_seq_order(run: Path) -> None:
    """In the file's order the stop is followed by a start; in the node's order (seq) by the
    event on line 1001, whose seq the start's line had: only the node's order is judged."""
    _stopped(run, "n1", 701)
    start, far = _event(run, "n1", 702), _event(run, "n1", 1001)
    _set_event(run, "n1", 702, {"node": "n1", "seq": far["seq"], "wall": start["wall"], "kind": "started",
                                "broker": 1, "run_id": _run_id(run)})
    _set_event(run, "n1", 1001, {**far, "seq": start["seq"]})


def _run_id(run: Path) -> str:
    return next(line.split(":", 1)[1].strip() for line in (run / "test.yaml").read_text().splitlines()
                if line.startswith("run_id:"))


def _kind_line(run: Path, node: str, kind: str, after: int) -> int:
    lines = _lines(run / "events" / f"{node}.jsonl")
    return next(n for n in range(after, len(lines) + 1) if json.loads(lines[n - 1])["kind"] == kind)


def _other_topic(run: Path) -> None:
    number = _kind_line(run, "n2", "appended", 400)
    _set_event(run, "n2", number, {**_event(run, "n2", number), "topic": "t9"})


def _other_partition(run: Path) -> None:
    number = _kind_line(run, "n2", "appended", 800)
    _set_event(run, "n2", number, {**_event(run, "n2", number), "partition": 7})


def _claims_another_broker(run: Path) -> None:
    e = _event(run, "n1", 650)
    _set_event(run, "n1", 650, {"node": "n1", "seq": e["seq"], "wall": e["wall"], "kind": "controller_elected",
                                "controller_epoch": 7, "broker": 2, "zxid": 99})


def _copied_broker(run: Path) -> None:
    """n2's file says, on line 1, that it is broker 1 (as n1's does)."""
    _set_event(run, "n2", 1, {**_event(run, "n2", 1), "broker": 1})


def _another_run(run: Path) -> None:
    e = _event(run, "n3", 1)
    assert e["kind"] == "started"
    _set_event(run, "n3", 1, {**e, "run_id": "deadbeef00000000"})


def _lone_cr(run: Path) -> None:
    """Lines 400 and 401 of n2 joined by a lone carriage return, which ends no line (``check``
    read them as two events, the chunks as one line of bad JSON)."""
    path = run / "events" / "n2.jsonl"
    lines = _lines(path)
    lines[399:401] = [lines[399].rstrip(b"\n") + b"\r" + lines[400]]
    _write(path, lines)


def _no_start(run: Path) -> None:
    path = run / "events" / "n3.jsonl"
    _write(path, _lines(path)[1:])


DAMAGES: dict[str, Callable[[Path], None]] = {
    "h-nan": _add_field("history.jsonl", 700, '"x":NaN'),
    "h-infinity": _add_field("history.jsonl", 900, '"x":-Infinity'),
    "h-overflow": _add_field("history.jsonl", 1100, '"x":1e400'),
    "h-surrogate": _add_field("history.jsonl", 1300, '"x":"\\ud800"'),
    "h-deep": _add_field("history.jsonl", 1500, '"x":' + "[" * 101 + "]" * 101),
    "h-very-deep": _add_field("history.jsonl", 1600, '"x":' + "[" * 5000 + "]" * 5000),
    "h-utf16": _reencode("history.jsonl"),
    "h-blank-unpaired": _blank_then_unpaired,
    "h-blank-time-back": _blank_then_time_back,
    "h-blank-index-gap": _blank_then_index_gap,
    "e-nan": _add_field("events/n1.jsonl", 600, '"x":NaN'),
    "e-overflow": _add_field("events/n3.jsonl", 1000, '"x":-1e999'),
    "e-deep": _add_field("events/n2.jsonl", 800, '"x":' + "{\"a\":" * 150 + "1" + "}" * 150),
    "e-utf16": _reencode("events/n2.jsonl"),
    "e-nul": _nul,
    "e-lone-cr": _lone_cr,
    "e-foreign-node": _foreign_node,
    "e-seq-again-far": _seq_again_far,
    "e-seq-again-near": _seq_again_near,
    "e-life-after-stop": _life_after_stop,
    "e-life-after-stop-seq-order": _life_after_stop_in_seq_order,
    "e-other-topic": _other_topic,
    "e-other-partition": _other_partition,
    "e-claims-another-broker": _claims_another_broker,
    "e-copied-broker": _copied_broker,
    "e-another-run": _another_run,
    "e-no-start": _no_start,
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sims = tmp_path_factory.mktemp("sims")
    assert main(["run", "--cluster", "sim", "--nemesis", "none", "--time-limit", "5", "--seed", "1",
                 "--store", str(sims)]) == 0
    (sim,) = find_runs(sims)
    root = tmp_path_factory.mktemp("store")
    shutil.copytree(sim, root / "intact" / sim.name)  # the control: ingested by both paths
    for name, damage in DAMAGES.items():
        run = root / name / sim.name
        shutil.copytree(sim, run)
        (run / "digest.json").unlink()  # (the files are damaged on purpose: judged as they are)
        damage(run)
    return root


@pytest.fixture(scope="module")
def check_said(store: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Test name -> `check`'s one-line refusal (on a copy: check writes results.json)."""
    scratch = tmp_path_factory.mktemp("checked")
    said: dict[str, str] = {}
    for run in find_runs(store):
        copy = scratch / run_id_of(run, store)
        shutil.copytree(run, copy)
        try:
            check_run(copy)
        except (SourceError, UsageError) as e:
            said[run.parent.name] = str(e).replace(str(copy), str(run))
    return said


@pytest.fixture(scope="module", params=["one-task-per-run", "in-chunks"])
def analyze_said(request, spark, store, tmp_path_factory):  # noqa: F811
    """Test name -> the ingestion's refusal, and the run ids the store holds afterwards."""
    parquet = tmp_path_factory.mktemp("parquet")
    options = {"large_run_bytes": 0, "chunk_bytes": CHUNK_BYTES} if request.param == "in-chunks" else {}
    report = ingest(spark, store, parquet, **options)
    held = {r.run_id for table in ("runs", "ops", "node_events", "anomalies")
            for r in load_table(spark, parquet, table).select("run_id").distinct().collect()}
    return {Path(path).parent.name: error for path, error in report.rejected}, held, report.ingested


def test_every_damage_is_refused_by_check(check_said):
    assert sorted(check_said) == sorted(DAMAGES)
    assert all("\n" not in message for message in check_said.values())


def test_the_large_path_cuts_each_file_into_several_chunks(store):
    run = next(find_runs(store / "intact"))
    assert (run / "history.jsonl").stat().st_size > 4 * CHUNK_BYTES
    assert all(p.stat().st_size > 3 * CHUNK_BYTES for p in (run / "events").glob("*.jsonl"))


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_analyze_refuses_as_check_does(check_said, analyze_said, damage):
    rejected, _, _ = analyze_said
    assert rejected.get(damage) == check_said[damage]


def test_the_store_holds_the_intact_run_and_nothing_of_the_refused_ones(store, analyze_said):
    _, held, ingested = analyze_said
    (intact,) = find_runs(store / "intact")
    assert ingested == [run_id_of(intact, store)]
    assert held == {run_id_of(intact, store)}

