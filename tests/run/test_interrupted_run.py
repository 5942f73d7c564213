"""An interrupted run (Ctrl-C, SIGTERM) keeps what it recorded and says it was interrupted.

Its run directory holds the partial history, an ``interrupted.json`` saying where the run was
stopped (:class:`floodmark.run_dirs.unfinished_runs.Interruption`) and a ``results.json`` of verdict unknown
giving that reason; whoever judges or shows the run reads the reason through
:func:`floodmark.run_dirs.unfinished_runs.unfinished_reason`, and :func:`floodmark.contracts.results.mark_interrupted`
holds a verdict on it at unknown at best.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runner_fixtures import floodmark_run, interrupt_in_the_fault_phase

from floodmark.contracts.history import read_history
from floodmark.contracts.results import (
    build_results,
    mark_interrupted,
    read_results,
    verdict_problem,
)
from floodmark.run.runner import EXIT_INTERRUPTED
from floodmark.run_dirs import rundir, unfinished_runs


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_records_where_it_stopped_and_is_unknown(tmp_path: Path, signum: int) -> None:
    process = floodmark_run("--cluster", "sim", "--time-limit", "3600", "--seed", "5", store=tmp_path)
    err = interrupt_in_the_fault_phase(process, signum)
    assert process.returncode == EXIT_INTERRUPTED, err[-3000:]
    run = rundir.RunDir((tmp_path / "latest").resolve())
    interruption = unfinished_runs.read_interruption(run)
    assert interruption is not None, err[-3000:]
    assert interruption.step == "the fault phase"
    assert interruption.signal == signal.Signals(signum).name
    assert interruption.fault_phase_seconds is not None
    assert 0 < interruption.fault_phase_seconds < interruption.time_limit == 3600
    assert interruption.seconds >= interruption.fault_phase_seconds
    reason = unfinished_runs.unfinished_reason(run)
    assert reason is not None and reason.startswith(f"interrupted ({signal.Signals(signum).name}) during the fault phase")
    assert reason in err  # said on the way out too
    results = read_results(run.results)
    assert results["valid"] == "unknown" and results["interrupted"] == reason
    assert verdict_problem(results) is None  # a verdict the report and the browser show as the run's
    assert read_history(run.history)  # the partial history is kept, and reads


def test_a_run_never_interrupted_has_no_interruption(tmp_path: Path) -> None:
    run = rundir.create_run_dir(tmp_path, "t", 1)
    assert unfinished_runs.read_interruption(run) is None
    assert unfinished_runs.unfinished_reason(run) is None


def test_an_interruption_reads_back_as_written(tmp_path: Path) -> None:
    run = rundir.create_run_dir(tmp_path, "t", 1)
    written = unfinished_runs.Interruption("healing", 61.25, 60.5, 60.0, "SIGTERM")
    unfinished_runs.write_interruption(run, written)
    assert unfinished_runs.read_interruption(run) == written
    assert unfinished_runs.unfinished_reason(run) == written.describe()
    assert written.describe().startswith("interrupted (SIGTERM) during healing, 61.2 s into the history")
    assert [p.name for p in run.path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("content, problem", [
    ("[]", "expected an object"),
    ('{"step": "x"}', "no "),
    ('{"step": "x", "seconds": 1, "fault_phase_seconds": null, "time_limit": 1, "signal": "SIGINT", "y": 1}',
     "unknown key 'y'"),
    ('{"step": "", "seconds": 1, "fault_phase_seconds": null, "time_limit": 1, "signal": "SIGINT"}', "step"),
    ('{"step": "x", "seconds": -1, "fault_phase_seconds": null, "time_limit": 1, "signal": "SIGINT"}', "seconds"),
    ('{"step": "x", "seconds": true, "fault_phase_seconds": null, "time_limit": 1, "signal": "SIGINT"}', "seconds"),
    ("{", "not an interruption record"),
])
def test_a_damaged_marker_is_named_and_still_says_interrupted(tmp_path: Path, content: str, problem: str) -> None:
    run = rundir.create_run_dir(tmp_path, "t", 1)
    run.interrupted.write_text(content)
    with pytest.raises(unfinished_runs.InterruptionError, match=str(run.interrupted)) as raised:
        unfinished_runs.read_interruption(run)
    assert problem in str(raised.value)
    reason = unfinished_runs.unfinished_reason(run)
    assert reason is not None and "marked interrupted" in reason and "\n" not in reason


def test_a_fifo_marker_is_named_at_once(tmp_path: Path) -> None:
    import os
    import time

    run = rundir.create_run_dir(tmp_path, "t", 1)
    os.mkfifo(run.interrupted)
    started = time.monotonic()
    reason = unfinished_runs.unfinished_reason(run)
    assert time.monotonic() - started < 2
    assert reason is not None and "FIFO" in reason


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=8)
_FIELDS = st.fixed_dictionaries({
    "step": st.one_of(st.text(max_size=120), _JSON), "seconds": st.one_of(st.floats(), _JSON),
    "fault_phase_seconds": st.one_of(st.none(), st.floats(), _JSON), "time_limit": st.one_of(st.floats(), _JSON),
    "signal": st.one_of(st.sampled_from(["SIGINT", "SIGTERM"]), _JSON),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(_FIELDS, _JSON), raw=st.one_of(st.none(), st.binary(max_size=40)))
def test_the_marker_reader_returns_an_interruption_or_names_the_file(tmp_path: Path, data: Any,
                                                                     raw: bytes | None) -> None:
    run = rundir.RunDir(tmp_path)
    if raw is not None:
        run.interrupted.write_bytes(raw)
    else:
        run.interrupted.write_text(json.dumps(data, allow_nan=True))
    try:
        interruption = unfinished_runs.read_interruption(run)
    except unfinished_runs.InterruptionError as e:
        assert str(e).startswith(str(run.interrupted)) and "\n" not in str(e)
    else:
        assert interruption is not None
        for value in (interruption.seconds, interruption.time_limit):
            assert math.isfinite(value) and value >= 0
        assert unfinished_runs.Interruption(**interruption.to_dict()) == interruption
    reason = unfinished_runs.unfinished_reason(run)
    assert reason is not None and reason.startswith("interrupted" if "marked" not in reason else str(run.interrupted))


@pytest.mark.parametrize("checked, expected", [(True, "unknown"), ("unknown", "unknown"), (False, False)])
def test_an_interrupted_runs_verdict_is_unknown_at_best(checked: Any, expected: Any) -> None:
    from floodmark.contracts.results import CheckerResult

    results = build_results({"durability": CheckerResult(checked)})
    mark_interrupted(results, "interrupted (SIGINT) during the fault phase")
    assert results["valid"] == expected  # an anomaly in what it recorded is still one
    assert results["interrupted"] in results["notes"]
    assert verdict_problem(results) is None
    results["valid"] = True  # a file claiming valid over an interrupted run contradicts itself
    problem = verdict_problem(results)
    assert problem is not None and "inconsistent" in problem


def test_an_interrupt_during_the_teardown_is_not_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C that lands after the history is whole, while the cluster is torn down, used to
    be swallowed (the teardown fell back to a forced cleanup and the run went on to its
    verdict): a shrink or an exploration interrupted then ran on to its end. The run is
    interrupted, says where, and its node events, which may be cut short, are not judged."""
    from floodmark.backends.cleanup import interruptible
    from floodmark.backends.sim.backend import SimBackend
    from floodmark.contracts.run_config import TestConfig
    from floodmark.run.runner import Runner

    teardown = SimBackend.teardown

    def interrupted_teardown(self: SimBackend, collect_into: rundir.RunDir | None) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, landing in the teardown
        teardown(self, collect_into)

    monkeypatch.setattr(SimBackend, "teardown", interrupted_teardown)
    out = io.StringIO()
    with interruptible():
        outcome = Runner(TestConfig(cluster="sim", seed=3, time_limit=5), tmp_path, out=out).run()
    assert outcome.interrupted and outcome.valid is None, out.getvalue()
    interruption = unfinished_runs.read_interruption(outcome.run_dir)
    assert interruption is not None and interruption.step == unfinished_runs.TEARDOWN and interruption.signal == "SIGINT"
    assert "node events may not all have been collected" in interruption.describe()
    assert read_results(outcome.run_dir.results)["valid"] == "unknown"
    assert "verdict:" not in out.getvalue()
