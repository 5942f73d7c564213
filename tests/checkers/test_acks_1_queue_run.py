"""An acks=1 queue run that loses acknowledged records: the queue checker agrees with durability.

Kafka permits losing under acks=1 what only the leader's acknowledgement vouched for. The
durability checker marks such losses ``permitted_by``; the queue checker must not report
what the same losses leave behind (a lost write, an offset handed out again, a producer's
offsets going backwards) as a violation, nor make up an order anomaly from them: a lost
record's offset is handed out again (a log has no holes), so a consumer's successive reads
never pass over it (no ``poll-skip``). Pinned on a simulated run that loses 148 records.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from floodmark.contracts.run_config import TestConfig
from floodmark.run.runner import Runner

PERMISSION = "acks=1 (only acks=all promises durability)"


def test_losses_under_acks_1_are_permitted_alike_by_durability_and_queue(tmp_path: Path) -> None:
    config = TestConfig(cluster="sim", acks=1, seed=2, time_limit=40, nemesis=("kill", "partition", "pause"))
    outcome = Runner(config, tmp_path, out=io.StringIO(), report=False).run()
    checkers = json.loads(outcome.run_dir.results.read_text())["checkers"]
    durability, queue = checkers["durability"], checkers["queue"]
    assert durability["stats"]["lost"] > 0  # the run lost acknowledged records
    for result in (durability, queue):
        assert result["anomalies"] and result["stats"]["violations"] == 0
        assert all(a["permitted_by"] == PERMISSION for a in result["anomalies"]), result["anomalies"][:3]
    assert not {a["type"] for a in queue["anomalies"]} & {"poll-skip", "nonmonotonic-poll"}
    # The white-box checkers see a correct protocol: only the configuration let records go.
    assert all(checkers[name]["valid"] is True for name in ("hw", "leader", "invariants"))
