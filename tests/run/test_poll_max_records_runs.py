"""The consumers' max.poll.records in simulated runs: with a few, every poll takes at most
that many records of each partition, consumers fall behind the high watermark, and the run
stays valid; the swarm draws it for a share of seeds, from a stream of its own.

With Kafka's 100 the consumers always kept up: no poll ever stopped short of the high
watermark, so a consumer position moved to the high watermark instead of past the last
record read (a skip of every record between) passed every explored seed.
"""

from __future__ import annotations

import collections
import io
import json
from pathlib import Path

import pytest

from floodmark.contracts.run_config import ConfigError, TestConfig, read_test_config
from floodmark.harness.config import dump_config, load_config, make_config
from floodmark.run.runner import Runner
from floodmark.run.swarm import POLL_MAX_RECORDS, POLL_MAX_SHARE, swarm_config

CONFIG = {"cluster": "sim", "seed": 5, "topics": 1, "partitions": 2, "concurrency": 6, "rate": 200,
          "time_limit": 10, "nemesis": "partition", "poll_max_records": 1}


def poll_batches(runner: Runner) -> list[dict[str, object]]:
    """Every batch of every ok poll of the run."""
    batches = []
    for line in runner.run_dir.history.read_text().splitlines():
        op = json.loads(line)
        if op["f"] == "poll" and op["type"] == "ok":
            batches += op["value"]
    return batches


def test_a_few_records_per_poll_make_consumers_lag_and_the_run_stays_valid(tmp_path: Path) -> None:
    runner = Runner(make_config(CONFIG), tmp_path, out=io.StringIO(), check=True, report=False)
    runner.run()
    assert runner.outcome.error is None and runner.outcome.valid is True
    batches = poll_batches(runner)
    assert batches and max(len(b["records"]) for b in batches) == 1  # type: ignore[arg-type]
    behind = [b for b in batches if b["records"] and b["records"][-1][0] + 1 < b["high_watermark"]]  # type: ignore[index]
    assert len(behind) > len(batches) / 4, (len(behind), len(batches))


def test_poll_max_records_defaults_to_kafkas_round_trips_and_refuses_nonsense(tmp_path: Path) -> None:
    assert TestConfig().poll_max_records == 100
    path = tmp_path / "test.yaml"
    path.write_text("nodes: 3\n")
    config = load_config(path, {"poll_max_records": 2})
    assert config.poll_max_records == 2
    dump_config(config, path)
    assert load_config(path) == config
    assert "poll_max_records: 2" in path.read_text().splitlines()
    assert (read_test_config(path) or TestConfig()).poll_max_records == 2
    for bad in (0, -1, 1.5, "many", True):
        with pytest.raises(ConfigError) as raised:
            make_config({"poll_max_records": bad}, "my.yaml")
        assert str(raised.value).startswith("my.yaml: poll_max_records: ") and "\n" not in str(raised.value)


def test_the_swarm_draws_a_few_for_a_share_of_seeds() -> None:
    drawn = collections.Counter(swarm_config(seed).poll_max_records for seed in range(1, 601))
    assert set(drawn) == {100, *POLL_MAX_RECORDS}
    assert abs(sum(drawn[n] for n in POLL_MAX_RECORDS) / 600 - POLL_MAX_SHARE) < 0.07
