"""The producer's linger in simulated runs: sends to one partition from different workers
share a ProduceRequest (multi-record appends), the run stays valid, and replays byte for byte.

Without a linger every batch on the simulator held one record: two workers never send in the
same turn of the event loop, so the accumulator's per-record offsets and the brokers'
multi-record appends went unexercised.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from floodmark.contracts.run_config import TestConfig
from floodmark.harness.config import make_config
from floodmark.run import digest
from floodmark.run.runner import Runner

# Two producers share the one partition (more producer workers than partitions), so their
# sends meet within a 20 ms linger at 100 ops/s (invocations 10 ms apart).
CONFIG = {"cluster": "sim", "seed": 11, "topics": 1, "partitions": 1, "concurrency": 4, "rate": 100,
          "time_limit": 15, "nemesis": "partition,kill", "linger": 0.02}


def run(config: TestConfig, store: Path) -> Runner:
    runner = Runner(config, store, out=io.StringIO(), check=True, report=False)
    runner.run()
    assert runner.outcome.error is None, runner.outcome.error
    return runner


def leader_appends(runner: Runner) -> list[tuple[str, ...]]:
    """The values of every append a leader made (one per ProduceRequest written)."""
    appends = []
    for events in sorted(runner.run_dir.events.glob("*.jsonl")):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            if event.get("kind") == "appended" and event.get("role") == "leader":
                appends.append(tuple(event["values"]))
    return appends


@pytest.fixture(scope="module")
def lingering_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Runner, Runner]:
    """The same lingering test run twice."""
    config = make_config(CONFIG)
    store = tmp_path_factory.mktemp("linger")
    return run(config, store / "a"), run(config, store / "b")


def test_with_a_linger_produce_requests_carry_several_records_and_the_run_is_valid(
        lingering_runs: tuple[Runner, Runner]) -> None:
    runner = lingering_runs[0]
    assert runner.outcome.valid is True
    appends = leader_appends(runner)
    multi = [values for values in appends if len(values) > 1]
    assert appends and len(multi) > len(appends) / 4, (len(multi), len(appends))


def test_a_lingering_run_replays_byte_for_byte(lingering_runs: tuple[Runner, Runner]) -> None:
    first, second = (runner.outcome.digest for runner in lingering_runs)
    assert first is not None and second is not None
    assert digest.differences(first, second) == []


def test_without_the_linger_the_same_test_never_batches(tmp_path: Path) -> None:
    """What the linger changes: the same test without it appends one record per request."""
    runner = run(make_config({**CONFIG, "linger": 0.0}), tmp_path)
    assert runner.outcome.valid is True
    appends = leader_appends(runner)
    assert appends and all(len(values) == 1 for values in appends)
