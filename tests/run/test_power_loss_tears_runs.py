"""Torn writes at a power loss in simulated runs: a power loss keeps a random prefix of each
file's unsynced bytes, cut anywhere, so a restarted broker finds torn records to cut; the run
stays valid; the swarm draws it for a share of seeds, from a stream of its own.

Before, a simulated power loss dropped exactly the unsynced bytes, always at a record's end:
no run ever tore a record, and a log recovery that cut the torn tail in memory but left it in
the segment file (so the next append followed the garbage) passed every explored seed.
"""

from __future__ import annotations

import collections
import io
import json
from pathlib import Path

import pytest

from floodmark.contracts.run_config import ConfigError, TestConfig
from floodmark.harness.config import make_config
from floodmark.run.runner import Runner
from floodmark.run.swarm import POWER_LOSS_TEARS_SHARE, swarm_config

CONFIG = {"cluster": "sim", "seed": 1, "topics": 1, "partitions": 2, "concurrency": 6, "rate": 200,
          "time_limit": 20, "nemesis": "power", "power_loss_tears": True}


def recoveries(run_dir: Path) -> list[str]:
    """What each restarted broker's log recovery cut, as its ``truncated`` events say."""
    details = []
    for path in sorted(run_dir.glob("events/*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("kind") == "truncated" and event.get("reason") == "recovery":
                details.append(str(event.get("detail")))
    return details


def test_a_power_loss_that_tears_records_leaves_them_to_recovery_and_the_run_valid(tmp_path: Path) -> None:
    runner = Runner(make_config(CONFIG), tmp_path, out=io.StringIO(), check=True, report=False)
    runner.run()
    assert runner.outcome.error is None and runner.outcome.valid is True
    torn = [detail for detail in recoveries(runner.run_dir.path) if "torn record" in detail]
    assert torn, recoveries(runner.run_dir.path)


def test_power_loss_tears_are_off_by_default_and_only_on_the_simulator() -> None:
    assert TestConfig().power_loss_tears is False
    assert make_config({"cluster": "sim", "power_loss_tears": True}).power_loss_tears is True
    with pytest.raises(ConfigError, match="only the simulator"):
        make_config({"cluster": "docker", "power_loss_tears": True}, "my.yaml")
    with pytest.raises(ConfigError, match="expected true or false"):
        make_config({"cluster": "sim", "power_loss_tears": "sometimes"}, "my.yaml")


def test_the_swarm_draws_tears_for_a_share_of_seeds() -> None:
    drawn = collections.Counter(swarm_config(seed).power_loss_tears for seed in range(1, 601))
    assert abs(drawn[True] / 600 - POWER_LOSS_TEARS_SHARE) < 0.07
