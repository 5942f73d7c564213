"""Every benchmark script starts: a figure README quotes must stay reproducible after code moves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def bench_env() -> dict[str, str]:
    """The environment a bench script runs in: this checkout first on the import path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH.parent), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("bench_*.py")))
def test_the_script_imports_and_explains_itself(script: str) -> None:
    # This checkout's floodmark, whichever one pip installed last.
    env = bench_env()
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=BENCH.parent, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_the_simulator_bench_says_where_the_cpu_went() -> None:
    env = bench_env()
    done = subprocess.run([sys.executable, str(BENCH / "bench_sim.py"), "--shapes", "3x6", "--seconds", "3",
                           "--runs", "1", "--layers"], capture_output=True, text=True, timeout=300,
                          cwd=BENCH.parent, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(line for line in done.stdout.splitlines() if "CPU by layer" in line)
    shares = {part.split()[0]: int(part.split()[1].rstrip("%"))
              for part in line.split(": ", 1)[1].split(" of ")[0].split(", ")}
    assert set(shares) == {"simulator", "protocol", "clients", "harness", "other"}
    assert 95 <= sum(shares.values()) <= 105  # rounded shares of one whole
    assert shares["simulator"] > 0 and shares["protocol"] > 0  # a simulated run spends in both
    assert "with a simulator that cost nothing" in done.stdout


def test_a_frame_counts_for_the_layer_of_its_file() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from layers import layer_of
    finally:
        sys.path.remove(str(BENCH))
    assert layer_of("/x/floodmark/reference/sim/loop.py") == "simulator"
    assert layer_of("/usr/lib/python3.11/asyncio/tasks.py") == "simulator"
    assert layer_of("/x/floodmark/reference/broker/partition.py") == "protocol"
    assert layer_of("/x/floodmark/reference/client/producer.py") == "clients"
    assert layer_of("/x/floodmark/harness/recorder.py") == "harness"
    assert layer_of("<string>") is None  # a generated __init__ counts for whoever called it


def test_the_simulator_bench_counts_instructions_per_simulated_second() -> None:
    # Counted, not timed: the figure to compare two versions of the code by on a machine
    # whose timings wander. Two short runs under valgrind, about a minute.
    env = bench_env()
    done = subprocess.run([sys.executable, str(BENCH / "bench_sim.py"), "--instructions", "--seconds", "2"],
                          capture_output=True, text=True, timeout=600, cwd=BENCH.parent, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip().splitlines()[-1]
    per_second = float(line.split(" M instructions per simulated second")[0])
    assert 10 < per_second < 10_000, line  # a run costs something, and not the interpreter's start
    assert "first-level cache misses per simulated second" in line


def test_the_exploration_bench_measures_a_catch_rate() -> None:
    env = bench_env()
    done = subprocess.run([sys.executable, str(BENCH / "bench_explore.py"), "--rate", "2", "--first-seed", "1",
                           "--variants", "truncate-to-hw"], capture_output=True, text=True, timeout=300,
                          cwd=BENCH.parent, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 seeds per variant from seed 1" in done.stdout
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith("truncate-to-hw"))
    caught, seeds = (int(n) for n in row[1].split("/"))
    assert seeds == 2 and caught >= 1  # seed 1 catches it (the first-catch figures in docs/measurements.md)
    chances = [float(x) for x in row[3:7]]  # P(200 seeds), its 95% low end, P(target), its 95% low end
    assert 0.0 < chances[1] <= chances[0] <= 1.0 and 0.0 < chances[3] <= chances[2] <= chances[0]


def test_catch_rates_from_several_starts_are_pooled() -> None:
    env = bench_env()
    done = subprocess.run([sys.executable, str(BENCH / "bench_explore.py"), "--rate", "1", "--starts", "2",
                           "--first-seed", "1", "--variants", "truncate-to-hw"], capture_output=True, text=True,
                          timeout=300, cwd=BENCH.parent, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 seeds per variant from seeds 1, 2" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("truncate-to-hw", "  pooled"))]
    assert [row[0] for row in rows] == ["truncate-to-hw", "truncate-to-hw", "pooled"]
    per_start = [tuple(int(n) for n in row[1].split("/")) for row in rows[:2]]
    assert tuple(int(n) for n in rows[2][1].split("/")) == (sum(c for c, _ in per_start), 2)


def test_a_catch_rate_becomes_the_chance_of_meeting_the_target() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_explore
    finally:
        sys.path.remove(str(BENCH))
    assert bench_explore.within_target(0.0, 1.0) == 0.0
    assert bench_explore.within_target(1 / 100) == pytest.approx(1 - 0.99**200)  # seeds alone
    assert bench_explore.within_target(1 / 100, 1.0) == pytest.approx(1 - 0.99**200)  # 200 seeds fit in 300 s
    assert bench_explore.within_target(1 / 100, 3.0) == pytest.approx(1 - 0.99**100)  # only 100 do
    assert bench_explore.wilson_low(0, 50) == 0.0
    assert 0.0 < bench_explore.wilson_low(5, 100) < 0.05 < bench_explore.wilson_low(50, 100) < 0.5
