"""``floodmark report RUN --out FILE`` never writes over the run, a directory or a device
(audit F04, F07).

On a real simulated run: an --out that is any file the run recorded (by its own name, a
symbolic link or a hard link) is refused in one line, exit 254, and the run is left byte
for byte; a directory is refused the same way, never a traceback; a FIFO is written
through and stays a FIFO (never the machine's /dev/null or /dev/full).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fifo_fixtures import FifoReader

from floodmark.cli import main


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("report-out") / "store"
    assert main(["run", "--cluster", "sim", "--time-limit", "5", "--seed", "3", "--store", str(store)]) == 0
    return (store / "latest").resolve()


def _snapshot(run: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry of the run: its type and, for a file, its bytes."""
    return {str(p.relative_to(run)): (stat.S_IFMT(os.lstat(p).st_mode), p.read_bytes() if p.is_file() else b"")
            for p in sorted(run.rglob("*"))}


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("name", ["history.jsonl", "test.yaml", "schedule.json", "results.json", "digest.json",
                                  "events/n1.jsonl"])
def test_out_naming_a_file_of_the_run_is_refused_and_the_run_left_as_it_was(
        sim_run: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    capsys.readouterr()
    before = _snapshot(sim_run)
    target = sim_run / name
    assert main(["report", str(sim_run), "--out", str(target)]) == 254
    assert _one_line(capsys) == (f"floodmark report: error: --out {target}: is the input {target}; "
                                 "it would be overwritten\n")
    assert _snapshot(sim_run) == before


def test_out_naming_the_history_by_a_link_is_refused(sim_run: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    before = _snapshot(sim_run)
    symlink, hard = tmp_path / "r.html", tmp_path / "h.html"
    symlink.symlink_to(sim_run / "history.jsonl")
    os.link(sim_run / "history.jsonl", hard)
    for out in (symlink, hard):
        assert main(["report", str(sim_run), "--out", str(out)]) == 254
        assert "it would be overwritten" in _one_line(capsys)
    assert _snapshot(sim_run) == before and symlink.is_symlink()


def test_out_naming_a_directory_is_a_one_line_usage_error(sim_run: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    before = _snapshot(sim_run)
    for directory in (sim_run / "events", tmp_path):
        assert main(["report", str(sim_run), "--out", str(directory)]) == 254
        assert _one_line(capsys) == f"floodmark report: error: --out {directory}: is a directory\n"
    assert _snapshot(sim_run) == before and list(tmp_path.iterdir()) == []


def test_out_in_a_missing_directory_is_a_one_line_usage_error(sim_run: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    out = tmp_path / "nope" / "r.html"
    assert main(["report", str(sim_run), "--out", str(out)]) == 254
    assert _one_line(capsys) == f"floodmark report: error: --out {out}: {out.parent}: no such directory\n"


def test_out_through_a_fifo_reaches_its_reader_and_leaves_a_fifo(sim_run: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    fifo = FifoReader(tmp_path / "report")
    assert main(["report", str(sim_run), "--out", str(fifo.path)]) == 0
    page = fifo.join(timeout=30)
    assert page is not None and page.startswith(b"<!doctype html>") and page.rstrip().endswith(b"</html>")
    assert stat.S_ISFIFO(os.lstat(fifo.path).st_mode) and list(tmp_path.iterdir()) == [fifo.path]
    assert capsys.readouterr().out == f"{fifo.path}\n"


def test_out_over_an_earlier_report_elsewhere_replaces_it(sim_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("an old report")
    assert main(["report", str(sim_run), "--out", str(out)]) == 0
    assert out.read_text().startswith("<!doctype html>")
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left behind


def test_out_dash_writes_the_page_to_standard_output_and_no_file(sim_run: Path, tmp_path: Path) -> None:
    # '-' is standard output, as for most Unix tools; it used to write a file named '-'. The
    # page is UTF-8 whatever the terminal's encoding, and nothing else shares the stream.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "floodmark", "report", str(sim_run), "--out", "-"], cwd=tmp_path,
                          capture_output=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"<!doctype html>") and done.stdout.rstrip().endswith(b"</html>")
    assert done.stdout.decode("utf-8") and done.stderr == b""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("aim", ["a file", "nothing yet", "a missing directory"])
def test_a_link_in_place_of_the_runs_own_report_is_replaced_not_followed(
        sim_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], aim: str) -> None:
    # (regression, 2026-11-28: report.html -> /some/file made ``floodmark report RUN`` write
    # its page over that file; a run directory may come from anyone, and runs are made as root)
    run = tmp_path / "run"
    run.mkdir()
    for entry in sim_run.iterdir():
        if entry.is_dir():
            (run / entry.name).symlink_to(entry)
        else:
            (run / entry.name).write_bytes(entry.read_bytes())
    outside = {"a file": tmp_path / "precious.txt", "nothing yet": tmp_path / "new.html",
               "a missing directory": tmp_path / "no" / "such" / "x.html"}[aim]
    if aim == "a file":
        outside.write_text("precious\n")
    (run / "report.html").unlink()
    (run / "report.html").symlink_to(outside)
    capsys.readouterr()
    assert main(["report", str(run)]) == 0
    page = run / "report.html"
    assert not page.is_symlink() and page.read_text().startswith("<!doctype html>")
    if aim == "a file":
        assert outside.read_text() == "precious\n"
    else:
        assert not outside.exists()
