"""A log-lin run is held to the white-box invariants too, as a queue run is.

The invariants read only the node events and the configuration, whatever the clients did, so
nothing tied them to the queue workload; yet log-lin runs were judged without them. Under
``acks-all-isr-of-one`` (a leader acknowledging acks=all while its ISR is itself alone) no
record need be lost, so linearizability and hw pass: explore's log-lin seeds 1, 2, 3 and 5 of
1-6 were caught by the invariants alone. Seed 1 is pinned here by its whole configuration
(the swarm's draws) and the schedule it drew (``swarm_seed_1_schedule.json``, from before the
failover changes of 4605958 moved it), so a change to the swarm does not move it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from floodmark.harness.config import make_config
from floodmark.harness.schedule import Schedule
from floodmark.run.runner import Runner

PINNED_SCHEDULE = Path(__file__).with_name("swarm_seed_1_schedule.json")

# floodmark explore --workload log-lin --variant acks-all-isr-of-one, seed 1
ISR_OF_ONE = {"cluster": "sim", "workload": "log-lin", "variant": "acks-all-isr-of-one", "seed": 1, "nodes": 5,
              "nemesis": ["clock", "kill", "stall", "failover"], "time_limit": 30.0, "topics": 2, "partitions": 2,
              "replication_factor": 3, "min_insync_replicas": 2, "acks": "all", "rate": 100.0, "concurrency": 6,
              "fault_duration": [3.8, 5.0], "quiet_period": [1.3, 2.1], "op_timeout": 5.0, "recovery_time": 30.0,
              "zk_session_timeout": 4.0, "inter_broker_protocol": "kip-343"}


def test_acks_all_with_an_isr_of_one_is_caught_on_a_log_lin_run_by_the_invariants(tmp_path: Path) -> None:
    schedule = Schedule.from_dict(json.loads(PINNED_SCHEDULE.read_text()), str(PINNED_SCHEDULE))
    outcome = Runner(make_config(ISR_OF_ONE, "pinned swarm seed"), tmp_path, schedule, out=io.StringIO(),
                     report=False).run()
    assert outcome.error is None, outcome.error
    checkers = json.loads(outcome.run_dir.results.read_text())["checkers"]
    assert [name for name, result in checkers.items() if result["valid"] is not True] == ["invariants"]
    anomalies = checkers["invariants"]["anomalies"]
    assert anomalies and {a["type"] for a in anomalies} == {"acked-below-min-isr"}
    assert all(len(a["isr"]) < a["min_insync_replicas"] for a in anomalies)
