"""What a hostile user meets: every input read once, refused in one line, never a wrong verdict."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from floodmark.checkers.api import CheckInput
from floodmark.checkers.queue import QueueChecker
from floodmark.contracts.run_config import ConfigError
from floodmark.errors import EXIT_BAD_ARGUMENTS, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, SourceError
from floodmark.formats import edn
from floodmark.formats.detect import load_history
from floodmark.formats.jepsen_text import parse_text_history
from floodmark.harness.config import load_config
from floodmark.inputs.sources import read_source

REPO = Path(__file__).resolve().parents[2]
INVALID_EDN = b"{:process 0 :type :invoke :f :write :value 1}\n{:process 0 :type :ok :f :write :value 1}\n" \
              b"{:process 1 :type :invoke :f :read :value nil}\n{:process 1 :type :ok :f :read :value 2}\n"
VALID_EDN = INVALID_EDN.replace(b":value 2}", b":value 1}")


def floodmark(*args: str, stdin: bytes | None = None, module: str = "floodmark") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", module, *args], input=stdin.decode() if stdin else None,
                          capture_output=True, text=True, env=env, timeout=120)


def test_a_piped_history_is_read_once_and_judged() -> None:
    for path in ("-", "/dev/stdin"):
        done = floodmark("check", path, stdin=INVALID_EDN)
        assert done.returncode == EXIT_INVALID, done.stderr
        assert done.stdout.startswith("INVALID")


def test_a_completion_with_no_invocation_is_unusable_input(tmp_path: Path) -> None:
    path = tmp_path / "h.edn"
    path.write_bytes(b"{:process 3 :type :ok :f :read :value 1}\n")
    done = floodmark("check", str(path))
    assert done.returncode == EXIT_BAD_ARGUMENTS
    assert f"{path}:1: a ok completion of process 3 with no invocation open" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_batch_checks_every_file_and_exits_with_the_worst(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.edn", tmp_path / "bad.edn"
    good.write_bytes(VALID_EDN)
    bad.write_bytes(INVALID_EDN)
    done = floodmark("check", str(good), str(tmp_path / "missing.edn"), str(bad))
    assert done.returncode == EXIT_BAD_ARGUMENTS
    assert f"VALID    {good}" in done.stdout and f"INVALID  {bad}" in done.stdout
    assert done.stderr.count("\n") == 1 and "missing.edn: cannot read: no such file" in done.stderr
    assert floodmark("check", str(good), str(bad)).returncode == EXIT_INVALID
    assert floodmark("check", str(good)).returncode == EXIT_VALID


def test_the_cli_module_run_directly_reports_usage_errors_without_a_traceback() -> None:
    done = floodmark("check", "/nonexistent", module="floodmark.cli")
    assert done.returncode == EXIT_BAD_ARGUMENTS and "Traceback" not in done.stderr
    assert "/nonexistent: cannot read: no such file or directory" in done.stderr


def test_a_fifo_without_a_writer_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match="no writer"):
        read_source(fifo, writer_wait=0.2)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b"abc"))
    writer.start()
    assert read_source(fifo, writer_wait=10) == b"abc"
    writer.join()


def test_an_endless_binary_source_is_refused_at_its_first_block() -> None:
    with pytest.raises(SourceError, match="NUL byte"):
        read_source("/dev/zero")


# The readers audit's inputs (kept in tests/fuzz_regressions) and what each must give: the
# verdict of the history as it was meant, or a refusal naming the line, never a VALID
# reached by skipping what could not be read.
AUDITED = [
    ("history-jepsen-text/5e9c71ccecf4a038", EXIT_INVALID, ""),  # etcd_000 with a tab after the dash
    ("history-jepsen-text/bccea742038978a9", EXIT_INVALID, ""),  # the same, small
    ("history-jepsen-text/3b81b2487897c634", EXIT_INVALID, ""),  # two spaces before the dash
    ("history-jepsen-text/26f95055872716f8", EXIT_BAD_ARGUMENTS, ":2: an INFO line that is not a log record"),
    ("history-jepsen-text/fb6a16184f1428da", EXIT_BAD_ARGUMENTS, ":1: not UTF-8 text (byte 0xff)"),
    ("history-jsonl/b2749a8203b58284", EXIT_INVALID, ""),  # a value quoting a log line
    ("history-jsonl/fda18f3014fd64af", EXIT_INVALID, ""),  # 64 KiB of blank lines first
]


@pytest.mark.parametrize(("case", "code", "said"), AUDITED, ids=[c[0] for c in AUDITED])
def test_what_the_readers_audit_found_is_judged_or_refused(case: str, code: int, said: str) -> None:
    path = REPO / "tests/fuzz_regressions" / case
    done = floodmark("check", str(path))
    assert done.returncode == code, (done.stdout, done.stderr)
    assert said in done.stderr and "Traceback" not in done.stderr


def test_jepsen_text_fields_separated_by_runs_of_spaces_read_like_tabs() -> None:
    tabs = "INFO  jepsen.util - 3\t:invoke\t:cas\t[1 4]\nINFO  jepsen.util - 3\t:ok\t:cas\t[1 4]\n"
    spaces = tabs.replace("\t", "    ")
    assert parse_text_history(spaces) == parse_text_history(tabs)
    assert parse_text_history(spaces)[0].value == [1, 4]


@pytest.mark.parametrize(("text", "problem"), [
    ("1/0", "divides by zero"), ("1" * 401 + "/3", "characters"), ("[" * 5000, "nested more than"),
    ("#_ " * 5000 + "1", "nested more than"), ("#a " * 5000 + "1", "nested more than"),
    ("{[1] 1 [1] 2}", "twice"), ('"\\ud800"', "surrogate"), ("1e400", "out of range"),
])
def test_hostile_edn_is_one_line_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(edn.EdnError, match=problem):
        edn.loads(text, "x.edn")


def test_edn_tags_with_collection_values_can_be_map_keys() -> None:
    assert edn.loads("{#t [1 2] :x}") == {edn.Tagged("t", (1, 2)): edn.Keyword("x")}


def test_reading_a_long_edn_string_takes_memory_linear_in_it() -> None:
    text = '"' + "x" * 4_000_000 + '"'
    tracemalloc.start()
    assert len(edn.loads(text)) == 4_000_000
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10 * len(text)


@pytest.mark.parametrize(("yaml_text", "problem"), [
    ("time_limit: .inf\n", "finite"), ("rate: .nan\n", "finite"), ("topics: 1000000000\n", "at most"),
    ("time_limit: 1" + "0" * 400 + "\n", "at most"), ("variant: [a]\n", "unknown variant"),
    ("seed: 1\nseed: 2\n", "given twice"), ("tim_limit: 3\n", "did you mean 'time_limit'"),
    ("name: ../../etc\n", "directory name"), ("name: " + "x" * 100_000 + "\n", "at most 100 characters"),
])
def test_absurd_configuration_is_refused_naming_the_key(tmp_path: Path, yaml_text: str, problem: str) -> None:
    path = tmp_path / "test.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=problem) as refused:
        load_config(path)
    assert str(refused.value).startswith(str(path)) and "\n" not in str(refused.value)


def test_serve_answers_400_to_a_symlink_loop_and_an_over_long_path(tmp_path: Path) -> None:
    from floodmark.reports.server import make_server

    store = tmp_path / "store"
    store.mkdir()
    os.symlink(store / "loop", store / "loop")
    server = make_server(store, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        for path in ("/store/loop/x", "/store/" + "a" * 5000):
            conn = http.client.HTTPConnection(str(host), int(port), timeout=60)
            conn.request("GET", path)
            assert conn.getresponse().status == 400
            conn.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


REGISTER_OPS = ['{"index":0,"time":0,"type":"invoke","process":0,"f":"write","value":1}',
                '{"index":1,"time":1,"type":"ok","process":0,"f":"write","value":1}',
                '{"index":2,"time":2,"type":"invoke","process":1,"f":"read","value":null}']


def test_a_complete_last_op_with_a_bad_field_is_refused_even_without_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"  # the audit's case 11b: the bad read was dropped and VALID said
    path.write_text("\n".join([*REGISTER_OPS, '{"index":3,"time":3,"type":"ok","process":1,"f":"read","value":2,"node":5}']))
    done = floodmark("check", str(path))
    assert done.returncode == EXIT_BAD_ARGUMENTS
    assert done.stderr == f"floodmark check: error: {path}:4: node must be a string, got 5\n"


def _without_progress(stderr: str) -> str:
    """``stderr`` without check's progress lines, which a check slowed past ten seconds (a
    loaded machine) prints beside what a test asserts."""
    return "".join(line for line in stderr.splitlines(keepends=True)
                   if not re.search(r": still (reading it|checking) after [0-9]+ s \(", line))


def test_a_torn_last_line_is_left_unread_and_said_so(tmp_path: Path) -> None:
    from checkers_fixtures import make_run_dir

    path = tmp_path / "h.jsonl"
    path.write_text("\n".join([*REGISTER_OPS, '{"index":3,"time":3,"type":"ok","process":1,"f":"re']))
    done = floodmark("check", str(path))
    # (what it left unread could have been an anomaly: never VALID over it)
    assert done.returncode == EXIT_UNKNOWN and done.stdout.startswith("UNKNOWN")
    assert f"[{path}:4: the last line, cut short, was not read, and what it recorded could be an anomaly]" in done.stdout
    assert _without_progress(done.stderr) == (f"floodmark check: warning: {path}:4: not read: the last line is cut short, as a writer "
                           "killed mid-line leaves it (not valid JSON (Unterminated string starting at column 49))\n")
    run = make_run_dir(tmp_path)
    with open(run / "history.jsonl", "a") as f:
        f.write('{"index": 99999, "ti')
    lines = len((run / "history.jsonl").read_text().splitlines())
    done = floodmark("check", str(run))
    warned = _without_progress(done.stderr)
    assert done.returncode == EXIT_UNKNOWN and warned.count("\n") == 1
    assert f"history.jsonl:{lines}: not read: the last line is cut short" in warned
    results = json.loads((run / "results.json").read_text())
    assert results["notes"] == [warned.removeprefix("floodmark check: warning: ").rstrip("\n")]
    assert results["checkers"]["stats"]["stats"]["torn_tail"]["line"] == lines
    assert results["valid"] == results["checkers"]["queue"]["valid"] == "unknown"


def test_check_of_some_checkers_over_an_ill_shaped_results_file_replaces_it(tmp_path: Path) -> None:
    from checkers_fixtures import make_run_dir

    run = make_run_dir(tmp_path)  # the audit's case 12: a TypeError traceback, exit 1
    (run / "results.json").write_text('{"valid": true, "checkers": [1]}')
    done = floodmark("check", "--checker", "stats", str(run))
    # (the run's other checkers did not judge it: unknown, never VALID over stats alone)
    assert done.returncode == EXIT_UNKNOWN and done.stdout.startswith(f"UNKNOWN  {run}  stats valid; durability unknown")
    assert done.stderr == (f"floodmark check: warning: {run / 'results.json'}: not a results file ('checkers' is "
                           "[1], not an object): replaced; the verdicts it held, if any, are not kept\n"
                           f"floodmark check: warning: {run / 'results.json'}: durability, queue, hw, leader, invariants "
                           "did not judge the run: unknown until floodmark check runs them (all of them, without "
                           "--checker)\n")
    (run / "results.json").unlink()
    (run / "results.json").mkdir()
    done = floodmark("check", str(run))
    assert done.returncode == EXIT_BAD_ARGUMENTS
    assert done.stderr == (f"floodmark check: error: {run / 'results.json'}: is a directory, not a file: "
                           "the results cannot be written\n")


def test_a_run_directory_whose_test_yaml_is_a_symlink_loop_is_refused_naming_it(tmp_path: Path) -> None:
    from checkers_fixtures import make_run_dir

    run = make_run_dir(tmp_path, "hw-decrease")  # the audit's case 16: judged as a register history, UNKNOWN
    (run / "test.yaml").unlink()
    (run / "test.yaml").symlink_to("test.yaml")
    done = floodmark("check", str(run))
    assert done.returncode == EXIT_BAD_ARGUMENTS
    assert done.stderr == f"floodmark check: error: {run / 'test.yaml'}: cannot read: too many levels of symbolic links\n"
    (run / "test.yaml").unlink()
    done = floodmark("check", str(run))
    assert done.returncode == EXIT_INVALID and done.stdout.startswith("INVALID") and "hw invalid" in done.stdout
    assert done.stderr.startswith(f"floodmark check: warning: {run / 'test.yaml'}: no such file") and \
        done.stderr.count("\n") == 1


def test_an_unwritable_to_edn_target_is_named_not_the_history(tmp_path: Path) -> None:
    history = tmp_path / "h.edn"
    history.write_bytes(VALID_EDN)
    for target, problem in ((tmp_path / "missing" / "out.edn", f"{tmp_path / 'missing'}: no such directory"),
                            (tmp_path, "is a directory")):
        done = floodmark("check", "--to-edn", str(target), str(history))
        assert done.returncode == EXIT_BAD_ARGUMENTS
        assert done.stderr == f"floodmark check: error: --to-edn {target}: {problem}\n"


def test_a_name_with_a_newline_stays_on_its_line(tmp_path: Path) -> None:
    history = tmp_path / "new\nline.edn"
    history.write_bytes(VALID_EDN)
    missing = tmp_path / "miss\ning.edn"
    done = floodmark("check", str(history), str(missing))
    escaped = str(tmp_path)
    assert done.stdout.splitlines()[0].startswith(f"VALID    {escaped}/new\\nline.edn  linearizable valid")
    assert done.stderr == f"floodmark check: error: {escaped}/miss\\ning.edn: cannot read: no such file or directory\n"


def test_the_verdict_line_names_the_first_op_a_checker_could_not_read(tmp_path: Path) -> None:
    history = tmp_path / "q.jsonl"
    history.write_text('{"index":0,"time":0,"type":"invoke","process":0,"f":"send","value":[1,2]}\n'
                       '{"index":1,"time":1,"type":"ok","process":0,"f":"send","value":[1,2]}\n')
    done = floodmark("check", "--checker", "durability", str(history))
    assert done.returncode == 2
    assert done.stdout.splitlines()[0] == (
        f"UNKNOWN  {history}  durability unknown [malformed op 0: send op has an unexpected shape (TypeError: list "
        "indices must be integers or slices, not str): a send's value is a map of topic, partition and value, its "
        "acknowledgement's a map with the offset; it holds [1, 2]]")


JEPSEN_KAFKA_EDN = b"""{:type :invoke, :f :assign, :value [1 2], :process 0}
{:type :ok, :f :assign, :value [1 2], :process 0}
{:type :invoke, :f :send, :value [[:send 1 5]], :process 1}
{:type :ok, :f :send, :value [[:send 1 [0 5]]], :process 1}
{:type :invoke, :f :poll, :value [[:poll]], :process 0}
{:type :ok, :f :poll, :value [[:poll {1 [[0 5]]}]], :process 0}
"""


def test_a_jepsen_kafka_history_is_judged_by_the_queue_checker(tmp_path: Path) -> None:
    """Jepsen's kafka workload writes micro-op lists, which floodmark translates into queue
    ops (tests/formats/jepsen/test_formats_jepsen_kafka.py has the rest)."""
    history = tmp_path / "kafka.edn"
    history.write_bytes(JEPSEN_KAFKA_EDN)
    done = floodmark("check", "--checker", "queue", str(history))
    assert done.returncode == EXIT_VALID, done.stdout + done.stderr
    assert done.stdout.startswith(f"VALID    {history}  queue valid [Jepsen kafka history")
    loaded = load_history(history)
    assert QueueChecker().check(CheckInput(loaded.ops)).valid is True


def test_jepsen_kafka_micro_ops_outside_jepsen_edn_are_named_as_such(tmp_path: Path) -> None:
    """Micro-op lists in a JSONL history are no queue ops floodmark reads: the verdict is
    unknown, and the line says what the file holds instead of a Python error."""
    ops = [{"index": 0, "time": 0, "type": "invoke", "process": 1, "f": "send", "value": [["send", 1, 5]]},
           {"index": 1, "time": 1, "type": "ok", "process": 1, "f": "send", "value": [["send", 1, [0, 5]]]},
           {"index": 2, "time": 2, "type": "invoke", "process": 0, "f": "poll", "value": [["poll"]]},
           {"index": 3, "time": 3, "type": "ok", "process": 0, "f": "poll", "value": [["poll", {"1": [[0, 5]]}]]}]
    history = tmp_path / "kafka.jsonl"
    history.write_text("".join(json.dumps(op) + "\n" for op in ops))
    done = floodmark("check", "--checker", "durability,queue", str(history))
    assert done.returncode == 2, done.stdout
    line = done.stdout.splitlines()[0]
    assert line.startswith(f"UNKNOWN  {history}  durability unknown [malformed op 0: send op holds Jepsen kafka "
                           "micro-ops ([['send', 1, 5]]), which the queue checkers read only from a Jepsen EDN "
                           "history: a send's value is a map")
    result = QueueChecker().check(CheckInput(load_history(history).ops))
    assert result.valid == "unknown"
    problems = [m["problem"] for m in result.stats["malformed_ops"]]
    assert problems == ["send op holds Jepsen kafka micro-ops ([['send', 1, 5]]), which the queue checkers read "
                        "only from a Jepsen EDN history: a send's value is a map of topic, partition and value, its "
                        "acknowledgement's a map with the offset",
                        "poll op holds Jepsen kafka micro-ops ([['poll']]), which the queue checkers read only from "
                        "a Jepsen EDN history: a poll's completion holds a list of batches, each a map of topic, "
                        "partition and records"]


@pytest.mark.parametrize(("damage", "problem"), [
    ("empty", "not a results file: not valid JSON (Expecting value at column 1)"),
    ("garbage", "not a results file: not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
    ("nan", "not a results file: nan is not a finite number"),
    ("deep", "not a results file: nested more than 100 levels deep"),
    ("directory", "is a directory, not a file"), ("fifo", "is a FIFO, not a file"),
])
def test_report_of_a_run_whose_results_cannot_be_read_says_so(tmp_path: Path, damage: str, problem: str) -> None:
    from checkers_fixtures import make_run_dir

    from floodmark.reports.run_index import summarize
    from floodmark.run_dirs.rundir import RunDir

    run = make_run_dir(tmp_path)
    results = run / "results.json"
    {"empty": lambda: results.write_text(""), "garbage": lambda: results.write_text("{bad"),
     "nan": lambda: results.write_text('{"valid": NaN}'), "deep": lambda: results.write_text("[" * 100_000),
     "directory": results.mkdir, "fifo": lambda: os.mkfifo(results)}[damage]()
    done = floodmark("report", str(run))  # the audit's D4: "not checked", exit 0, not a word
    assert done.returncode == EXIT_BAD_ARGUMENTS
    assert done.stderr == f"floodmark report: warning: {results}: {problem}: the run is shown unchecked\n"
    assert "the run is shown unchecked" in (run / "report.html").read_text()
    # The results browser's index says the same, and never waits on a FIFO.
    assert summarize(RunDir(run), tmp_path).problem == f"results.json unreadable: {problem.removeprefix('not a results file: ')}"


def test_analyze_exits_254_when_it_rejected_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from floodmark.cli import main
    from floodmark.pipeline import analysis
    from floodmark.pipeline.ingest import IngestReport

    store = tmp_path / "store"
    store.mkdir()
    report = IngestReport(None, ingested=["a"], rejected=[("store/t/r\n1", "history.jsonl:1: missing field 'process'")])
    monkeypatch.setattr(analysis, "analyze", lambda *a, **k: analysis.AnalysisResult(report, tmp_path / "s.html", {}))
    assert main(["analyze", str(store), "--quiet"]) == 254
    assert capsys.readouterr().err == ("floodmark analyze: error: rejected store/t/r\\n1: history.jsonl:1: missing "
                                       "field 'process'\n")
    report.rejected.clear()
    assert main(["analyze", str(store), "--quiet"]) == 0


# The hostile-input audit's run directories without digest.json (removed on purpose, so check
# judges the files as they are): each damage and what check must say of it.
def _copied_under_another_name(run: Path) -> None:  # finding 1: n1's events as n2's, every line renamed
    events = run / "events"
    (events / "n2.jsonl").write_text((events / "n1.jsonl").read_text().replace('"node":"n1"', '"node":"n2"'))


def _rewritten_line(name: str, number: int, old: str, new: str) -> Any:
    def damage(run: Path) -> None:
        lines = (run / name).read_text().splitlines(keepends=True)
        assert old in lines[number - 1]
        lines[number - 1] = lines[number - 1].replace(old, new, 1)
        (run / name).write_text("".join(lines))

    return damage


def _line_of_min_insync() -> int:
    """The line of ``min_insync_replicas`` in the fixture run's test.yaml (sorted keys)."""
    import tempfile

    from checkers_fixtures import make_run_dir

    with tempfile.TemporaryDirectory() as scratch:
        lines = (make_run_dir(Path(scratch)) / "test.yaml").read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if line.startswith("min_insync_replicas:"))


def _with_byte_order_marks(run: Path) -> None:  # finding 6: what some editors save first
    for path in (run / "history.jsonl", run / "test.yaml", *sorted((run / "events").iterdir())):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())


def _events_replaced(how: str) -> Any:  # the second hunt: an events/ that is there but cannot be listed
    def damage(run: Path) -> None:
        events = run / "events"
        for path in events.iterdir():
            path.unlink()
        events.rmdir()
        if how == "file":
            events.write_text("x\n")
        else:
            events.symlink_to(events if how == "loop" else run / "nowhere")

    return damage


RUN_DAMAGE = [
    ("events-a-file", _events_replaced("file"), [], EXIT_BAD_ARGUMENTS,
     "/events: is not a directory: a run's node events are a directory of <node>.jsonl files"),
    ("events-a-link-loop", _events_replaced("loop"), [], EXIT_BAD_ARGUMENTS,
     "/events: cannot list the node event files: too many levels of symbolic links"),
    ("events-a-link-to-nothing", _events_replaced("nothing"), [], EXIT_BAD_ARGUMENTS,
     "/events: a symbolic link to nothing: a run's node events are a directory"),
    ("copied-events", _copied_under_another_name, [], EXIT_BAD_ARGUMENTS,
     "events/n2.jsonl:1: an event of node 'n1' in the file of node 'n2': it says it is broker 1, as "),
    ("foreign-topic", _rewritten_line("events/n1.jsonl", 2, '"topic":"t0"', '"topic":"t9"'), [], EXIT_BAD_ARGUMENTS,
     "events/n1.jsonl:2: leader_elected names topic 't9', which the run does not have (its topics: t0)"),
    # (the third hunt, 2026-11-28: a partition the run never had was judged one the cluster
    # never listed, and the run INVALID)
    ("partition-beyond-the-run", _rewritten_line("events/n1.jsonl", 2, '"partition":0', '"partition":7'), [],
     EXIT_BAD_ARGUMENTS, "events/n1.jsonl:2: leader_elected names partition 7 of topic 't0', which never had more "
                         "than 2 (0 to 1)"),
    # (the third hunt, 2026-11-28: a min.insync above the replication factor, which no run
    # has, made every acknowledgement an acked-below-min-isr and the run INVALID)
    ("impossible-layout", _rewritten_line("test.yaml", _line_of_min_insync(), "min_insync_replicas: 2",
                                          "min_insync_replicas: 5"), [], EXIT_BAD_ARGUMENTS,
     "test.yaml: min_insync_replicas: 5 is more than the replication factor 3 (replication_factor)"),
    ("history-key-twice", _rewritten_line("history.jsonl", 3, '"type":"invoke"', '"type":"ok","type":"invoke"'), [],
     EXIT_BAD_ARGUMENTS, "history.jsonl:3: the key 'type' twice in one object"),
    ("event-key-twice", _rewritten_line("events/n1.jsonl", 2, '"leader":1', '"leader":2,"leader":1'), [],
     EXIT_BAD_ARGUMENTS, "events/n1.jsonl:2: the key 'leader' twice in one object"),
    ("negative-epoch", _rewritten_line("events/n1.jsonl", 2, '"leader_epoch":1', '"leader_epoch":-5'), [],
     EXIT_BAD_ARGUMENTS, "events/n1.jsonl:2: leader_elected: leader_epoch must be a leader's epoch (from 0: a "
                         "leader always has one), got -5"),
    ("byte-order-marks", _with_byte_order_marks, [], EXIT_VALID, ""),
    ("model-of-a-queue-run", lambda run: None, ["--model", "register"], EXIT_BAD_ARGUMENTS,
     ": a queue run, judged by durability, queue, hw, leader, invariants, stats, none of which takes a model: "
     "--model applies to the linearizable checker, which judges log-lin runs and register, kv, mutex and log histories"),
]


@pytest.mark.parametrize(("damage", "options", "code", "said"), [c[1:] for c in RUN_DAMAGE],
                         ids=[c[0] for c in RUN_DAMAGE])
def test_what_the_audit_did_to_a_run_directory_is_refused_in_one_line_or_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any, options: list[str], code: int,
        said: str) -> None:
    """Before: the copied file gave INVALID (two leaders per epoch); the foreign topic, the keys
    given twice (read as the last), the negative epoch and --model (ignored) VALID; the byte
    order marks a refusal in orjson's words; an events/ that is a file or a broken link
    UNKNOWN, as if the run had recorded no node events."""
    from checkers_fixtures import make_run_dir

    from floodmark.cli import main

    run = make_run_dir(tmp_path)
    damage(run)
    assert main(["check", str(run), *options]) == code
    out, err = capsys.readouterr()
    if code == EXIT_BAD_ARGUMENTS:
        assert err.count("\n") == 1 and err.startswith(f"floodmark check: error: {run}") and said in err, err
    else:
        assert out.startswith("VALID") and err == ""
