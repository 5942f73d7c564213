"""A shrunk run is minimal: shrinking it again finds nothing smaller, and it replays.

The shrinker's reductions open the way for one another (halved faults end sooner, so the test
can then end sooner), so one pass over them stops short of the minimal failure: shrinking its
result again used to shrink it further, three and four times over. Here the shrinker runs
against a stand-in for the runner whose verdict is a pure function of the candidate, so the
property is checked over many schedules in milliseconds; one real simulated failure checks it
end to end, with a replay of the result.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.cli import main
from floodmark.harness.config import TestConfig
from floodmark.harness.schedule import Fault, Schedule
from floodmark.run import runner as runner_module
from floodmark.run import shrink
from floodmark.run.explore import run_seed
from floodmark.run.shrink import Shrinker, load_failure
from floodmark.run.swarm import swarm_config


def fails(config: TestConfig, schedule: Schedule) -> bool:
    """The stand-in bug: a kill fault, in a test that lasts at least 8 s after it starts."""
    return any(f.kind == "kill" and config.time_limit >= f.start + 8 for f in schedule.faults)


@dataclass
class _Outcome:
    valid: bool
    interrupted: bool = False


@dataclass
class _RunDir:
    path: Path


class FakeRunner:
    """Runs nothing: a run directory of its own, judged by :func:`fails`."""

    made = 0

    def __init__(self, config: TestConfig, store: Path, schedule: Schedule, **_: object) -> None:
        FakeRunner.made += 1
        self.config, self.schedule = config, schedule
        self.run_dir = _RunDir(Path(store) / f"candidate-{FakeRunner.made}")

    def run(self) -> _Outcome:
        self.run_dir.path.mkdir(parents=True)
        return _Outcome(valid=not fails(self.config, self.schedule))

    def publish(self) -> None:
        """Its run directory is made where it stays."""


@contextlib.contextmanager
def fake_runs() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner_module, "Runner", FakeRunner)
        patch.setattr(shrink, "anomaly_types", lambda path: frozenset({"lost-write"}))
        yield


def shrunk(config: TestConfig, schedule: Schedule, store: Path, budget: int = 500) -> tuple[TestConfig, Schedule,
                                                                                              Path, Shrinker]:
    shrinker = Shrinker(store, frozenset({"lost-write"}), budget, io.StringIO())
    original = store / "original"
    original.mkdir(exist_ok=True)
    return (*shrinker.shrink(config, schedule, original), shrinker)


faults = st.lists(st.tuples(st.sampled_from(("kill", "partition", "pause")),
                            st.floats(0.0, 25.0).map(lambda x: round(x, 1)),
                            st.floats(0.5, 12.0).map(lambda x: round(x, 1))), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(faults, st.sampled_from((50.0, 100.0, 200.0)), st.integers(3, 5))
def test_shrinking_a_shrunk_failure_again_finds_nothing_smaller(drawn: list[tuple[str, float, float]],
                                                                rate: float, nodes: int) -> None:
    config = swarm_config(7).replace(time_limit=40.0, rate=rate, nodes=nodes, replication_factor=3)
    schedule = Schedule(tuple(Fault(i, kind, "random", start, duration, i)
                              for i, (kind, start, duration) in enumerate(sorted(drawn, key=lambda d: d[1]))), 40.0)
    if not fails(config, schedule):
        return
    with tempfile.TemporaryDirectory() as tmp, fake_runs():
        first_config, first_schedule, first, shrinker = shrunk(config, schedule, Path(tmp))
        assert fails(first_config, first_schedule) and len(shrinker.attempts) < shrinker.budget
        again_config, again_schedule, again, _ = shrunk(first_config, first_schedule, Path(tmp))
        assert (again_config, again_schedule.faults, again_schedule.time_limit) == \
            (first_config, first_schedule.faults, first_schedule.time_limit), "shrinking again found a smaller failure"
        assert again == Path(tmp) / "original"
        assert len(first_schedule.faults) == 1  # one kill is all the stand-in bug needs


def test_no_candidate_is_run_twice(tmp_path: Path) -> None:
    """Faults already at their shortest halve to themselves: the same test, not run again."""
    config = swarm_config(7).replace(time_limit=9.0, rate=25.0, nodes=3, replication_factor=3)
    schedule = Schedule((Fault(0, "kill", "random", 3.0, 0.5, 0),), 9.0)  # too short to end sooner
    with fake_runs():
        _, _, best, shrinker = shrunk(config, schedule, tmp_path)
    assert shrinker.attempts == [] and best == tmp_path / "original"


def test_halving_faults_keeps_a_pause_on_the_side_of_the_session_timeout_its_shape_names(tmp_path: Path) -> None:
    """A halved long pause the session outlived was a candidate named what it no longer was
    (the run now refuses one): it keeps its length while the other faults halve."""
    config = swarm_config(7).replace(time_limit=30.0, zk_session_timeout=6.0, nemesis=("kill", "pause"))
    schedule = Schedule((Fault(0, "pause", "leader-long", 1.0, 10.0, 0), Fault(1, "pause", "leader-short", 12.0, 4.0, 1),
                         Fault(2, "kill", "random", 17.0, 4.0, 2)), 30.0)
    with fake_runs(), pytest.MonkeyPatch.context() as patch:  # the stand-in bug needs all three faults
        patch.setattr(sys.modules[__name__], "fails", lambda config, schedule: len(schedule.faults) == 3)
        _, smallest, _, _ = shrunk(config, schedule, tmp_path)
    assert [f.duration for f in smallest.faults] == [10.0, 0.5, 0.5]


def test_halving_faults_never_makes_one_longer(tmp_path: Path) -> None:
    """A fault under 1 s 'halved' to the 0.5 s floor was made longer (a 0.2 s kill tried for
    0.5 s, one of 0 s held for 0.5 s), and a candidate of longer faults kept as smaller."""
    config = swarm_config(7).replace(time_limit=20.0, rate=25.0, nodes=3, replication_factor=3)
    schedule = Schedule((Fault(0, "kill", "random", 3.0, 0.2, 0), Fault(1, "kill", "random", 5.0, 0.0, 1),
                         Fault(2, "kill", "random", 8.0, 0.8, 2)), 20.0)
    with fake_runs(), pytest.MonkeyPatch.context() as patch:  # the stand-in bug needs all three faults
        patch.setattr(sys.modules[__name__], "fails", lambda config, schedule: len(schedule.faults) == 3)
        _, smallest, _, shrinker = shrunk(config, schedule, tmp_path)
    planned = {f.seed: f.duration for f in schedule.faults}  # (a fault's seed survives its renumbering)
    for attempt in shrinker.attempts:
        assert all(f.duration <= planned[f.seed] for f in attempt.schedule.faults), attempt.schedule
    assert [f.duration for f in smallest.faults] == [0.2, 0.0, 0.5]


def test_a_real_shrunk_failure_is_minimal_and_replays_identically(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    found = run_seed(1000, "truncate-to-hw", str(store))
    assert found.valid is False and found.run_dir is not None
    assert main(["shrink", "--budget", "3", found.run_dir]) == 0  # a budget spent is not called minimal
    assert "the smallest failing run within the budget of 3 runs (--budget for more)" in capsys.readouterr().err
    assert main(["shrink", "--budget", "40", found.run_dir]) == 0
    err = capsys.readouterr().err
    assert "floodmark shrink: minimal after" in err
    minimal = Path(err.splitlines()[-1].rpartition("floodmark repro ")[2])
    config, schedule, anomalies = load_failure(minimal)
    assert anomalies & set(found.anomalies) and len(schedule.faults) == 1
    assert main(["shrink", "--budget", "40", str(minimal)]) == 0
    assert "no smaller failing run found" in capsys.readouterr().err
    assert main(["repro", str(minimal), "--store", str(tmp_path / "replays")]) == 1
    err = capsys.readouterr().err
    assert "replay identical" in err
    assert json.loads((minimal / "results.json").read_text())["valid"] is False


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    found = run_seed(1000, "truncate-to-hw", str(tmp_path_factory.mktemp("failing") / "store"))
    assert found.valid is False and found.run_dir is not None
    return Path(found.run_dir)


@pytest.mark.parametrize(("edit", "said"), [
    (lambda recorded: recorded.update(faults=recorded["faults"][1:]), "fault 0 not as the run executed"),
    (lambda recorded: recorded.update(time_limit=recorded["time_limit"] - 1), "time limit "),
])
def test_a_run_whose_schedule_was_edited_since_is_not_shrunk_as_the_failure(
        failing_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, said: str) -> None:
    """The shrink takes its starting schedule to fail without running it: edited by hand, it
    had failed nowhere, and when nothing smaller failed the run was said to "stay the
    smallest" failing run while its schedule.json was no longer what failed."""
    import shutil

    run = tmp_path / "store" / "t" / failing_run.name
    shutil.copytree(failing_run, run)
    recorded = json.loads((run / "schedule.json").read_text())
    edit(recorded)  # type: ignore[operator]
    (run / "schedule.json").write_text(json.dumps(recorded))
    assert main(["shrink", "--budget", "1", str(run)]) == 254
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"floodmark shrink: error: {run / 'schedule.json'}: edited since the run ({said}"), line
    assert f"floodmark repro {run}) and shrink that run if it fails" in line, line
    assert not (tmp_path / "store" / "latest").exists()  # (no candidate was run)
