"""A run's id (floodmark.harness.run_identity): on the simulator a function of what the run
is, so that a replay writes the same bytes; on real clusters random, so that two runs of
one test are never taken for one."""

from __future__ import annotations

import io
import re
from pathlib import Path

from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import make_config
from floodmark.harness.run_identity import derived_run_id, random_run_id, resource_id, run_id_for
from floodmark.harness.schedule import Fault, Schedule
from floodmark.run.runner import Runner

HEX16 = re.compile(r"[0-9a-f]{16}")
SCHEDULE = Schedule((Fault(0, "kill", "leader", 1.0, 2.0, 7),), 10.0)


def test_a_simulated_run_s_id_is_its_seed_s_settings_and_schedule_s() -> None:
    config = make_config({"cluster": "sim", "seed": 3, "time_limit": 10})
    ran = derived_run_id(config, SCHEDULE)
    assert HEX16.fullmatch(ran)
    # What the run only records of itself is no part of it: a replay on a later commit, or of a
    # test.yaml that states the run's id, is the same run.
    assert derived_run_id(config.replace(code_version="abc1234", run_id="ffff"), SCHEDULE) == ran
    # A setting given as 10 in code is test.yaml's 10.0.
    assert derived_run_id(config.replace(time_limit=10, fault_duration=(3, 12)), SCHEDULE) == ran
    assert derived_run_id(config.replace(seed=4), SCHEDULE) != ran
    assert derived_run_id(config.replace(acks=1), SCHEDULE) != ran
    shrunk = Schedule((), 10.0)  # (what floodmark shrink runs: another run, another id)
    assert derived_run_id(config, shrunk) != ran
    assert run_id_for(config, SCHEDULE, deterministic=True) == ran


def test_a_real_run_s_id_is_random_and_names_its_resources_by_its_start() -> None:
    config = make_config({"cluster": "local", "seed": 3, "time_limit": 10})
    ids = {run_id_for(config, SCHEDULE, deterministic=False) for _ in range(20)}
    assert len(ids) == 20 and all(HEX16.fullmatch(i) for i in ids)
    one = random_run_id()
    assert resource_id(one) == one[:6] and ClusterSpec(run_id=resource_id(one)).run_id == one[:6]


def test_the_runner_gives_each_run_its_own_id_whatever_its_test_file_says(tmp_path: Path) -> None:
    config = make_config({"cluster": "sim", "seed": 3, "time_limit": 2, "nemesis": "none", "run_id": "stale"})
    out = io.StringIO()
    runner = Runner(config, tmp_path, out=out, check=False, report=False)
    outcome = runner.run()
    run_id = outcome.config.run_id
    assert run_id is not None and run_id != "stale" and HEX16.fullmatch(run_id)
    assert f"\nrun_id: {run_id}\n" in runner.run_dir.config.read_text() or \
        f"\nrun_id: '{run_id}'\n" in runner.run_dir.config.read_text()
    assert f"(run id {run_id[:6]})" in out.getvalue()
    assert all(f'"run_id":"{run_id}"' in path.read_text().splitlines()[0]
               for path in sorted((runner.run_dir.path / "events").glob("*.jsonl")))
