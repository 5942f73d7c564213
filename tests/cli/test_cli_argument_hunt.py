"""What a hunt for bad arguments found the run commands accepting, or dying of.

Each is refused in one line with exit 254 before anything runs: an option the shell left
empty (``--store ""``) is never the default in its place; a store nothing can be created in
(/proc, even for root) is refused up front, not by a traceback once the run started; and a
negative number of any spelling (``-inf``, ``-1e3``) is the option's value, refused for what
it is, not taken for an option of its own.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from floodmark.cli import main
from floodmark.errors import EXIT_BAD_ARGUMENTS


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line ``floodmark ARGV`` is refused with (exit 254, by argparse or after it)."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    assert code == EXIT_BAD_ARGUMENTS, argv
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short valid simulated run, in a store of its own."""
    store = tmp_path_factory.mktemp("hunt") / "store"
    assert main(["run", "--cluster", "sim", "--time-limit", "1", "--nemesis", "none", "--seed", "3",
                 "--store", str(store)]) == 0
    return (store / "latest").resolve()


def runs_in(store: Path) -> list[Path]:
    return sorted(p for p in store.glob("*/*") if p.is_dir())


@pytest.mark.parametrize("blank", ["", "  "])
def test_an_empty_store_is_refused_not_taken_for_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str], blank: str) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (["run", "--cluster", "sim", "--time-limit", "1", "--nemesis", "none", "--store", blank],
                 ["explore", "--runs", "1", "--seed", "1", "--jobs", "1", "--no-shrink", "--store", blank]):
        assert refusal(argv, capsys).endswith(f"--store: {'an empty' if not blank else 'a blank'} directory name "
                                              f"({blank!r}); give one, or leave --store out for the default")
    assert list(tmp_path.iterdir()) == []  # no ./store, no directory named by the blanks


def test_repro_and_shrink_with_an_empty_store_never_write_into_the_runs_own(stored_run: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = stored_run.parent.parent
    before = runs_in(store)
    assert "--store: an empty directory name" in refusal(["repro", str(stored_run), "--store", ""], capsys)
    assert "--store: an empty directory name" in refusal(["shrink", str(stored_run), "--store", ""], capsys)
    assert runs_in(store) == before


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_store_nothing_can_be_created_in_is_refused_before_the_run(stored_run: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Root passes os.access on /proc, and the run died of a FileNotFoundError traceback
    (exit 1) when it made its run directory there."""
    said = refusal(["run", "--cluster", "sim", "--time-limit", "1", "--nemesis", "none", "--store", "/proc"], capsys)
    assert said.startswith("floodmark run: error: --store /proc: ")
    said = refusal(["repro", str(stored_run), "--store", "/proc"], capsys)
    assert said.startswith("floodmark repro: error: --store /proc: ")


@pytest.mark.parametrize("in_the_way", ["a file", "a link to nothing", "latest a directory"])
def test_a_store_whose_contents_are_in_the_way_is_refused_leaving_nothing(
        stored_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], in_the_way: str) -> None:
    """A file (or a link to nothing) where the test's runs go, or a directory where
    ``latest`` goes: the run died of a FileExistsError or IsADirectoryError traceback (exit
    1, "invalid"), leaving a run directory and a stray link; exploration counted every seed
    unknown; a replay into such a store died the same way."""
    store = tmp_path / "store"
    store.mkdir()
    where = {"a file": store / "queue-none-default", "a link to nothing": store / "queue-none-default",
             "latest a directory": store / "latest"}[in_the_way]
    {"a file": where.touch, "a link to nothing": lambda: where.symlink_to("nowhere"),
     "latest a directory": where.mkdir}[in_the_way]()
    said = refusal(["run", "--cluster", "sim", "--time-limit", "1", "--nemesis", "none", "--seed", "3",
                    "--store", str(store)], capsys)
    assert said.startswith(f"floodmark run: error: {where}: ") and said.endswith("; move it away"), said
    assert [p.name for p in store.iterdir()] == [where.name]
    explore_where = store / "explore-default" if in_the_way != "latest a directory" else where
    if in_the_way == "a file":
        explore_where.touch()
    elif in_the_way == "a link to nothing":
        explore_where.symlink_to("nowhere")
    said = refusal(["explore", "--runs", "1", "--seed", "1", "--jobs", "1", "--no-shrink", "--store", str(store)],
                   capsys)
    assert said.startswith(f"floodmark explore: error: {explore_where}: "), said
    if in_the_way == "latest a directory":
        mine = store / "t" / stored_run.name
        mine.parent.mkdir()
        shutil.copytree(stored_run, mine)
        said = refusal(["repro", str(mine)], capsys)
        assert said.startswith(f"floodmark repro: error: {where}: a directory"), said


def test_a_run_directory_outside_a_store_is_replayed_only_into_a_store_named(
        stored_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The replay goes into the store the run is in, taken to be its folder's folder: a run
    copied to /tmp/myrun was replayed into /, which got a test folder and a latest link."""
    mine = tmp_path / "copies" / "myrun"
    shutil.copytree(stored_run, mine)
    said = refusal(["repro", str(mine)], capsys)  # (shrink: tests/run/test_cli_arguments.py)
    assert said == (f"floodmark repro: error: {mine}: not named as a run directory of a store "
                    "(store/<test>/<time>-s<seed>), so where its replay goes cannot be told; name a store "
                    "with --store"), said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copies"]
    assert main(["repro", str(mine), "--store", str(tmp_path / "replays")]) == 0
    assert (tmp_path / "replays" / "latest").is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == [
        "copies", "replays"]


@pytest.mark.parametrize("master", ["", " "])
def test_explore_refuses_an_empty_master_rather_than_run_without_spark(tmp_path: Path, master: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    said = refusal(["explore", "--runs", "1", "--seed", "1", "--jobs", "1", "--no-shrink", "--master", master,
                    "--store", str(store)], capsys)
    assert "--master: " in said and "master URL" in said
    assert not store.exists()


def test_an_empty_name_or_run_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    said = refusal(["run", "--cluster", "sim", "--time-limit", "1", "--name", "", "--store", str(store)], capsys)
    assert said.endswith("--name: an empty test name (''); give one, or leave --name out for the default")
    assert not store.exists()
    for command in ("repro", "shrink"):
        assert refusal([command, ""], capsys).startswith(f"floodmark {command}: error: RUN_DIR: an empty path")


@pytest.mark.parametrize("command", ["repro", "shrink"])
def test_a_run_dir_that_is_a_loop_of_links_is_refused_in_one_line(command: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A store's ``latest`` that leads back to itself: resolving it raised RuntimeError (Python
    3.11), a traceback and exit 1, which says "invalid"."""
    latest = tmp_path / "store" / "latest"
    latest.parent.mkdir()
    latest.symlink_to("latest")
    assert refusal([command, str(latest)], capsys) == (f"floodmark {command}: error: {latest}: a loop of symbolic "
                                                      "links, not a run directory")


@pytest.mark.parametrize(("argv", "said"), [
    (["run", "--cluster", "sim", "--time-limit", "-inf"], "time_limit: must be a finite number, got -inf"),
    (["run", "--cluster", "sim", "--time-limit", "-1e3"], "time_limit: must be at least 0.01, got -1000.0"),
    (["run", "--cluster", "sim", "--rate", "-NaN"], "rate: must be a finite number, got nan"),
    (["explore", "--time-budget", "-inf"], "--time-budget must be a positive number of seconds, got -inf"),
    (["explore", "--seed", "-1_0"], "--seed must be between 0 and"),
])
def test_a_negative_number_of_any_spelling_is_the_options_value(argv: list[str], said: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """argparse took ``-inf`` and ``-1e3`` for options, and said the option "expected one
    argument", never what was wrong with the value given."""
    line = refusal(argv, capsys)
    assert said in line and "expected one argument" not in line


@pytest.mark.parametrize("argv, option", [
    (["analyze", "", "--no-check", "--quiet"], "STORE"),  # analysed the current directory
    (["analyze", "STORE", "--out", "", "--no-check", "--quiet"], "--out"),  # wrote STORE/_analysis
    (["analyze", "STORE", "--parquet", "", "--no-check", "--quiet"], "--parquet"),  # wrote OUT/parquet
    (["check", "RUN", "--to-edn", ""], "--to-edn"),  # silently ignored
    (["check", ""], "PATH"),  # named '.', which the user never gave
    (["report", ""], "RUN_DIR"),  # named '.'
    (["report", "RUN", "--out", ""], "--out"),
])
def test_an_empty_value_is_refused_by_every_command_that_reads_one(
        argv: list[str], option: str, stored_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [str(stored_run) if a == "RUN" else str(stored_run.parent.parent) if a == "STORE" else a for a in argv]
    assert refusal(argv, capsys).split(": ", 3)[2] == option
    assert list(tmp_path.iterdir()) == []


def test_an_empty_checker_name_in_a_list_is_refused(stored_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``run --nemesis partition,,kill`` was refused, ``check --checker hw,,leader`` accepted."""
    assert "an empty checker name" in refusal(["check", str(stored_run), "--checker", "hw,,leader"], capsys)


def test_more_runs_than_seeds_blame_runs_not_a_seed_never_given(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """With no --seed the first is drawn at random: half the time the refusal named it as a
    --seed the user never gave, the other half the exploration started."""
    line = refusal(["explore", "--runs", str(2**63 + 1), "--no-shrink", "--store", str(tmp_path / "s")], capsys)
    assert "--runs" in line and "--seed" not in line


def test_serve_with_an_empty_store_is_refused_not_serving_the_current_directory(tmp_path: Path) -> None:
    """It served the current directory until killed: run apart, so that a regression fails
    by its timeout rather than hanging the suite."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "floodmark", "serve", "--store", "", "--port", "0"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == EXIT_BAD_ARGUMENTS, done.stderr
    assert done.stderr.splitlines() == [
        "floodmark serve: error: --store: an empty directory name (''); give one, or leave --store out for the "
        "default"], done.stderr
