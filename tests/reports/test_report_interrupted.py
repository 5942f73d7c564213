"""An interrupted run is shown as one: its report and its line in the results browser say
where the interrupt stopped it, beside the verdict (unknown at best) that ``check`` gives it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from floodmark.cli import main
from floodmark.reports.run_index import summarize
from floodmark.run_dirs.rundir import RunDir
from floodmark.run_dirs.unfinished_runs import Interruption, unfinished_reason, write_interruption


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    assert main(["run", "--cluster", "sim", "--time-limit", "5", "--seed", "4", "--store", str(store)]) == 0
    return (store / "latest").resolve()


def test_the_report_and_the_index_say_the_run_was_interrupted(finished: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    run = store / "t" / finished.name
    shutil.copytree(finished, run)
    assert summarize(RunDir(run), store).problem is None
    write_interruption(RunDir(run), Interruption("healing", 8.5, None, 5.0, "SIGTERM"))
    reason = unfinished_reason(RunDir(run))
    assert reason is not None and reason.startswith("interrupted (SIGTERM) during healing, 8.5 s into the history")
    assert main(["check", str(run)]) == 2
    assert main(["report", str(run)]) == 0  # an interruption is no bad input: the page shows it
    capsys.readouterr()
    assert f'id="interrupted">{reason}<' in (run / "report.html").read_text()
    summary = summarize(RunDir(run), store)
    assert summary.verdict == "unknown" and summary.problem == reason


@pytest.mark.parametrize("mark", ["garbage", None])
def test_a_run_marked_interrupted_after_its_check_is_not_shown_valid(finished: Path, tmp_path: Path, mark: str | None,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Its results.json still says valid (written before the mark, or the mark unreadable):
    the report and the browser showed 'valid' where check says unknown."""
    store = tmp_path / "store"
    run = store / "t" / finished.name
    shutil.copytree(finished, run)
    if mark is None:
        write_interruption(RunDir(run), Interruption("healing", 8.5, None, 5.0, "SIGTERM"))
    else:
        (run / "interrupted.json").write_text(mark)
    assert '"valid": true' in (run / "results.json").read_text()
    assert main(["report", str(run)]) == 0
    capsys.readouterr()
    assert '<span class="badge unknown" id="verdict">unknown</span>' in (run / "report.html").read_text()
    assert summarize(RunDir(run), store).verdict == "unknown"
    assert main(["check", str(run)]) == 2
