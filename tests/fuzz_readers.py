"""Every reader of user input, fed generated and mutated inputs: the fuzz targets.

Each target takes raw bytes and runs one reader over them (through a file, as a user would
hand it over). A reader may accept the input or refuse it with its own documented error,
which names the source; anything else (a traceback, a hang, another exception) is a bug.
Inputs are valid documents of each format drawn by Hypothesis and then mutated: slices
deleted, duplicated or replaced with hostile tokens (deep nesting, huge numbers, lone
surrogates, bytes that are not UTF-8, ratios over zero, tags and discards).

``tests/test_fuzz_readers.py`` runs a bounded number of examples per target in ``make test``;
``scripts/fuzz.py`` (``make fuzz``) runs thousands and keeps every failing input found in
``tests/fuzz_regressions/<target>/``, which the test suite replays.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from floodmark.errors import SourceError
from floodmark.formats.detect import load_history
from floodmark.harness.config import make_config
from floodmark.harness.schedule import ScheduleError, load_schedule
from floodmark.node_events import iter_events
from floodmark.reference.protocol import wire
from floodmark.results import read_results
from floodmark.run.digest import DigestError
from floodmark.run_config import check_names, read_test_config, read_yaml_mapping

REGRESSIONS = Path(__file__).parent / "fuzz_regressions"
COUNTS: Counter[str] = Counter()  # inputs tried per target in this process

HOSTILE = [
    b"[" * 1200, b"{" * 1200, b"(" * 1200, b"#_ " * 1200, b"#t " * 1200, b"- " * 300,
    b"1" * 450, b"9" * 5000, b"1/0", b"1" * 401 + b"/3", b"1e400", b"-1e400", b"NaN", b"Infinity",
    b'"\\ud800"', b"\\ud800", b"\xff\xfe", b"\xed\xa0\x80", b"\x00", b"\r", b"\n", b"\t", b"  ", b",",
    b"nil", b"null", b"true", b":invoke", b":ok", b":info", b"[1 2]", b"{:a 1 :a 2}", b'{"a":1}',
    b"#{[1] [1]}", b"{[1 2] 3}", b"#inst {[1] 2}", b"\\u0000", b"\\", b'"', b"'", b"::", b"0x10",
    b'{"type":[1]}', b'{"type":{"a":1}}', b"-1", b"1e308", b"1.5e-320", b".inf", b".nan", b"&a [*a]",
    b"jepsen.util - ", b"INFO  jepsen.util - 0\t:ok\t:read\tnil", b"{:process 0 :type :ok :f :read}",
    b"INFO", b"INFO  jepsen.ut", b" -\t", b"\t:ok\t:read\t", b"\t:timed-out", b"WARN  ", b"\xc3", b"\xef\xbb\xbf",
]


def mutations(base: bytes) -> st.SearchStrategy[bytes]:
    """``base`` itself or with a few slices deleted, duplicated or replaced by hostile tokens."""

    @st.composite
    def mutate(draw: Any) -> bytes:
        data = bytearray(base)
        for _ in range(draw(st.integers(0, 3))):
            at = draw(st.integers(0, len(data)))
            end = draw(st.integers(at, min(len(data), at + 40)))
            how = draw(st.sampled_from(("insert", "replace", "delete", "duplicate", "bytes")))
            token = draw(st.sampled_from(HOSTILE))
            if how == "insert":
                data[at:at] = token
            elif how == "replace":
                data[at:end] = token
            elif how == "delete":
                del data[at:end]
            elif how == "duplicate":
                data[at:at] = data[at:end]
            else:
                data[at:end] = draw(st.binary(max_size=8))
        return bytes(data)

    return mutate()


# -------------------------------------------------------------------------- valid inputs

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=6))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=4), inner, max_size=3), max_leaves=6)


@st.composite
def jsonl_history(draw: Any) -> bytes:
    lines = []
    for index in range(draw(st.integers(0, 8))):
        op = {"index": index, "time": index * 10, "type": draw(st.sampled_from(("invoke", "ok", "fail", "info"))),
              "process": draw(st.integers(0, 3) | st.just("nemesis")), "f": draw(st.sampled_from(("read", "write", "cas"))),
              "value": draw(_values)}
        lines.append(json.dumps(op))
    return ("\n".join(lines) + "\n").encode()


def _edn(value: Any) -> str:
    from floodmark.formats import edn

    return edn.dumps(value)


@st.composite
def edn_history(draw: Any) -> bytes:
    ops = []
    for _ in range(draw(st.integers(0, 8))):
        process = draw(st.integers(0, 3))
        op_type = draw(st.sampled_from(("invoke", "ok", "fail", "info")))
        f = draw(st.sampled_from(("read", "write", "cas", "get", "append")))
        ops.append(f"{{:process {process}, :type :{op_type}, :f :{f}, :value {_edn(draw(_values))}}}")
    vector = draw(st.booleans())
    return (("[" + "\n".join(ops) + "]") if vector else "\n".join(ops)).encode()


_CHATTER = ("INFO  jepsen.core - Worker 0 starting", "WARN  jepsen.util - retrying", "\tat jepsen.core$run.invoke",
            "{:valid? false, :op {:process 1, :type :ok, :f :read}}", "")


@st.composite
def text_log(draw: Any) -> bytes:
    lines = ["INFO  jepsen.core - starting"]
    for _ in range(draw(st.integers(0, 8))):
        sep = draw(st.sampled_from(("\t", "  ", " ", " \t")))
        dash = draw(st.sampled_from((" - ", "  - ", " -\t", " -")))
        value = draw(st.sampled_from(("nil", "3", "[1 4]", ":timed-out", '"a b"', "{:k #{1}}", "nil\tsql: OK")))
        lines.append(f"INFO  jepsen.util{dash}{draw(st.integers(0, 4) | st.just(':nemesis'))}{sep}:"
                     f"{draw(st.sampled_from(('invoke', 'ok', 'fail', 'info')))}{sep}:"
                     f"{draw(st.sampled_from(('read', 'write', 'cas')))}{sep}{value}")
        lines.append(draw(st.sampled_from(_CHATTER)))
    return ("\n".join(lines) + "\n").encode()


@st.composite
def node_events(draw: Any) -> bytes:
    lines = []
    for seq in range(draw(st.integers(0, 6))):
        event: dict[str, Any] = {"node": "n1", "seq": seq, "wall": draw(st.floats(0, 1e9)),
                                 "kind": draw(st.sampled_from(("became-leader", "hw-changed", "appended", "custom")))}
        event.update(draw(st.dictionaries(st.sampled_from(("topic", "partition", "leader_epoch", "hw", "isr", "offset")),
                                          _values, max_size=4)))
        lines.append(json.dumps(event))
    return ("\n".join(lines) + "\n").encode()


@st.composite
def results_file(draw: Any) -> bytes:
    anomaly = {"type": draw(st.sampled_from(("lost-write", "nonlinearizable"))), "ops": draw(st.lists(st.integers(0, 9))),
               "explanation": draw(st.text(max_size=10)), "details": draw(_values)}
    results = {"valid": draw(st.sampled_from((True, False, "unknown"))), "seed": draw(st.integers(0, 10)),
               "checkers": {"queue": {"valid": True, "anomalies": [anomaly], "stats": draw(_values)}}}
    return json.dumps(results).encode()


@st.composite
def previous_results_file(draw: Any) -> bytes:
    """A results file whose judgements may have any shape (a list, null, a string ...)."""
    judgement = st.fixed_dictionaries({}, optional={
        "valid": st.sampled_from((True, False, "unknown", 1, "yes", None)),
        "anomalies": st.lists(_values, max_size=2) | _values, "anomaly_counts": st.dictionaries(st.text(max_size=4), _values, max_size=2) | _values,
        "stats": st.dictionaries(st.text(max_size=4), _values, max_size=2) | _values}) | _values
    checkers = st.dictionaries(st.sampled_from(("hw", "queue", "stats")), judgement, max_size=3) | _values
    return json.dumps({"valid": draw(st.sampled_from((True, False, "unknown"))), "checkers": draw(checkers)}).encode()


_config_values = st.one_of(_scalars, st.floats(allow_nan=True, allow_infinity=True), st.lists(_scalars, max_size=2))


@st.composite
def test_yaml(draw: Any) -> bytes:
    keys = ("name", "seed", "cluster", "nodes", "workload", "nemesis", "time_limit", "variant", "topics",
            "partitions", "rate", "concurrency", "fault_duration", "acks", "unknown_key", "time-limit")
    lines = [f"{key}: {json.dumps(draw(_config_values))}" for key in draw(st.lists(st.sampled_from(keys), max_size=6))]
    return ("\n".join(lines) + "\n").encode()


@st.composite
def schedule_file(draw: Any) -> bytes:
    faults = [{"number": i, "kind": draw(st.sampled_from(("partition", "kill"))), "shape": "isolate-one",
               "start": draw(st.floats(0, 100)), "duration": draw(st.floats(0, 20)), "seed": draw(st.integers(0, 99))}
              for i in range(draw(st.integers(0, 4)))]
    return json.dumps({"seed": draw(st.integers(0, 9)), "time_limit": 60, "faults": faults}).encode()


@st.composite
def digest_file(draw: Any) -> bytes:
    sha = st.text("0123456789abcdef", min_size=64, max_size=64)
    names = ["run", "history.jsonl", *draw(st.lists(st.sampled_from(("events/n1.jsonl", "events/n2.jsonl")), max_size=2))]
    return json.dumps({name: draw(sha) for name in names}, indent=1).encode()


@st.composite
def wire_frame(draw: Any) -> bytes:
    from floodmark.reference.protocol import messages as m

    message = draw(st.sampled_from((
        m.ProduceRequest("t0", draw(st.integers(0, 3)), tuple(draw(st.lists(st.text(max_size=5), min_size=1, max_size=3)))),
        m.FetchRequest("t0", 0, draw(st.integers(0, 99)), max_wait=draw(st.floats(0, 10))),
        m.MetadataRequest(("t0",)),
        m.ProduceResponse(None, draw(st.integers(-1, 2**70)), 3, 1),
    )))
    return wire.encode_frame(draw(st.integers(0, 2**31)), message)[4:]


# -------------------------------------------------------------------------- the targets


def _through_file(data: bytes, name: str, read: Callable[[str], Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(data)
        read(path)


def _history(path: str) -> None:
    loaded = load_history(path)
    if loaded.format == "jsonl":  # every op line is read, but a torn last line said to be left out
        lines = sum(1 for line in Path(path).read_bytes().splitlines() if line.strip())
        torn = getattr(loaded.ops, "torn_tail", None)
        assert len(loaded.ops) + (torn is not None) == lines, f"{lines} lines, {len(loaded.ops)} ops, torn: {torn}"


def _report_history(path: str) -> None:
    from floodmark.reports.history_columns import load_history as load_columns

    columns = load_columns(path)
    list(columns)  # every op through the contract's own validation, as the report's tables do


def _events(path: str) -> None:
    list(iter_events(path))


def _previous_results(path: str) -> None:
    from floodmark.checkers.commands import _summary
    from floodmark.results import merge_validity, previous_verdicts

    kept, problem = previous_verdicts(path)
    if problem is not None:
        assert not kept and "\n" not in problem and path in problem, problem
    _summary({"checkers": kept})  # what check --checker prints of the judgements it keeps
    merge_validity(c.get("valid", "unknown") for c in kept.values())


def _config(path: str) -> None:
    config = read_test_config(path)
    if config is not None:
        check_names(config, path)  # as check judges a run's test.yaml
    make_config(read_yaml_mapping(path), path)


def _schedule(path: str) -> None:
    _, schedule = load_schedule(path)
    schedule.check_starts_within(60.0, path)  # as run --schedule and repro take it


def _digest(path: str) -> None:
    from floodmark.run.digest import load
    from floodmark.rundir import RunDir

    digests = load(RunDir(Path(path).parent))
    assert digests is not None and set(digests) >= {"run", "history.jsonl"}


def _frame(data: bytes) -> None:
    wire.decode_payload(data)


# target name -> (strategy of valid inputs, how to read them, the errors that mean "refused")
TARGETS: dict[str, tuple[st.SearchStrategy[bytes], Callable[[bytes], None], tuple[type[BaseException], ...]]] = {
    "history-jsonl": (jsonl_history(), lambda d: _through_file(d, "h.jsonl", _history), (SourceError,)),
    "history-edn": (edn_history(), lambda d: _through_file(d, "h.edn", _history), (SourceError,)),
    "history-jepsen-text": (text_log(), lambda d: _through_file(d, "h.log", _history), (SourceError,)),
    "report-history": (jsonl_history(), lambda d: _through_file(d, "history.jsonl", _report_history), (SourceError,)),
    "node-events": (node_events(), lambda d: _through_file(d, "n1.jsonl", _events), (SourceError,)),
    "results-json": (results_file(), lambda d: _through_file(d, "results.json", read_results), (ValueError,)),
    "previous-results": (previous_results_file(), lambda d: _through_file(d, "results.json", _previous_results), ()),
    "test-yaml": (test_yaml(), lambda d: _through_file(d, "test.yaml", _config), (SourceError,)),
    "schedule-json": (schedule_file(), lambda d: _through_file(d, "schedule.json", _schedule), (ScheduleError,)),
    "digest-json": (digest_file(), lambda d: _through_file(d, "digest.json", _digest), (DigestError,)),
    "wire-frame": (wire_frame(), _frame, (wire.WireError,)),
}


def inputs(target: str) -> st.SearchStrategy[bytes]:
    """Valid inputs of ``target`` and mutations of them."""
    valid = TARGETS[target][0]
    return valid.flatmap(mutations)


def run_target(target: str, data: bytes) -> None:
    """Read ``data`` with ``target``'s reader; raises AssertionError on anything but
    acceptance or the reader's documented refusal (one line naming the source)."""
    COUNTS[target] += 1
    _, read, refusals = TARGETS[target]
    try:
        read(data)
    except refusals as e:
        message = str(e)
        assert message and "\n" not in message, f"{target}: a refusal must be one line: {message!r}"
        assert len(message) < 2000, f"{target}: a refusal of {len(message)} characters"


def regression_cases() -> list[tuple[str, Path]]:
    """Every kept failing input, as (target, file)."""
    if not REGRESSIONS.is_dir():
        return []
    return sorted((d.name, f) for d in REGRESSIONS.iterdir() if d.is_dir() for f in d.iterdir() if f.is_file())
