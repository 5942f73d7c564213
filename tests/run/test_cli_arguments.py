"""The argument surface of `explore` and `shrink`, as the audit of the CLI found it: each bad
argument is refused in one line with exit 254 before anything runs or is made, and neither
command leaves `store/latest` naming a run directory it removed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from floodmark.cli import main
from floodmark.run.explore import run_seed
from floodmark.run_dirs.rundir import update_latest


@pytest.mark.parametrize(("extra", "said"), [
    (("--time-budget", "inf"), "--time-budget must be a positive number of seconds, got inf"),  # audit C1
    (("--time-budget", "nan"), "--time-budget must be a positive number of seconds, got nan"),
    (("--time-budget", "-1"), "--time-budget must be a positive number of seconds, got -1.0"),
    (("--shrink-budget", "0"), "--shrink-budget must be at least 1 (runs per failure), got 0"),  # audit C2
    (("--shrink-budget", "-3"), "--shrink-budget must be at least 1 (runs per failure), got -3"),
    (("--master", "bogus://x"), "--master bogus://x: not a Spark master URL"),  # audit C3
])
def test_explore_refuses_a_bad_argument_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            extra: tuple[str, ...], said: str) -> None:
    store = tmp_path / "store"
    code = main(["explore", "--runs", "1", "--seed", "1", "--jobs", "1", "--no-shrink", "--store", str(store), *extra])
    err = capsys.readouterr().err
    assert code == 254, err
    assert err.startswith(f"floodmark explore: error: {said}") and len(err.splitlines()) == 1, err
    assert not store.exists()  # nothing made, no seed run


def test_explore_leaves_latest_naming_a_run_that_is_there(tmp_path: Path) -> None:
    """Audit C8: every valid run was removed, and store/latest named the last of them."""
    store = tmp_path / "store"
    assert main(["explore", "--runs", "2", "--seed", "1", "--jobs", "1", "--store", str(store)]) == 0
    latest = store / "latest"
    assert not latest.is_symlink() or latest.exists(), os.readlink(latest)


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated run the truncate-to-hw flaw makes invalid (the corpus' seed)."""
    found = run_seed(1002, "truncate-to-hw", str(tmp_path_factory.mktemp("failing") / "store"))
    assert found.valid is False and found.run_dir is not None
    return Path(found.run_dir)


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store" / run.parent.name / run.name
    shutil.copytree(run, copy)
    return copy


def _rewrite_results(run: Path, change: object) -> None:
    results = json.loads((run / "results.json").read_text())
    change(results)  # type: ignore[operator]
    (run / "results.json").write_text(json.dumps(results))


def test_shrink_refuses_results_whose_checkers_are_no_judgements(failing_run: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Audit C4: 'checkers' as a list ended in an AttributeError traceback."""
    run = _copy(failing_run, tmp_path)
    _rewrite_results(run, lambda r: r.update(checkers=[1]))
    assert main(["shrink", str(run), "--budget", "1"]) == 254
    err = capsys.readouterr().err
    assert err == (f"floodmark shrink: error: {run}/results.json: not a results file ('checkers' is [1], not an "
                   f"object); run floodmark check {run} to judge the run again\n")


def test_shrink_refuses_results_naming_an_anomaly_type_that_is_no_string(failing_run: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """It shrank towards anomaly type '5', which no run reports, and said the run stayed the
    smallest (exit 0)."""
    run = _copy(failing_run, tmp_path)

    def retype(results: dict[str, dict[str, dict[str, list[dict[str, object]]]]]) -> None:
        next(c for c in results["checkers"].values() if c.get("anomalies"))["anomalies"][0]["type"] = 5

    _rewrite_results(run, retype)
    assert main(["shrink", str(run), "--budget", "1"]) == 254
    err = capsys.readouterr().err
    assert err.startswith(f"floodmark shrink: error: {run}/results.json: an anomaly's 'type' is not a string, ")


def test_shrink_refuses_a_run_that_is_not_invalid(failing_run: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Audit C5: a valid run was 'shrunk': candidates ran, and it was said to stay the
    smallest failing run. (A valid checker that lists anomalies is no verdict at all: see
    results.verdict_problem.)"""
    run = _copy(failing_run, tmp_path)

    def valid(results: dict[str, object]) -> None:
        results["valid"] = True
        for checker in results["checkers"].values():  # type: ignore[attr-defined]
            checker.update(valid=True, anomalies=[], anomaly_counts={})

    _rewrite_results(run, valid)
    assert main(["shrink", str(run), "--budget", "1"]) == 254
    err = capsys.readouterr().err
    assert err.startswith(f"floodmark shrink: error: {run}: the run is valid, not invalid: there is no failure to "
                          "shrink") and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in run.parent.iterdir()) == [run.name]  # no candidate ran


def test_shrink_leaves_latest_naming_a_run_that_is_there(failing_run: Path, tmp_path: Path) -> None:
    """Audit C6: a candidate that passed was removed, and store/latest still named it. (A
    candidate is now built under a partial name and published only if kept, so one that
    passes never becomes latest at all: latest still names the run that was there.)"""
    run = _copy(failing_run, tmp_path)
    update_latest(tmp_path / "store", run)
    assert main(["shrink", str(run), "--budget", "1"]) == 0  # its one candidate passes, and is removed
    latest = tmp_path / "store" / "latest"
    assert latest.is_symlink() and latest.exists(), os.readlink(latest)
    assert latest.resolve() == run.resolve()


def _edit_schedule(run: Path, change: object) -> None:
    schedule = json.loads((run / "schedule.json").read_text())
    change(schedule)  # type: ignore[operator]
    (run / "schedule.json").write_text(json.dumps(schedule))


@pytest.mark.parametrize(("damage", "said"), [
    # (the hostile-input audit) each was shrunk as if it were the run: candidates of another
    # seed, 3 brokers for 4, or a docker test's defaults; a fault the test cannot apply was
    # refused by a candidate, without the file's name, or dropped unseen by one without it
    (lambda run: _edit_schedule(run, lambda s: s.update(seed=s["seed"] + 1)), "schedule.json: seed 1003 differs "
                                                                              "from test.yaml's seed 1002"),
    (lambda run: (run / "test.yaml").write_text(
        "".join(line for line in (run / "test.yaml").open() if not line.startswith("nodes:"))),
     "test.yaml: nodes: not stated: a run's test.yaml states every setting its verdict depends on"),
    (lambda run: (run / "test.yaml").write_text(""), "test.yaml: states no configuration (an empty file)"),
    (lambda run: (run / "test.yaml").write_text(
        "".join(line for line in (run / "test.yaml").open() if not line.startswith("seed:"))),
     "test.yaml: no seed recorded; cannot reproduce"),
    (lambda run: _edit_schedule(run, lambda s: s["faults"][0].update(kind="stall")),
     "schedule.json: fault 0 (stall:"),
])
def test_shrink_refuses_a_run_whose_files_were_edited_as_repro_does(failing_run: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  damage: object, said: str) -> None:
    run = _copy(failing_run, tmp_path)
    damage(run)  # type: ignore[operator]
    assert main(["shrink", str(run), "--budget", "1"]) == 254
    err = capsys.readouterr().err
    assert err.startswith(f"floodmark shrink: error: {run}/{said}") and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in run.parent.iterdir()) == [run.name]  # no candidate ran


def test_shrink_of_a_run_outside_a_store_needs_a_store_named(failing_run: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Its candidates went into the run's folder's folder: for a run copied to /tmp/myrun, /."""
    run = tmp_path / "copies" / "myrun"
    shutil.copytree(failing_run, run)
    assert main(["shrink", str(run), "--budget", "1"]) == 254
    err = capsys.readouterr().err
    assert err == (f"floodmark shrink: error: {run}: not named as a run directory of a store "
                   "(store/<test>/<time>-s<seed>), so where its replay goes cannot be told; name a store with "
                   "--store\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copies"]
    assert main(["shrink", str(run), "--budget", "1", "--store", str(tmp_path / "candidates")]) == 0
