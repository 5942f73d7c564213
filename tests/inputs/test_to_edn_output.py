"""``floodmark check --to-edn OUT`` never writes over what it checks (audit F03).

OUT that names the history, a file of the run directory checked (by itself, a symbolic link
or a hard link) or standard input's file is refused in one line, exit 254, before anything is
read, judged or written; a directory is refused for one path; a FIFO is written through.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from checkers_fixtures import make_run_dir
from fifo_fixtures import FifoReader

from floodmark.cli import main

HISTORY = "".join(
    f'{{"index": {i}, "time": {i}, "type": "{t}", "process": 0, "f": "write", "value": 1}}\n'
    for i, t in enumerate(("invoke", "ok")))


def _refused(capsys: pytest.CaptureFixture[str], message: str) -> None:
    """Exactly one line on stderr, the message, no traceback, nothing on stdout."""
    out, err = capsys.readouterr()
    assert err == f"floodmark check: error: {message}\n"
    assert out == ""


def test_to_edn_naming_the_history_itself_is_refused_and_the_history_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "x.jsonl"
    history.write_text(HISTORY)
    assert main(["check", str(history), "--to-edn", str(history)]) == 254
    _refused(capsys, f"--to-edn {history}: is the input {history}; it would be overwritten")
    assert history.read_text() == HISTORY
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]


def test_to_edn_naming_the_history_by_a_link_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "x.jsonl"
    history.write_text(HISTORY)
    symlink, hard = tmp_path / "link.edn", tmp_path / "hard.edn"
    symlink.symlink_to(history)
    os.link(history, hard)
    for out in (symlink, hard):
        assert main(["check", str(history), "--to-edn", str(out)]) == 254
        _refused(capsys, f"--to-edn {out}: is the input {history}; it would be overwritten")
    assert history.read_text() == HISTORY == hard.read_text() and symlink.is_symlink()


@pytest.mark.parametrize("name", ["history.jsonl", "test.yaml", "results.json", "events/n1.jsonl"])
def test_to_edn_naming_a_file_of_the_run_checked_is_refused_before_judging(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    run = make_run_dir(tmp_path)
    if name == "results.json":
        assert main(["check", str(run)]) == 0
        capsys.readouterr()
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    target = run / name
    assert main(["check", str(run), "--to-edn", str(target)]) == 254
    _refused(capsys, f"--to-edn {target}: is the input {target}; it would be overwritten")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # not even results.json


def test_to_edn_into_a_directory_holding_an_input_by_that_name_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With several paths OUT is a directory: DIR/a.edn must not be the input a.edn."""
    edn = tmp_path / "a.edn"
    edn.write_text("{:process 0 :type :invoke :f :write :value 1}\n{:process 0 :type :ok :f :write :value 1}\n")
    other = tmp_path / "b.jsonl"
    other.write_text(HISTORY)
    assert main(["check", str(edn), str(other), "--to-edn", str(tmp_path)]) == 254
    _refused(capsys, f"--to-edn {edn}: is the input {edn}; it would be overwritten")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.edn", "b.jsonl"]


def test_to_edn_of_several_paths_into_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, out = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "out.edn"
    for path in (a, b, out):
        path.write_text(HISTORY)
    assert main(["check", str(a), str(b), "--to-edn", str(out)]) == 254
    _refused(capsys, f"--to-edn {out}: is not a directory (the EDN of several paths goes into one)")
    assert out.read_text() == HISTORY


def test_to_edn_naming_the_file_read_as_standard_input_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    history = tmp_path / "h.jsonl"
    history.write_text(HISTORY)
    with open(history) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["check", "-", "--to-edn", str(history)]) == 254
    _refused(capsys, f"--to-edn {history}: is the input standard input; it would be overwritten")
    assert history.read_text() == HISTORY


def test_to_edn_naming_a_directory_for_one_path_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "x.jsonl"
    history.write_text(HISTORY)
    directory = tmp_path / "out"
    directory.mkdir()
    assert main(["check", str(history), "--to-edn", str(directory)]) == 254
    _refused(capsys, f"--to-edn {directory}: is a directory")
    assert list(directory.iterdir()) == []


def test_to_edn_through_a_fifo_reaches_its_reader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "x.jsonl"
    history.write_text(HISTORY)
    fifo = FifoReader(tmp_path / "edn")
    assert main(["check", str(history), "--to-edn", str(fifo.path)]) == 0
    assert fifo.join(timeout=10) == (b"{:index 0, :time 0, :type :invoke, :process 0, :f :write, :value 1}\n"
                                     b"{:index 1, :time 1, :type :ok, :process 0, :f :write, :value 1}\n")
    assert stat.S_ISFIFO(os.lstat(fifo.path).st_mode)
    assert "VALID" in capsys.readouterr().out


def test_to_edn_dash_is_refused_for_standard_output_carries_the_verdicts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    history = tmp_path / "x.jsonl"
    history.write_text(HISTORY)
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(history), "--to-edn", "-"]) == 254
    _refused(capsys, "--to-edn -: standard output carries the verdicts; name a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]  # no file named '-'
