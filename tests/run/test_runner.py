"""Tests for floodmark.run.runner: verdict codes, and whole runs on the local cluster.

The whole-run tests need root, iptables and ZooKeeper (the local backend); they are marked
integration/root and skip with a reason elsewhere.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from runner_fixtures import (
    RUN_ID,
    floodmark_run,
    interrupt_in_the_fault_phase,
    leftovers,
    on_the_local_cluster,
)

from floodmark.backends import cleanup
from floodmark.contracts.history import read_history
from floodmark.harness.code_version import code_version
from floodmark.harness.config import NEMESIS_KINDS, TestConfig, load_config
from floodmark.harness.schedule import load_schedule
from floodmark.run.runner import EXIT_INTERRUPTED, Runner, RunOutcome
from floodmark.run_dirs import rundir


def test_exit_codes_follow_the_verdict(tmp_path: Path) -> None:
    run = rundir.RunDir(tmp_path)
    assert RunOutcome(run, TestConfig(), valid=True).exit_code == 0
    assert RunOutcome(run, TestConfig(), valid=False).exit_code == 1
    assert RunOutcome(run, TestConfig(), valid="unknown").exit_code == 2
    assert RunOutcome(run, TestConfig(), valid=None).exit_code == 2
    assert RunOutcome(run, TestConfig(), interrupted=True).exit_code == EXIT_INTERRUPTED


def test_runner_picks_and_saves_a_seed_before_anything_runs(tmp_path: Path) -> None:
    runner = Runner(TestConfig(cluster="local"), tmp_path)
    assert runner.config.seed is not None
    assert runner.run_dir.path.name.endswith(f"-s{runner.config.seed}")
    assert (tmp_path / "latest").resolve() == runner.run_dir.path.resolve()
    assert Runner(TestConfig(seed=42), tmp_path).config.seed == 42


def wait_for_client_ops(store: Path, process: subprocess.Popen[str], count: int, timeout: float) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        history = store / "latest" / "history.jsonl"
        if history.exists() and sum(1 for line in history.open() if '"process":"nemesis"' not in line) >= count:
            return history
        time.sleep(0.2)
    process.kill()
    raise AssertionError(f"no client ops within {timeout} s: {process.communicate()[1][-3000:]}")


@on_the_local_cluster
def test_a_short_run_on_the_local_cluster_is_valid_and_reproducible(tmp_path: Path) -> None:
    config = TestConfig(cluster="local", nemesis=("kill", "partition"), time_limit=20, seed=5, rate=100,
                        fault_duration=(3.0, 6.0), quiet_period=(2.0, 4.0), recovery_time=20)
    outcome = Runner(config, tmp_path).run()
    run = outcome.run_dir
    assert outcome.error is None, outcome.error
    assert outcome.valid is True, json.loads(run.results.read_text())["checkers"]
    # test.yaml is the configuration plus the code version that ran it and the run's id (on a
    # real cluster a random one: two runs of one seed write different events).
    recorded = load_config(run.config)
    assert recorded == config.replace(code_version=code_version(), run_id=recorded.run_id)
    assert code_version() and re.fullmatch(r"[0-9a-f]{16}", recorded.run_id or "")
    ops = read_history(run.history)
    fs = {op.f for op in ops}
    assert {"send", "poll", "assign", "drain", "heal-all"} <= fs
    assert any(op.f.startswith("start-") for op in ops)
    seed, schedule = load_schedule(run.schedule)
    assert seed == 5 and schedule.faults
    assert list((run.path / "events").glob("*.jsonl")), "node events collected"
    assert run.report.exists()
    # The same seed gives the same schedule and the same workload choices.
    again = Runner(config, tmp_path, schedule).run()
    assert load_schedule(again.run_dir.schedule)[1] == schedule
    assert load_config(again.run_dir.config).run_id != recorded.run_id
    # Each producer worker makes the same choices (value, partition) in the same order.
    first, second = producer_choices(ops), producer_choices(read_history(again.run_dir.history))
    assert first.keys() == second.keys()
    compared = 0
    for worker, choices in first.items():
        length = min(len(choices), len(second[worker]))
        assert choices[:length] == second[worker][:length]
        compared += length
    # Enough to mean something, counted over all workers: under CI's load one worker made 4 sends.
    assert compared > 20, compared


@on_the_local_cluster
def test_the_default_variant_survives_every_nemesis_on_the_local_cluster(tmp_path: Path) -> None:
    # The Docker backend's counterpart is the chaos suite's every-fault-together run.
    config = TestConfig(cluster="local", nemesis=NEMESIS_KINDS, time_limit=30, seed=8, rate=150,
                        fault_duration=(3.0, 8.0), quiet_period=(2.0, 4.0), recovery_time=30)
    outcome = Runner(config, tmp_path).run()
    assert outcome.error is None, outcome.error
    assert outcome.valid is True, json.loads(outcome.run_dir.results.read_text())["checkers"]
    started = {op.f.removeprefix("start-") for op in read_history(outcome.run_dir.history)
               if op.process == "nemesis" and op.f.startswith("start-") and op.type == "ok"}
    assert len(started) >= 3, started  # several kinds of fault really ran


def producer_choices(ops: list) -> dict[str, list[tuple[str, str, int]]]:
    by_worker: dict[str, list[tuple[str, str, int]]] = {}
    for op in ops:
        if op.f == "send" and op.type == "invoke":
            v = op.value
            by_worker.setdefault(v["value"].split("-")[0], []).append((v["value"], v["topic"], v["partition"]))
    return by_worker


@on_the_local_cluster
def test_sigint_tears_everything_down(tmp_path: Path) -> None:
    process = floodmark_run("--cluster", "local", "--nemesis", "partition", "--time-limit", "60",
                            "--seed", "3", store=tmp_path)
    wait_for_client_ops(tmp_path, process, 50, 60)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=90)
    assert process.returncode == EXIT_INTERRUPTED, err[-2000:]
    run_id = RUN_ID.search(err)
    assert run_id, err
    assert leftovers(run_id.group(1)) == []
    read_history(tmp_path / "latest" / "history.jsonl")


@on_the_local_cluster
def test_a_killed_harness_leaves_a_readable_history_and_the_next_start_cleans_up(tmp_path: Path) -> None:
    process = floodmark_run("--cluster", "local", "--nemesis", "none", "--time-limit", "60",
                            "--seed", "4", store=tmp_path)
    history = wait_for_client_ops(tmp_path, process, 50, 60)
    process.kill()
    _, err = process.communicate(timeout=30)
    run_id = RUN_ID.search(err)
    assert run_id, err
    assert len(read_history(history)) >= 50
    left = leftovers(run_id.group(1))
    assert left, "a killed harness cannot clean up after itself"
    namespaces = [line.split()[1] for line in left if line.startswith("netns ")]
    processes = [pid for ns in namespaces for pid in subprocess.run(
        ["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()]
    assert processes
    cleanup.remove_stale_runs(docker_too=False)
    assert leftovers(run_id.group(1)) == []
    # Their libfaketime files too (libfaketime removes them only on a normal exit).
    assert [p.name for p in Path("/dev/shm").glob("*faketime_*") if p.name.rsplit("_", 1)[-1] in processes] == []


def test_the_verdict_is_followed_by_what_the_faults_did(tmp_path: Path) -> None:
    import io

    out = io.StringIO()
    outcome = Runner(TestConfig(cluster="sim", seed=1, nemesis=("kill",), time_limit=20), tmp_path, out=out,
                     report=False).run()
    lines = out.getvalue().splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("floodmark: verdict: "))
    assert lines[verdict + 1].startswith("floodmark: faults that took effect: kill "), lines[verdict:]
    assert outcome.error is None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_simulated_run_says_interrupted_without_a_traceback(tmp_path: Path, signum: int) -> None:
    # The interrupt landed inside the simulator's loop (halfway through writing schedule.json):
    # asyncio logged it as "Task exception was never retrieved", traceback and all.
    process = floodmark_run("--cluster", "sim", "--time-limit", "3600", "--seed", "3", store=tmp_path)
    err = interrupt_in_the_fault_phase(process, signum)
    assert process.returncode == EXIT_INTERRUPTED, err[-3000:]
    assert "Traceback" not in err and "never retrieved" not in err, err[-3000:]
    assert "floodmark: interrupted: healing and tearing down" in err
    read_history(tmp_path / "latest" / "history.jsonl")
    seed, _ = load_schedule(tmp_path / "latest" / "schedule.json")
    assert seed == 3


def test_the_printed_repro_command_works_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run in a relative store prints its repro command with the run's absolute path,
    quoted for the shell (it used to print the path as given, right only where it ran)."""
    monkeypatch.chdir(tmp_path)
    out = subprocess.run(["python", "-m", "floodmark", "run", "--cluster", "sim", "--time-limit", "1",
                          "--seed", "7", "--store", "my store"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    said = out.stdout + out.stderr
    command = said.split("or floodmark repro ", 1)[1].split(")\n", 1)[0]
    run = (tmp_path / "my store" / "latest").resolve()
    assert command == f"'{run}'"
    assert rundir.repro_command("my store/latest") == f"floodmark repro '{run}'"


def test_an_interrupt_before_the_cluster_starts_leaves_no_run_directory(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C while the run was being prepared (its leftovers removed, its files opened)
    left a run directory with a test.yaml and nothing else, named by store/latest."""
    from floodmark.run import runner as runner_module

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner_module, "make_backend", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Runner(TestConfig(cluster="sim", seed=3), tmp_path).run()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
