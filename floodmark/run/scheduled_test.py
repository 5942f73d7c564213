"""The test ``floodmark run --schedule FILE`` runs: what a schedule file says of it, and what not.

A run's schedule.json states the run's seed and time limit beside its faults. On the
simulator a run is a function of its seed, configuration, schedule and code, so the schedule
of a bug's run replays that run only with that run's seed: the schedule's seed and time limit
are the test's, over a -f file's and the defaults, unless the command line states its own
(``--seed``: the same faults under other client interleavings, a FoundationDB user's
"same faults, other seeds"; ``--time-limit``: a longer or shorter fault phase). Refusing
those would forbid a sound experiment; taking them silently would let a user believe they
replayed the run, so stderr says so in one line, as it does when the schedule's values
replace a -f file's.

The rest of a test (backend, brokers, load, variant) is not in a schedule: the options and
-f say it. A schedule.json beside its run's test.yaml whose test is another than the one
about to run is said in one line too (``--nodes 3`` for a run of 5 brokers replays the
faults on another cluster: legitimate, but not the run), naming how to replay the run
itself. A fault the test cannot apply at all is refused before anything runs
(:func:`floodmark.run.assemble.refusal`), whichever said the test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from floodmark.errors import UsageError, first_few, printable
from floodmark.harness.config import ConfigError, TestConfig, load_config, make_config
from floodmark.harness.schedule import Schedule
from floodmark.run_dirs import rundir


def scheduled_config(args: argparse.Namespace, config: TestConfig, seed: int | None, schedule: Schedule) -> TestConfig:
    """``config`` (of the options and -f) with the seed and time limit the schedule file
    ``args.schedule`` states, unless ``args`` (the command line) states them; one line on
    stderr for each value one of them replaces of the other. A value no test may have is
    the schedule file's error (UsageError naming it)."""
    stated: dict[str, int | float] = {}
    if seed is not None:
        stated["seed"] = seed
    if schedule.time_limit_stated:
        stated["time_limit"] = schedule.time_limit
    taken: dict[str, int | float] = {}
    notes = []
    for key, value in stated.items():
        option, given, current = f"--{key.replace('_', '-')}", getattr(args, key), getattr(config, key)
        if given is not None:
            if given != value:
                notes.append(f"{option} {_setting(key, given)} replaces the schedule's {_setting(key, value)}")
            continue
        if current is not None and current != value and args.file is not None:
            notes.append(f"the schedule's {key.replace('_', ' ')} {_setting(key, value)} replaces {args.file}'s "
                         f"{_setting(key, current)}")
        taken[key] = value
    if taken:
        try:  # (checked on their own: the rest of the test was checked already)
            make_config(taken, args.schedule)
        except ConfigError as e:
            raise UsageError(str(e)) from None
        config = config.replace(**taken)
    if notes:
        overridden = any(getattr(args, key) is not None for key in stated)
        print(printable(f"floodmark run: {args.schedule}: {'; '.join(notes)}"
                        f"{': the run is not the one the schedule recorded' if overridden else ''}"), file=sys.stderr)
    return config


def _setting(key: str, value: float) -> str:
    """A seed or a time limit as the notes of :func:`scheduled_config` show it."""
    return f"{value:g} s" if key == "time_limit" else str(value)


SHOWN = 3  # settings named when a schedule's run was another test; the rest counted
# What the harness writes into test.yaml of itself, not what the test is, and what
# scheduled_config says of already.
_NOT_THE_TEST = ("code_version", "run_id", "name", "seed", "time_limit")


def say_another_test(args: argparse.Namespace, config: TestConfig) -> None:
    """One line on stderr when the schedule file is a run directory's schedule.json, no -f
    names a test, and that run's test.yaml is another test than ``config``: its settings
    that differ, and how to replay the run itself. Nothing when that test.yaml cannot be
    read (a file is not a run's because it is named schedule.json)."""
    path = Path(args.schedule)
    if args.file is not None or path.name != rundir.SCHEDULE:
        return
    beside = path.parent / rundir.CONFIG
    if not beside.is_file():  # (a FIFO would wait for a writer)
        return
    try:
        recorded = load_config(beside)
    except (ConfigError, OSError, ValueError):
        return
    differ = [(key, value, getattr(config, key)) for key, value in _settings(recorded).items()
              if key not in _NOT_THE_TEST and getattr(config, key) != value]
    if not differ:
        return
    shown = first_few([f"{key} {_word(was)}, not {_word(now)}" for key, was, now in differ], SHOWN)
    print(printable(f"floodmark run: {path}: its run was another test ({shown}); to replay that run: "
                    f"floodmark repro {path.parent} (or run -f {beside} --schedule {path})"), file=sys.stderr)


def _settings(config: TestConfig) -> dict[str, Any]:
    return {key: getattr(config, key) for key in config.to_dict()}


def _word(value: Any) -> str:
    """A setting's value as a user types it."""
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)
