"""The registry: default checkers per workload, check_history and check_run."""

from __future__ import annotations

import json
from pathlib import Path

from checkers_fixtures import make_run_dir

from floodmark.checkers.api import CheckInput
from floodmark.checkers.registry import CHECKER_NAMES, check_history, check_run, default_checkers
from floodmark.results import CheckerResult


def test_names_and_defaults() -> None:
    assert set(CHECKER_NAMES) == {"durability", "hw", "leader", "queue", "linearizable", "stats"}
    assert [c.name for c in default_checkers("queue")] == ["durability", "queue", "hw", "leader", "stats"]
    assert [c.name for c in default_checkers("log-lin")] == ["linearizable", "hw", "leader", "stats"]


def test_check_run_writes_results(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path)
    results = check_run(path)
    assert results["valid"] is True
    assert results["seed"] == 11 and results["config"]["workload"] == "queue"
    written = json.loads((path / "results.json").read_text())
    assert written["valid"] is True
    assert set(written["checkers"]) == {"durability", "queue", "hw", "leader", "stats"}


def test_check_run_on_a_broken_run_and_partial_update(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path, "hw-decrease")
    assert check_run(path)["valid"] is False
    updated = check_run(path, checkers=["queue"])  # the hw verdict already stored is kept
    assert set(updated["checkers"]) >= {"hw", "queue"}
    assert updated["valid"] is False
    assert json.loads((path / "results.json").read_text())["checkers"]["hw"]["valid"] is False


def test_a_crashing_checker_gives_unknown_not_a_crash() -> None:
    class Broken:
        name = "broken"

        def check(self, run: CheckInput) -> CheckerResult:
            raise RuntimeError("boom")

    results = check_history([], {}, {}, checkers=[Broken(), "stats"])
    assert results["valid"] == "unknown"
    assert "boom" in results["checkers"]["broken"]["stats"]["error"]
    assert results["checkers"]["stats"]["valid"] is True
