"""``floodmark report`` on damaged run directories: what the audit of the report found.

* a history the file system will not give (a disk error; not ours to read) ended in a
  traceback: it is now one line naming the file, exit 254 (``/proc/self/mem`` stands in for an
  unreadable file: tests run as root, for whom ``chmod 000`` changes nothing);
* a history that is a FIFO, a device or a directory was called "not a run directory (no
  history.jsonl)": it is now named for what it is;
* a test.yaml that is a FIFO was waited on for ten seconds: it is now said at once;
* an ``events`` that is a file or a symbolic link loop was read as a run without node events,
  unsaid: it is now a warning (exit 254);
* a history line that is not UTF-8 was named in orjson's words ("str is not valid UTF-8:
  surrogates not allowed"): every malformed line is now named in ``floodmark check``'s words;
* a log or event file named in bytes that are not UTF-8 ended in a traceback (its link):
  it is now linked by its bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_fixtures import make_minimal_run

from floodmark.cli import main
from floodmark.contracts.history import HistoryError, iter_history
from floodmark.reports.history_columns import load_history

STAMP = "20260101T000000"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_minimal_run(tmp_path / "store", name="damaged", seed=1, stamp=STAMP, verdict=True)


def _report(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["report", str(run)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.splitlines()


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    make(path)


def test_a_history_that_cannot_be_read_is_one_line(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _replace(run / "history.jsonl", lambda p: os.symlink("/proc/self/mem", p))  # a regular file that reads EIO
    assert _report(run, capsys) == (254, [f"floodmark report: error: cannot read the history: {run}/history.jsonl: "
                                          "cannot read: input/output error"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("make", "problem"), [
    (os.mkfifo, "is a FIFO, not a file"),
    (lambda p: os.symlink("/dev/zero", p), "is not a regular file"),
    (os.mkdir, "is a directory, not a file"),
    (lambda p: os.symlink(p.name, p), "too many levels of symbolic links"),
])
def test_a_history_that_is_no_file_is_named_for_what_it_is(run: Path, capsys: pytest.CaptureFixture[str],
                                                           make: Callable[[Path], None], problem: str) -> None:
    _replace(run / "history.jsonl", make)
    assert _report(run, capsys) == (254, [f"floodmark report: error: {run}/history.jsonl: {problem}"])


def test_a_run_without_a_history_is_still_no_run_directory(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "history.jsonl").unlink()
    assert _report(run, capsys) == (254, [f"floodmark report: error: {run}: not a run directory (no history.jsonl)"])


def test_the_report_written_is_named_in_one_line_whatever_the_run_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A run directory named with a newline (and an escape sequence): the line naming the
    # report written was two lines, and drove the terminal.
    run = make_minimal_run(tmp_path / "store", name="damaged", seed=1, stamp=STAMP, verdict=True)
    named = run.rename(run.with_name(f"{run.name}\nx\x1b[2J"))
    assert main(["report", str(named)]) == 0
    out = capsys.readouterr().out
    assert out == f"{run}\\nx\\x1b[2J/report.html\n" and (named / "report.html").is_file()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("directory", ["logs/n1", "events"])
def test_a_file_named_in_bytes_that_are_not_utf8_is_linked_by_its_bytes(
        run: Path, capsys: pytest.CaptureFixture[str], directory: str) -> None:
    (run / directory).mkdir(parents=True, exist_ok=True)
    (run / directory / os.fsdecode(b"bad\xffname.log")).write_text("x\n")
    code, _ = _report(run, capsys)
    assert code == 0
    assert f'href="{directory}/bad%FFname.log"' in (run / "report.html").read_text()


def test_a_test_yaml_that_is_a_fifo_is_said_at_once(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _replace(run / "test.yaml", os.mkfifo)
    started = time.monotonic()
    code, lines = _report(run, capsys)
    assert time.monotonic() - started < 8  # it waited 10 s for a writer
    assert (code, lines) == (254, [f"floodmark report: warning: {run}/test.yaml: is a FIFO, not a file (the "
                                   "configuration shown, if any, is the copy in results.json)"])
    assert "<title>valid ·" in (run / "report.html").read_text()  # the verdict stands: results.json is read


@pytest.mark.parametrize(("make", "problem"), [
    (lambda p: p.write_text("{}\n"), "is a file, not a directory"),
    (lambda p: os.symlink(p.name, p), "too many levels of symbolic links"),
    (lambda p: os.symlink("/dev/null", p), "is not a regular file"),
])
def test_events_that_are_no_directory_are_a_warning(run: Path, capsys: pytest.CaptureFixture[str],
                                                    make: Callable[[Path], None], problem: str) -> None:
    _replace(run / "events", make)
    assert _report(run, capsys) == (254, [f"floodmark report: warning: node events not shown: {run}/events: "
                                          f"{problem}"])


_OP = json.dumps({"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "send", "value": None}).encode()


@pytest.fixture(scope="module")
def history_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("history") / "history.jsonl"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.binary(max_size=40) | st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass"))
       | st.sampled_from([b"\xff", b"\xef\xbb\xbf{}", b"\x00", b'{"a": NaN}', b'"\\ud800"', b"[" * 300]))
def test_a_malformed_history_line_is_named_as_floodmark_check_names_it(history_file: Path, line: bytes) -> None:
    """Whatever the second line holds, the report's reader and check's reader agree: both
    read the history, or both refuse it in the same words."""
    history_file.write_bytes(_OP + b"\n" + line.replace(b"\n", b"") + b"\n")
    report_says = check_says = None
    try:
        load_history(history_file)
    except HistoryError as e:
        report_says = str(e)
    try:
        list(iter_history(history_file))
    except HistoryError as e:
        check_says = str(e)
    assert report_says == check_says
