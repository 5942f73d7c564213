"""Why a log-lin run of ``truncate-to-hw`` can be invalid for ``hw`` and valid for linearizability.

``committed-truncated`` is about one replica's log: a follower cut a record clients saw
committed (acknowledged with acks=all, or read) down to its own lagging HW, before KIP-101.
Another replica still held the record, kept leading, and the follower fetched it back: no
client ever saw it missing or changed, so the linearizable checker, which judges only what
clients saw (acknowledgements, reads and the final reads of every partition whole), rightly
finds nothing. The flaw is real (for a while fewer replicas held a committed record than the
ISR claimed) and only the node events show it. Once a replica without the record is elected
(``uncommitted-offset``) and acknowledges another record at its offset, clients see it, and
both checkers fail that partition.

Both runs are pinned by their whole configuration (the swarm draws of ``floodmark explore
--workload log-lin --variant truncate-to-hw``, seeds 5 and 1), so a change to the swarm does
not move them.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from floodmark.contracts.history import FINAL_READ, Op, read_history
from floodmark.contracts.node_event_kinds import Appended, Truncated
from floodmark.contracts.node_events import read_events_dir
from floodmark.harness.config import make_config
from floodmark.harness.schedule import Schedule
from floodmark.run.runner import Runner

_SWARM = {"cluster": "sim", "workload": "log-lin", "variant": "truncate-to-hw", "acks": "all",
          "op_timeout": 5.0, "recovery_time": 30.0}
# floodmark explore --workload log-lin --variant truncate-to-hw, seed 5
ONLY_A_REPLICA_LOST_IT = {**_SWARM, "seed": 5, "nodes": 5, "nemesis": ["pause", "session"], "time_limit": 30.0,
                          "topics": 1, "partitions": 4, "replication_factor": 2, "min_insync_replicas": 2,
                          "rate": 200.0, "concurrency": 6, "fault_duration": [3.6, 8.9],
                          "quiet_period": [1.8, 4.6], "zk_session_timeout": 30.0, "linger": 0.02,
                          "inter_broker_protocol": "heartbeats"}
# the same, seed 1
A_LEADER_LACKED_IT = {**_SWARM, "seed": 1, "nodes": 5, "nemesis": ["clock", "kill", "stall", "failover"],
                      "time_limit": 30.0, "topics": 2, "partitions": 2, "replication_factor": 3,
                      "min_insync_replicas": 2, "rate": 100.0, "concurrency": 6, "fault_duration": [3.8, 5.0],
                      "quiet_period": [1.3, 2.1], "zk_session_timeout": 4.0, "inter_broker_protocol": "kip-343"}

Place = tuple[str, int, int]  # (topic, partition, offset)


def _run(values: dict[str, Any], store: Path, schedule: Schedule | None = None) -> tuple[dict[str, Any], Path]:
    outcome = Runner(make_config(values, "pinned swarm seed"), store, schedule, out=io.StringIO(), report=False).run()
    assert outcome.error is None, outcome.error
    return json.loads(outcome.run_dir.results.read_text())["checkers"], outcome.run_dir.path


def _client_view(ops: list[Op]) -> tuple[dict[Place, set[Any]], dict[Place, set[Any]], dict[Place, Any]]:
    """Per offset: the values acknowledged there, the values every ok read returned there, and
    the value the final read returned there."""
    acked: dict[Place, set[Any]] = {}
    read: dict[Place, set[Any]] = {}
    final: dict[Place, Any] = {}
    for op in ops:
        if op.type != "ok" or op.f not in ("append", "read", FINAL_READ):
            continue
        key = (op.value["topic"], op.value["partition"])
        if op.f == "append":
            acked.setdefault((*key, op.value["offset"]), set()).add(op.value["value"])
            continue
        records = op.value.get("records")
        if records is None and "value" in op.value:
            records = [[op.value["offset"], op.value["value"]]]
        for offset, value in records or ():
            read.setdefault((*key, offset), set()).add(value)
            if op.f == FINAL_READ:
                final[(*key, offset)] = value
    return acked, read, final


def _fetched_back(events: list[Any], truncation_seq: int, place: Place, value: Any) -> bool:
    """Whether the replica appended ``value`` at the offset again after the truncation."""
    topic, partition, offset = place
    return any(isinstance(e.body, Appended) and e.seq > truncation_seq and e.body.topic == topic
               and e.body.partition == partition and e.body.offset <= offset < e.body.offset + len(e.body.values)
               and e.body.values[offset - e.body.offset] == value for e in events)


def test_a_committed_record_one_replica_truncated_and_fetched_back_is_invisible_to_clients(tmp_path: Path) -> None:
    checkers, run = _run(ONLY_A_REPLICA_LOST_IT, tmp_path)
    hw, linearizable = checkers["hw"], checkers["linearizable"]
    assert hw["valid"] is False and hw["stats"]["anomalies"] == {"committed-truncated": 1}, run
    assert linearizable["valid"] is True and linearizable["stats"]["objects_checked"] == 4, run
    acked, read, final = _client_view(read_history(run / "history.jsonl"))
    events = read_events_dir(run / "events")
    [anomaly] = hw["anomalies"]
    [node, seq] = anomaly["events"][0]
    [cut] = [e.body for e in events[node] if e.seq == seq]
    assert isinstance(cut, Truncated) and cut.reason == "high_watermark"
    for offset in anomaly["offsets"]:
        place = (anomaly["topic"], anomaly["partition"], offset)
        # Not an unacknowledged record: a client was told it is committed there.
        [value] = acked[place]
        # Every read of the offset, the final read of the whole partition among them, saw that
        # value: the linearizable checker read the offset and nothing there contradicts it.
        assert final[place] == value and read[place] == {value}
        # The replica took it back from the leader that kept it.
        assert _fetched_back(events[node], seq, place, value)


def test_a_leader_elected_without_a_committed_record_fails_both_checkers_on_that_partition(tmp_path: Path) -> None:
    # (seed 1's schedule as it drew it before the failover changes of 4605958 moved it)
    pinned = Path(__file__).with_name("swarm_seed_1_schedule.json")
    checkers, run = _run(A_LEADER_LACKED_IT, tmp_path, Schedule.from_dict(json.loads(pinned.read_text()), str(pinned)))
    hw, linearizable = checkers["hw"], checkers["linearizable"]
    assert hw["valid"] is False and linearizable["valid"] is False, run
    without = {(a["topic"], a["partition"]) for a in hw["anomalies"] if a["type"] == "uncommitted-offset"}
    unordered = {(a["topic"], a["partition"]) for a in linearizable["anomalies"]}
    assert without == unordered == {("t0", 1)}
    acked, read, final = _client_view(read_history(run / "history.jsonl"))
    # Two appends were acknowledged at one offset there; the final read holds the later one.
    [(place, values)] = [(p, v) for p, v in acked.items() if len(v) > 1]
    assert place[:2] == ("t0", 1) and final[place] in values and read[place] == values
    # Where a replica only truncated committed records, clients saw nothing amiss.
    truncated_only = {(a["topic"], a["partition"]) for a in hw["anomalies"]} - without
    assert truncated_only == {("t0", 0), ("t1", 0)}
    for a in hw["anomalies"]:
        if (a["topic"], a["partition"]) in truncated_only:
            for offset in a["offsets"]:
                place = (a["topic"], a["partition"], offset)
                assert read[place] == {final[place]} and acked.get(place, {final[place]}) == {final[place]}
