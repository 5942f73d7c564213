"""A run whose harness was killed outright (SIGKILL) is marked abandoned, never judged valid.

Until its history and node events are whole, a run directory names its maker in ``.maker``
(:func:`floodmark.run_dirs.unfinished_runs.claim_run`); a harness killed before it finishes leaves that
name behind, and every reader of the run (``check``, the report, the results browser,
``analyze``) calls the run unfinished through :func:`floodmark.run_dirs.unfinished_runs.unfinished_reason`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runner_fixtures import floodmark_run, interrupt_in_the_fault_phase

from floodmark.owners import owner_token
from floodmark.reports.run_index import summarize
from floodmark.run_dirs import rundir, unfinished_runs

KILLED = "ended before finishing it (killed or crashed)"


def _check(run: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floodmark", "check", str(run)],
                          capture_output=True, text=True, timeout=300)


def test_a_run_killed_outright_is_marked_abandoned_and_judged_unknown(tmp_path: Path) -> None:
    process = floodmark_run("--cluster", "sim", "--time-limit", "3600", "--seed", "5", store=tmp_path)
    interrupt_in_the_fault_phase(process, signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    run = rundir.RunDir((tmp_path / "latest").resolve())
    assert run.maker.is_file() and not run.interrupted.exists() and not run.results.exists()
    reason = unfinished_runs.unfinished_reason(run)
    assert reason is not None and KILLED in reason and f":{process.pid}:" in reason
    checked = _check(run.path)
    assert checked.returncode == 2, checked.stdout + checked.stderr  # unknown, however clean what it holds
    assert KILLED in checked.stdout + checked.stderr
    summary = summarize(run, tmp_path)  # the results browser's row
    assert summary.verdict == "unknown" and summary.problem is not None and KILLED in summary.problem


def test_a_finished_run_names_no_maker(tmp_path: Path) -> None:
    process = floodmark_run("--cluster", "sim", "--time-limit", "5", "--seed", "5", store=tmp_path)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    run = rundir.RunDir((tmp_path / "latest").resolve())
    assert not run.maker.exists() and unfinished_runs.unfinished_reason(run) is None


def test_an_interrupted_run_names_no_maker_and_says_where_it_stopped(tmp_path: Path) -> None:
    process = floodmark_run("--cluster", "sim", "--time-limit", "3600", "--seed", "5", store=tmp_path)
    interrupt_in_the_fault_phase(process, signal.SIGTERM)
    run = rundir.RunDir((tmp_path / "latest").resolve())
    assert not run.maker.exists()
    reason = unfinished_runs.unfinished_reason(run)
    assert reason is not None and reason.startswith("interrupted (SIGTERM)")


def _made(tmp_path: Path, token: str | bytes) -> rundir.RunDir:
    run = rundir.create_run_dir(tmp_path, "t", 1)
    run.maker.write_bytes(token.encode() if isinstance(token, str) else token)
    return run


def test_a_run_being_made_by_a_live_harness_is_said_to_be(tmp_path: Path) -> None:
    run = rundir.create_run_dir(tmp_path, "t", 1)
    unfinished_runs.claim_run(run)
    reason = unfinished_runs.unfinished_reason(run)
    assert reason is not None and reason.startswith(f"still being made by {owner_token()}")
    unfinished_runs.release_run(run)
    assert unfinished_runs.unfinished_reason(run) is None


def test_another_machines_maker_is_not_judged_dead(tmp_path: Path) -> None:
    other = "not-" + socket.gethostname()
    reason = unfinished_runs.unfinished_reason(_made(tmp_path, f"{other}:1:1"))
    assert reason is not None and "another machine" in reason and "cannot be judged valid" in reason


def test_an_interruption_record_says_more_than_the_maker(tmp_path: Path) -> None:
    run = _made(tmp_path, f"{socket.gethostname()}:999999999:1")
    unfinished_runs.write_interruption(run, unfinished_runs.Interruption("healing", 5.0, 4.0, 60.0, "SIGINT"))
    assert unfinished_runs.unfinished_reason(run) == unfinished_runs.read_interruption(run).describe()  # type: ignore[union-attr]


def test_a_maker_record_that_is_a_fifo_is_named_at_once(tmp_path: Path) -> None:
    run = rundir.create_run_dir(tmp_path, "t", 1)
    os.mkfifo(run.maker)
    reason = unfinished_runs.unfinished_reason(run)
    assert reason is not None and reason.startswith(str(run.maker)) and "cannot be judged valid" in reason


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(st.binary(max_size=2000), st.text(max_size=200).map(str.encode)))
def test_any_maker_record_leaves_the_run_unfinished_and_never_raises(tmp_path: Path, content: bytes) -> None:
    """Whatever ``.maker`` holds, the run is unfinished (it is there: the run was being made)
    and the reason is one line; never a traceback."""
    run = rundir.RunDir(tmp_path / "t" / "r")
    run.path.mkdir(parents=True, exist_ok=True)
    run.maker.write_bytes(content)
    reason = unfinished_runs.unfinished_reason(run)
    assert reason is not None and "cannot be judged valid" in reason and "\n" not in reason


def test_the_results_browser_sees_a_maker_die_though_no_file_changes(tmp_path: Path) -> None:
    """Its index caches summaries by the files they come from; a maker's death changes none."""
    from floodmark.owners import start_ticks
    from floodmark.reports.run_index import RunIndex

    run = rundir.create_run_dir(tmp_path, "t", 1)
    run.history.write_text("")
    maker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run.maker.write_text(f"{socket.gethostname()}:{maker.pid}:{start_ticks(maker.pid)}\n")
        index = RunIndex(tmp_path)
        (being_made,) = index.runs()
        assert being_made.problem is not None and being_made.problem.startswith("still being made")
    finally:
        maker.kill()
        maker.wait()
    (abandoned,) = index.runs()
    assert abandoned.verdict is None or abandoned.verdict == "unknown"
    assert abandoned.problem is not None and KILLED in abandoned.problem


def test_repro_of_an_abandoned_run_replays_it_whole_and_says_why_nothing_is_compared(tmp_path: Path) -> None:
    """A run killed outright was never digested: its replay runs the test whole, and says
    that the run did not finish rather than leave the missing digest unexplained."""
    process = floodmark_run("--cluster", "sim", "--time-limit", "5", "--seed", "5", store=tmp_path)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    run = rundir.RunDir((tmp_path / "latest").resolve())
    for made_at_the_end in (run.digest, run.results, run.report):  # as a harness killed before them leaves it
        made_at_the_end.unlink()
    run.maker.write_text(f"{socket.gethostname()}:999999999:1\n")
    replay = subprocess.run([sys.executable, "-m", "floodmark", "repro", str(run.path)],
                            capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr[-3000:]
    (said,) = [line for line in replay.stderr.splitlines() if "digest.json: no such file" in line]
    assert f"the run did not finish (its harness ({socket.gethostname()}:999999999:1) {KILLED}" in said
    assert said.endswith("the replay runs it whole")
