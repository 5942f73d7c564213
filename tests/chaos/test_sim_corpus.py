"""The simulator's regression corpus: every protocol variant's flaw, caught by a named checker.

``corpus.json`` holds, per variant, one seed that ``floodmark explore`` found invalid (and
the explicit overrides of that seed's swarm test, when the seed alone is not enough), with
the checker and the anomaly type that caught it. A variant that random seeds do not reach
within the exploration budget has a hand-written schedule instead (``schedules/variants/``, the
``schedule.json`` format ``floodmark run --schedule`` replays), with the test's
configuration and the seed of the run; it says why it is hand-written (a variant may keep
its schedule beside a seed once exploration reaches it: the schedule does not change when
the swarm's draws do). Each entry is
replayed on the ``sim`` backend (no Docker: the run is a pure function of its seed and
schedule) and must be invalid in that checker with that anomaly; the same test with the
``default`` variant must be valid, which proves the flaw, not the faults, is what is
caught. An entry that stops catching its variant as pinned says whether exploration still
catches the flaw and at which seed (a change that only moves timing moves every seed's run),
or that the gate lost it. Then ``floodmark explore`` of the default variant over seeds 1..500 (and 1..100
under the log-lin workload) must give neither an invalid nor an unknown run.

Part of ``make test-chaos`` (marker ``chaos``); about fifteen minutes on two cores.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from floodmark.contracts.run_config import TestConfig
from floodmark.harness.config import make_config
from floodmark.harness.schedule import Schedule, load_schedule
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.run.runner import Runner
from floodmark.run.swarm import swarm_config

pytestmark = [pytest.mark.chaos]

HERE = Path(__file__).parent
_FILE = json.loads((HERE / "corpus.json").read_text())
CORPUS: list[dict[str, Any]] = _FILE["caught"]
NOT_YET_CAUGHT: dict[str, str] = _FILE["not_yet_caught"]
# Schedules that once made the default variant lose data: it must stay valid on each.
DEFAULT_REGRESSIONS: list[dict[str, Any]] = _FILE["default_regressions"]
SWEEP_FIRST_SEED = 1  # the default variant's exploration in CI: seeds 1..500
SWEEP_SEEDS = 500
LOG_LIN_SWEEP_SEEDS = 100  # and of it under the log-lin workload: seeds 1..100
ROOT = Path(__file__).resolve().parents[2]


def entry_config(entry: dict[str, Any], variant: str) -> TestConfig:
    if "schedule" in entry:  # a hand-written schedule: the test it was written for
        values = {"cluster": "sim", "workload": "queue", **entry["config"], "seed": int(entry["seed"]),
                  "variant": variant}
        return make_config(values, f"corpus entry {entry.get('variant', entry.get('name'))}").replace(name=f"corpus-{variant}")
    config = swarm_config(int(entry["seed"]), variant)
    return config.replace(**entry["overrides"]) if entry.get("overrides") else config


def entry_id(entry: dict[str, Any]) -> str:
    return f"{entry['variant']}-{'schedule' if 'schedule' in entry else 'seed'}"


def entry_schedule(entry: dict[str, Any]) -> Schedule | None:
    return load_schedule(HERE / entry["schedule"])[1] if "schedule" in entry else None


@contextlib.contextmanager
def quiet_runs() -> Iterator[None]:
    """A run's own warnings (a fault that could not apply) belong in its directory, not here."""
    logger = logging.getLogger("floodmark")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    with quiet_runs():
        yield


def judged(config: TestConfig, store: Path, schedule: Schedule | None = None) -> tuple[object, dict[str, Any], str]:
    """(verdict, each checker's result, where the run is) of one simulated run."""
    outcome = Runner(config, store, schedule, out=io.StringIO(), check=True, report=False).run()
    assert outcome.error is None, f"the run itself failed: {outcome.error} ({outcome.run_dir.path})"
    checkers = json.loads(outcome.run_dir.results.read_text())["checkers"]
    summary = {name: (c["valid"], c.get("anomaly_counts")) for name, c in checkers.items()}
    return outcome.valid, checkers, f"{outcome.run_dir.path}: {summary}"


def test_the_corpus_accounts_for_every_variant() -> None:
    # A variant may have both a seed exploration found and a hand-written schedule: the seed
    # proves exploration reaches it, the schedule pins its mechanism whatever the swarm draws.
    named = {e["variant"] for e in CORPUS} | set(NOT_YET_CAUGHT)
    assert named == {v for v in VARIANTS if v != "default"}
    assert not set(NOT_YET_CAUGHT) & {e["variant"] for e in CORPUS}
    ids = [entry_id(e) for e in CORPUS]
    assert len(ids) == len(set(ids))


def test_a_hand_written_schedule_says_why_and_states_its_whole_test() -> None:
    for entry in (e for e in CORPUS if "schedule" in e):
        assert entry.get("hand_written_because"), entry["variant"]
        config = entry_config(entry, entry["variant"])
        schedule = entry_schedule(entry)
        assert schedule is not None and schedule.faults
        assert {f.kind for f in schedule.faults} <= set(config.nemesis), entry["variant"]


def lost_catch(entry: dict[str, Any], store: Path, what: str) -> str:
    """Why an entry no longer catches its variant as pinned, and what to do about it.

    A change to the default code path that only moves timing moves every seed's run, the
    variants' too, so a pinned seed can stop reaching a flaw the checkers still catch. Whoever
    gates a protocol change on this suite must tell that apart from a gate that lost the flaw:
    for a seed entry, exploration from the next seed says which it is, and names the seed to
    pin instead."""
    variant = entry["variant"]
    if "schedule" in entry:
        return (f"{what}; {entry['schedule']} is hand-written for the flaw's mechanism, so if your change only "
                f"moved its timing, adjust the schedule's faults (`floodmark run --cluster sim --variant {variant} "
                f"--schedule tests/chaos/{entry['schedule']}` and read its report)")
    first = int(entry["seed"]) + 1
    command = [sys.executable, "-m", "floodmark", "explore", "--variant", variant, "--seed", str(first),
               "--runs", str(LOST_CATCH_SEEDS), "--jobs", "2", "--no-shrink", "--stop-on-first", "--store", str(store)]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    found = next((line for line in done.stdout.splitlines() if " INVALID (" in line), None)
    if found is None:
        return (f"{what}; nor did `floodmark explore --variant {variant}` over seeds {first}.."
                f"{first + LOST_CATCH_SEEDS - 1}: this gate no longer catches the {variant} flaw (a checker or "
                f"the exploration lost it)")
    seed = int(found.split(" seed ", 1)[1].split()[0])
    results = json.loads((Path(found.rsplit(" ", 1)[1]) / "results.json").read_text())["checkers"]
    caught = sorted(f"checker {name!r}, anomaly {anomaly!r}" for name, c in results.items() if c["valid"] is False
                    for anomaly in c.get("anomaly_counts") or {})
    return (f"{what}; exploration still catches the flaw, at seed {seed} ({'; '.join(caught)}): if your change "
            f"only moved timing, pin that seed in tests/chaos/corpus.json's {variant} entry instead")


LOST_CATCH_SEEDS = 200  # the exploration budget the catch-rate target holds each variant to


@pytest.mark.parametrize("entry", CORPUS, ids=[entry_id(e) for e in CORPUS])
def test_the_flaw_is_caught_and_the_default_variant_passes_the_same_test(entry: dict[str, Any], tmp_path: Path) -> None:
    schedule = entry_schedule(entry)
    valid, checkers, where = judged(entry_config(entry, entry["variant"]), tmp_path, schedule)
    caught = checkers[entry["checker"]]
    if caught["valid"] is not False or entry["anomaly"] not in (caught.get("anomaly_counts") or {}):
        pinned = f"{entry['checker']} {entry['anomaly']}"
        what = (f"the {entry['variant']} flaw went unnoticed: {where}" if valid is not False
                else f"the {entry['variant']} flaw was caught, but not as pinned ({pinned}): {where}")
        pytest.fail(lost_catch(entry, tmp_path / "explore", what))
    valid, _, where = judged(entry_config(entry, "default"), tmp_path, schedule)
    assert valid is True, f"seed {entry['seed']} fails without the {entry['variant']} flaw: {where}"


@pytest.mark.parametrize("entry", DEFAULT_REGRESSIONS, ids=[e["name"] for e in DEFAULT_REGRESSIONS])
def test_the_default_variant_stays_valid_on_the_schedules_that_once_broke_it(entry: dict[str, Any],
                                                                              tmp_path: Path) -> None:
    assert entry.get("found_because"), entry["name"]
    valid, _, where = judged(entry_config(entry, "default"), tmp_path, entry_schedule(entry))
    assert valid is True, f"{entry['name']}: the default variant fails again: {where}"


@pytest.mark.timeout(3700)  # the subprocess's own limit decides; 500 seeds take some 10 minutes on two cores
@pytest.mark.parametrize(("workload", "seeds"), [("queue", SWEEP_SEEDS), ("log-lin", LOG_LIN_SWEEP_SEEDS)])
def test_the_default_variant_passes_an_exploration(workload: str, seeds: int, tmp_path: Path) -> None:
    """``floodmark explore`` itself, as a user runs it: every seed valid, none unknown (exit 0)."""
    command = [sys.executable, "-m", "floodmark", "explore", "--runs", str(seeds), "--workload", workload,
               "--seed", str(SWEEP_FIRST_SEED), "--jobs", "2", "--no-shrink", "--store", str(tmp_path)]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    output = done.stdout  # explore reports on stderr, merged here
    findings = [line for line in output.splitlines() if "INVALID" in line or "UNKNOWN" in line]
    assert done.returncode == 0, "\n".join(findings or [output[-2000:]])
    assert f"{seeds} runs in" in output and "0 invalid, 0 unknown" in output, output[-2000:]


def test_a_seed_that_stopped_catching_its_variant_is_told_from_a_lost_flaw(tmp_path: Path) -> None:
    # acks-all-isr-of-one is pinned at seed 3: seed 1 does not catch it, as a pinned seed whose
    # run a change moved would not.
    entry = {"variant": "acks-all-isr-of-one", "seed": 1, "checker": "invariants", "anomaly": "acked-below-min-isr"}
    valid, _, _ = judged(entry_config(entry, entry["variant"]), tmp_path)
    assert valid is True
    said = lost_catch(entry, tmp_path / "explore", "went unnoticed")
    assert said.startswith("went unnoticed; exploration still catches the flaw, at seed "), said
    seed = int(said.split("at seed ", 1)[1].split()[0])
    assert 1 < seed <= 1 + LOST_CATCH_SEEDS and "acked-below-min-isr" in said, said
