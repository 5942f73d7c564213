"""Hand-written fault schedules and damaged run directories, used as a Jepsen or Kafka
engineer uses them: ``floodmark run --cluster sim --schedule FILE`` with files written by
hand, and ``repro``, ``check`` and ``report`` of a simulated run whose files were edited.

A schedule the test cannot run is refused in one line naming the file and the fault, before
a run directory is made; one it can run leaves a ``schedule.json`` that says what ran (the
test's time limit, times counted from the workload's start, and every fault, also those the
fault phase ended before). A damaged run directory is never judged valid on what could not
be read: refused in one line (exit 254) while its digest says what it held, unknown without.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from floodmark.cli import main
from floodmark.contracts.history import read_history

# A light test: the runs below take about a second each.
LIGHT = ("--rate", "50", "--concurrency", "4", "--topics", "1", "--partitions", "2")


def fault(number: Any = 0, kind: Any = "kill", shape: Any = "leader", start: Any = 1.0, duration: Any = 1.0,
          seed: Any = 1, **more: Any) -> dict[str, Any]:
    return {"number": number, "kind": kind, "shape": shape, "start": start, "duration": duration, "seed": seed,
            **more}


def schedule_text(*faults: dict[str, Any], time_limit: Any = 3) -> str:
    return json.dumps({"time_limit": time_limit, "faults": list(faults)})


def floodmark(capsys: pytest.CaptureFixture[str], *argv: str, stdout: bool = False) -> tuple[int, list[str]]:
    """Exit code and the lines it printed on stderr (with ``stdout``: on stdout, then stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, [line for line in ((out if stdout else "") + err).splitlines() if line.strip()]


def run_schedule(capsys: pytest.CaptureFixture[str], path: Path, store: Path, *options: str) -> tuple[int, list[str]]:
    return floodmark(capsys, "run", "--cluster", "sim", "--seed", "3", *LIGHT, "--schedule", str(path),
                     "--store", str(store), *options)


def run_dirs(store: Path) -> list[Path]:
    return [p for p in store.glob("*/*") if p.parent.name != "latest"] if store.exists() else []


# ---------------------------------------------------------------------------- schedule files

NAN_START = schedule_text(fault()).replace('"start": 1.0', '"start": NaN')
INFINITE = schedule_text(fault()).replace('"duration": 1.0', '"duration": Infinity')
TWICE = schedule_text(fault()).replace('"kind": "kill"', '"kind": "kill", "kind": "pause"')

REFUSED: list[tuple[str, str | bytes, str, tuple[str, ...]]] = [
    ("negative start", schedule_text(fault(start=-1)), "fault 0: start must be a number of seconds", ()),
    ("NaN start", NAN_START, "nan is not a finite number", ()),
    ("infinite duration", INFINITE, "inf is not a finite number", ()),
    ("start 1e308", schedule_text(fault(start=1e308)), "fault 0: start must be a number of seconds", ()),
    ("start past the time limit", schedule_text(fault(start=5)),
     "fault 0 (kill leader) starts at 5 s, at or after the test's time limit of 3 s", ()),
    ("unknown kind", schedule_text(fault(kind="meteor")), "fault 0 (meteor:leader): unknown fault kind", ()),
    ("a shape aimed at n7", schedule_text(fault(kind="partition", shape="isolate-n7")),
     "fault 0 (partition:isolate-n7): unknown shape", ()),
    ("unknown message type", schedule_text(fault(kind="message", shape="drop-bogus-request")),
     "fault 0 (message:drop-bogus-request): unknown shape", ()),
    ("a message the run's brokers never send", schedule_text(fault(kind="message", shape="drop-heartbeat")),
     "fault 0 (message:drop-heartbeat): unknown shape", ("--inter-broker-protocol", "legacy")),
    ("duplicate key", TWICE, "the key 'kind' twice in one object", ()),
    ("number as text", schedule_text(fault(number="0")), "fault 0: number must be an integer", ()),
    ("kind a number", schedule_text(fault(kind=5)), "fault 0: kind must be a name", ()),
    ("shape null", schedule_text(fault(shape=None)), "fault 0: shape must be a name", ()),
    ("start as text", schedule_text(fault(start="1")), "fault 0: start must be a number of seconds", ()),
    ("duration a list", schedule_text(fault(duration=[1])), "fault 0: duration must be a number of seconds", ()),
    ("seed a fraction", schedule_text(fault(seed=1.5)), "fault 0: seed must be an integer", ()),
    ("time limit true", schedule_text(fault(), time_limit=True), "time_limit must be a number of seconds", ()),
    ("a field missing", json.dumps({"time_limit": 3, "faults": [{"number": 0, "kind": "kill"}]}),
     "fault 0: missing field 'shape'", ()),
    ("a typo", json.dumps({"time-limit": 3, "faults": []}), "unknown key 'time-limit'; did you mean 'time_limit'?", ()),
    ("empty file", "", "not a schedule: not valid JSON", ()),
    ("not UTF-8", b'{"time_limit": 3, "faults": [{"kind": "k\xffill"}]}', "not UTF-8 text", ()),
    ("a power fault on docker", schedule_text(fault(kind="power")),
     "fault 0 (power:leader): the docker backend cannot apply power faults; only --cluster sim can",
     ("--cluster", "docker")),
    ("a session fault on local", schedule_text(fault(kind="session")),
     "fault 0 (session:leader): the local backend cannot apply session faults; only --cluster sim can",
     ("--cluster", "local")),
    ("a failover fault on one broker", schedule_text(fault(kind="failover", shape="kill-leader")),
     "fault 0 (failover:kill-leader): needs at least 2 brokers, one to fail over to; the test has 1",
     ("--nemesis", "failover", "--nodes", "1", "--replication-factor", "1", "--min-insync-replicas", "1")),
    ("a failover step aimed at a third replica of two", schedule_text(fault(kind="failover", shape="lag-third")),
     "fault 0 (failover:lag-third): aims at a partition's third replica: with replication factor 2 no partition "
     "has one", ("--nemesis", "failover", "--replication-factor", "2", "--min-insync-replicas", "1")),
    # Faults the cluster's layout leaves nothing to do ran, cut or struck nothing, and only the
    # coverage beside the verdict said they did not take effect.
    ("a majorities ring on two brokers", schedule_text(fault(kind="partition", shape="majorities-ring")),
     "fault 0 (partition:majorities-ring): a ring of 3 nodes (ZooKeeper too) in which each node's neighbours "
     "make a majority hides no node from any: needs at least 3 brokers; the test has 2",
     ("--nemesis", "partition", "--nodes", "2", "--replication-factor", "2", "--min-insync-replicas", "1")),
    ("a bridge on one broker", schedule_text(fault(kind="partition", shape="bridge")),
     "fault 0 (partition:bridge): two halves of brokers joined by a bridge broker need at least 3 brokers; "
     "the test has 1",
     ("--nemesis", "partition", "--nodes", "1", "--replication-factor", "1", "--min-insync-replicas", "1")),
    ("a deaf follower of a single replica", schedule_text(fault(kind="partition", shape="followers-deaf")),
     "fault 0 (partition:followers-deaf): with replication factor 1 no partition has a follower",
     ("--nemesis", "partition", "--replication-factor", "1", "--min-insync-replicas", "1")),
    ("follower fetches with a single replica", schedule_text(fault(kind="message", shape="drop-fetch-response")),
     "fault 0 (message:drop-fetch-response): with replication factor 1 no partition has a follower to fetch",
     ("--nemesis", "message", "--replication-factor", "1", "--min-insync-replicas", "1")),
    ("a reassignment on one broker", schedule_text(fault(kind="admin", shape="reassign")),
     "fault 0 (admin:reassign): with a single broker a partition's replicas have nowhere to move",
     ("--nemesis", "admin", "--nodes", "1", "--replication-factor", "1", "--min-insync-replicas", "1")),
    ("a partition of no duration", schedule_text(fault(kind="partition", shape="isolate-leader", duration=0)),
     "fault 0 (partition:isolate-leader): a duration of 0 s heals it as it starts, so it does nothing",
     ("--nemesis", "partition")),
    # A pause's shape names its side of the session timeout: it ran as written, and only the
    # coverage said the fault was not what its name claims.
    ("a long pause the session outlives", schedule_text(fault(kind="pause", shape="leader-long", duration=2)),
     "fault 0 (pause:leader-long): a long pause must outlast the 6 s ZooKeeper session timeout; it lasts 2 s",
     ("--nemesis", "pause")),
    ("a short pause the session does not survive",
     schedule_text(fault(kind="pause", shape="random-short", duration=7)),
     "fault 0 (pause:random-short): a short pause must end within the 6 s ZooKeeper session timeout; it lasts 7 s",
     ("--nemesis", "pause")),
    # The final heal-all ends it at the time limit, 2 s in: the session outlived the "long" pause.
    ("a long pause the time limit cuts short", schedule_text(fault(kind="pause", shape="leader-long", duration=7)),
     "fault 0 (pause:leader-long): the test's time limit of 3 s ends it 2 s after it starts: a long pause must "
     "outlast the 6 s ZooKeeper session timeout", ("--nemesis", "pause")),
]


@pytest.mark.parametrize(("content", "problem", "options"), [case[1:] for case in REFUSED],
                         ids=[case[0] for case in REFUSED])
def test_a_schedule_the_test_cannot_run_is_refused_in_one_line_before_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, problem: str,
        options: tuple[str, ...]) -> None:
    path = tmp_path / "schedule.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, lines = run_schedule(capsys, path, tmp_path / "store", *options)
    assert code == 254 and len(lines) == 1, lines
    assert lines[0].startswith(f"floodmark run: error: {path}") and problem in lines[0], lines[0]
    assert run_dirs(tmp_path / "store") == []


@pytest.mark.parametrize("what", ["a directory", "larger than a schedule may be", "no such file"])
def test_a_schedule_path_that_is_no_schedule_file_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str) -> None:
    path = tmp_path / "schedule.json"
    if what == "a directory":
        path.mkdir()
    elif what == "larger than a schedule may be":
        with open(path, "wb") as f:  # sparse: 64 MiB and a byte, written in no time
            f.truncate((64 << 20) + 1)
    code, lines = run_schedule(capsys, path, tmp_path / "store")
    assert code == 254 and len(lines) == 1 and lines[0].startswith(f"floodmark run: error: {path}"), lines
    assert run_dirs(tmp_path / "store") == []


def test_a_schedule_of_many_refused_faults_is_refused_in_one_short_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each refused fault was named: 100,000 faults of an unknown kind made a 14 MB line."""
    path = tmp_path / "schedule.json"
    path.write_text(schedule_text(*(fault(number, kind="meteor") for number in range(1000))))
    code, lines = run_schedule(capsys, path, tmp_path / "store")
    assert code == 254 and len(lines) == 1, lines[:3]
    assert len(lines[0]) < 1000 and lines[0].endswith("; and 997 more faults refused"), lines[0][-200:]
    assert "fault 0 (meteor:leader): unknown fault kind" in lines[0]


def test_failover_drawn_for_a_single_broker_is_refused_before_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every failover fault on too few brokers failed as it started, and the run went on to a
    verdict as if it had tested failovers. (Two brokers draw the stalled controller: see
    tests/harness/test_failover_planning.py.)"""
    code, lines = floodmark(capsys, "run", "--cluster", "sim", "--seed", "4", "--nemesis", "failover",
                            "--nodes", "1", "--replication-factor", "1", "--min-insync-replicas", "1",
                            "--time-limit", "20", "--store", str(tmp_path / "store"))
    assert code == 254 and len(lines) == 1, lines
    assert "(failover:" in lines[0] and "needs at least 2 brokers, one to fail over to; the test has 1" in lines[0]
    assert run_dirs(tmp_path / "store") == []


@pytest.mark.parametrize("nodes", ["1", "2"])
def test_a_random_schedule_on_a_small_cluster_plans_only_faults_that_can_act(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: str) -> None:
    """Seeds drew majorities rings and bridges on one or two brokers, fetch faults with one
    replica, reassignments on one broker: planned, run, and nothing cut, dropped or moved."""
    code, lines = floodmark(capsys, "run", "--cluster", "sim", "--seed", "3", *LIGHT, "--nodes", nodes,
                            "--replication-factor", nodes, "--min-insync-replicas", "1",
                            "--nemesis", "partition,admin,message", "--time-limit", "40",
                            "--store", str(tmp_path / "store"))
    assert code == 0, lines
    run = (tmp_path / "store" / "latest").resolve()
    done = executed(run).values()
    assert len(done) >= 3
    for e in done:  # each cut someone off, moved replicas, or aimed at messages this cluster sends
        assert e["error"] is None and "skipped" not in e["start_result"], e
        if e["kind"] == "partition":
            assert e["start_result"]["links_down"] > 0, e
        if e["shape"].startswith("reassign"):
            assert e["start_result"]["moves"] != e["start_result"]["from"], e
        if e["kind"] == "message":
            assert e["start_result"]["message"] not in ("ReplicaFetchRequest", "ReplicaFetchResponse",
                                                        "OffsetForLeaderEpochResponse", "IsrChangeRequest",
                                                        "BrokerHeartbeatRequest")[:5 if nodes == "1" else 0], e


def executed(run: Path) -> dict[int, dict[str, Any]]:
    return {e["number"]: e for e in json.loads((run / "schedule.json").read_text())["executed"]}


@pytest.fixture(scope="module")
def hand_written_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of faults listed out of order, overlapping (of one kind too), of no duration and
    lasting past the time limit, from a schedule that states no time limit, for 2 s."""
    folder = tmp_path_factory.mktemp("hand-written")
    path = folder / "schedule.json"
    path.write_text(json.dumps({"faults": [
        fault(0, "partition", "isolate-one", start=0.7, duration=0.3),
        fault(1, "partition", "halves", start=0.5, duration=0.5),
        fault(2, "kill", "leader", start=0.5, duration=0),
        fault(3, "pause", "random-short", start=0.9, duration=5),
    ]}))
    assert main(["run", "--cluster", "sim", "--seed", "3", *LIGHT, "--nemesis", "partition,kill,pause",
                 "--schedule", str(path), "--time-limit", "2", "--store", str(folder / "store")]) == 0
    return (folder / "store" / "latest").resolve()


def test_a_hand_written_schedule_runs_as_written(hand_written_run: Path) -> None:
    done = executed(hand_written_run)
    assert sorted(done) == [0, 1, 2, 3] and all(e["error"] is None for e in done.values())
    assert [e["number"] for e in sorted(done.values(), key=lambda e: (e["started_at"], e["number"]))] == [1, 2, 0, 3]
    # Lasting past the time limit: ended by heal-all, which its record says (it said nothing).
    assert done[3]["stopped_at"] > 2.0 and done[3]["stop_result"]["resumed"]["node"] == "n1"
    assert {key: done[3]["stop_result"][key] for key in ("ended_by", "planned_end")} == {"ended_by": "heal-all",
                                                                                      "planned_end": 5.9}


def test_the_run_s_schedule_json_records_the_test_s_time_limit(hand_written_run: Path) -> None:
    """A schedule stating no time limit recorded its last fault's end (5.9 s here, and 1 s
    without the pause): replayed with run --schedule, another test than the 2 s one that ran."""
    recorded = json.loads((hand_written_run / "schedule.json").read_text())
    assert recorded["time_limit"] == 2.0 and recorded["seed"] == 3


def test_the_run_s_schedule_json_counts_times_from_the_workload_s_start(hand_written_run: Path) -> None:
    """As a fault's planned start counts them: they counted from the history's start, the
    cluster's set-up included (seconds of it on real clusters)."""
    done = executed(hand_written_run)
    for number, planned in ((0, 0.7), (1, 0.5), (2, 0.5), (3, 0.9)):
        assert done[number]["started_at"] == pytest.approx(planned, abs=1e-6), done[number]
    assert done[2]["stopped_at"] == pytest.approx(0.5, abs=1e-6)  # no duration: stopped as it started
    assert done[1]["stopped_at"] == pytest.approx(1.0, abs=1e-6)


def test_faults_the_fault_phase_ended_before_are_recorded_as_never_started(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The driver applies one fault at a time: partitions added while the controller is cut
    off take seconds to be led, so the kill due meanwhile was still waiting when the fault
    phase ended. It never ran, and nothing said so: schedule.json held no account of it and
    the fault coverage beside the verdict did not name the kind."""
    path = tmp_path / "schedule.json"
    path.write_text(schedule_text(
        fault(0, "partition", "isolate-controller", start=0.5, duration=2.0),
        fault(1, "admin", "add-partitions", start=1.0, duration=0.5),
        fault(2, "kill", "leader", start=2.0, duration=0.5)))
    code, lines = run_schedule(capsys, path, tmp_path / "store", "--nemesis", "partition,admin,kill")
    assert code in (0, 2), lines
    assert any(line.startswith("floodmark: faults that took effect:") and "kill 0/1" in line for line in lines), lines
    run = (tmp_path / "store" / "latest").resolve()
    never = executed(run)[2]
    assert never["started_at"] is None and never["error"].startswith("not started: the fault phase ended at ")
    assert "(planned at 2 s)" in never["error"]
    kill = [op for op in read_history(run / "history.jsonl") if op.f == "start-kill"]
    assert [op.type for op in kill] == ["invoke", "fail"] and kill[1].error == never["error"]


def test_a_crash_skipped_for_a_broker_already_down_does_not_restart_it_early(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A power fault on the leader a kill had down was skipped, and its stop restarted the
    broker at 1.5 s: the kill, written to last until 4 s, lasted 1 s, and its account and
    the fault coverage said it took effect as written."""
    path = tmp_path / "schedule.json"
    path.write_text(schedule_text(fault(0, "kill", "leader", start=0.5, duration=3.5),
                                  fault(1, "power", "leader", start=1.0, duration=0.5), time_limit=5))
    code, lines = run_schedule(capsys, path, tmp_path / "store", "--nemesis", "kill,power")
    assert code == 0, lines
    done = executed((tmp_path / "store" / "latest").resolve())
    assert done[1]["start_result"]["skipped"] == f"{done[0]['start_result']['node']} is not running"
    assert done[1]["stop_result"] == {"skipped": f"nothing to heal: its start was skipped "
                                                 f"({done[1]['start_result']['skipped']})"}
    assert list(done[0]["stop_result"]["restarted"]) == [done[0]["start_result"]["node"]]  # at 4 s, by the kill


def test_a_directory_replaced_twice_stays_replaced_until_the_fault_that_replaced_it_heals(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The second replace-with-file of one log directory failed with a FileExistsError
    (recorded as a start that may have applied part-way), and its heal then brought back the
    directory the first one had taken, a second before that fault's end."""
    path = tmp_path / "schedule.json"
    path.write_text(schedule_text(fault(0, "disk", "replace-with-file", start=0.5, duration=2.0),
                                  fault(1, "disk", "replace-with-file", start=1.0, duration=0.5), time_limit=4))
    code, lines = run_schedule(capsys, path, tmp_path / "store", "--nemesis", "disk")
    assert code == 0 and not any("FileExistsError" in line for line in lines), lines
    done = executed((tmp_path / "store" / "latest").resolve())
    directory, node = done[0]["start_result"]["directory"], done[0]["start_result"]["node"]
    assert done[1]["error"] is None and done[1]["start_result"]["skipped"] == (
        f"{directory} of {node} is replaced by a file already")
    assert done[1]["stop_result"]["skipped"].startswith("nothing to heal")
    assert done[0]["stop_result"]["usable"] is True and done[0]["stopped_at"] == pytest.approx(2.5, abs=0.1)


# ---------------------------------------------------------------------------- damaged run directories

@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated run of a kill and a partition: what the damage below starts from."""
    folder = tmp_path_factory.mktemp("recorded")
    path = folder / "schedule.json"
    path.write_text(schedule_text(fault(0, "kill", "leader", start=0.5, duration=0.5),
                                  fault(1, "partition", "isolate-leader", start=1.2, duration=0.8)))
    assert main(["run", "--cluster", "sim", "--seed", "9", *LIGHT, "--nemesis", "kill,partition",
                 "--schedule", str(path), "--store", str(folder / "store")]) == 0
    return (folder / "store" / "latest").resolve()


def damaged(recorded_run: Path, tmp_path: Path, damage: Callable[[Path], object], digest: bool = True) -> Path:
    run = tmp_path / "store" / "t" / recorded_run.name
    shutil.copytree(recorded_run, run)
    damage(run)
    if not digest:
        (run / "digest.json").unlink()
    return run


def edit_lines(path: Path, change: Callable[[list[str]], list[str]]) -> None:
    path.write_text("".join(change(path.read_text().splitlines(keepends=True))))


def cut_mid_line(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-20])


def edit_json(path: Path, change: Callable[[dict[str, Any]], object]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


HISTORY_DAMAGE: dict[str, Callable[[Path], object]] = {
    "a history line removed": lambda run: edit_lines(run / "history.jsonl", lambda ls: ls[:40] + ls[41:]),
    "a history line twice": lambda run: edit_lines(run / "history.jsonl", lambda ls: ls[:41] + ls[40:]),
    "two history lines swapped": lambda run: edit_lines(run / "history.jsonl",
                                                       lambda ls: [*ls[:40], ls[41], ls[40], *ls[42:]]),
    "the history cut mid-line": lambda run: cut_mid_line(run / "history.jsonl"),
    "the history's drain removed": lambda run: edit_lines(run / "history.jsonl", lambda ls: ls[:-1]),
    "an event file removed": lambda run: (run / "events" / "n2.jsonl").unlink(),
    "an event file emptied": lambda run: (run / "events" / "n2.jsonl").write_text(""),
    "an event file cut mid-line": lambda run: cut_mid_line(run / "events" / "n2.jsonl"),
    "an event line removed": lambda run: edit_lines(run / "events" / "n2.jsonl", lambda ls: ls[:30] + ls[31:]),
    # The checkers judge by test.yaml: acks=1 would forgive every lost acknowledged write.
    "test.yaml's acks edited": lambda run: (run / "test.yaml").write_text(
        (run / "test.yaml").read_text().replace("acks: all", "acks: 1")),
}


@pytest.mark.parametrize("damage", list(HISTORY_DAMAGE))
def test_check_refuses_files_its_digest_does_not_record(recorded_run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str], damage: str) -> None:
    run = damaged(recorded_run, tmp_path, HISTORY_DAMAGE[damage])
    code, lines = floodmark(capsys, "check", str(run))
    assert code == 254 and len(lines) == 1, lines
    assert "differs from what digest.json recorded at the end of the run" in lines[0]


# Without a digest the files are judged as they are: never valid on what could not be read.
UNREADABLE = ["the history cut mid-line", "the history's drain removed", "an event file removed",
              "an event file emptied", "an event line removed"]


@pytest.mark.parametrize("damage", UNREADABLE)
def test_check_without_a_digest_holds_what_it_could_not_read_unknown(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str) -> None:
    run = damaged(recorded_run, tmp_path, HISTORY_DAMAGE[damage], digest=False)
    code, lines = floodmark(capsys, "check", str(run), stdout=True)
    assert code == 2 and any(line.startswith("overall: UNKNOWN") for line in lines), lines
    assert json.loads((run / "results.json").read_text())["valid"] == "unknown"


@pytest.mark.parametrize("damage", ["a history line removed", "two history lines swapped"])
def test_check_without_a_digest_refuses_a_history_out_of_sequence(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str) -> None:
    run = damaged(recorded_run, tmp_path, HISTORY_DAMAGE[damage], digest=False)
    code, lines = floodmark(capsys, "check", str(run))
    assert code == 254 and len(lines) == 1 and "history.jsonl:41: index" in lines[0], lines


@pytest.mark.parametrize(("damage", "said"), [
    (lambda run: edit_json(run / "results.json", lambda d: d.update(valid=False)), "inconsistent"),
    (lambda run: edit_json(run / "results.json", lambda d: d["checkers"]["durability"].update(valid=False)),
     "inconsistent"),
    (lambda run: (run / "results.json").write_text("[1,"), "not a results file"),
    (lambda run: edit_json(run / "results.json", lambda d: d["judged_files"].update({"history.jsonl": "0" * 64})),
     "its verdict is not of the files shown"),
], ids=["verdict flipped", "a checker flipped", "not JSON", "judged other files"])
def test_report_of_tampered_results_shows_the_run_unchecked(recorded_run: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str],
                                                            damage: Callable[[Path], object], said: str) -> None:
    run = damaged(recorded_run, tmp_path, damage)
    code, lines = floodmark(capsys, "report", str(run))
    assert code == 254 and any(said in line and "the run is shown unchecked" in line for line in lines), lines
    assert "<title>not checked" in (run / "report.html").read_text()


def drop_yaml_key(run: Path, key: str) -> None:
    edit_lines(run / "test.yaml", lambda ls: [line for line in ls if not line.startswith(f"{key}:")])


@pytest.mark.parametrize(("damage", "said"), [
    (lambda run: edit_json(run / "schedule.json", lambda d: d.update(seed=12)),
     "schedule.json: seed 12 differs from test.yaml's seed 9"),
    (lambda run: edit_json(run / "schedule.json", lambda d: d.update(time_limit="3")),
     "schedule.json: time_limit must be a number of seconds"),
    (lambda run: edit_json(run / "schedule.json", lambda d: d["faults"][0].update(kind="meteor")),
     "schedule.json: fault 0 (meteor:leader): unknown fault kind"),
    (lambda run: (run / "schedule.json").write_text(""), "schedule.json: not a schedule: not valid JSON"),
    (lambda run: drop_yaml_key(run, "seed"), "test.yaml: no seed recorded; cannot reproduce"),
    (lambda run: drop_yaml_key(run, "nodes"), "test.yaml: nodes: not stated"),
    (lambda run: edit_lines(run / "test.yaml", lambda ls: [*ls, "nodes2: 3\n"]), "test.yaml: nodes2: unknown key"),
    (lambda run: (run / "digest.json").write_text("{"), "digest.json: not a digest"),
    # (a setting the check does not need deleted or edited: the replay ran the default, or
    # the new value, and was said to differ by nondeterminism, exiting with another test's verdict)
    (lambda run: drop_yaml_key(run, "variant"), "test.yaml: differs from what digest.json recorded"),
    (lambda run: edit_lines(run / "test.yaml", lambda ls: [line.replace("rate: 50.0", "rate: 51.0") for line in ls]),
     "test.yaml: differs from what digest.json recorded"),
], ids=["seed changed", "time limit as text", "unknown kind", "schedule emptied", "no seed", "no nodes",
        "unknown key", "digest not JSON", "no variant", "rate edited"])
def test_repro_refuses_a_run_directory_it_cannot_replay_in_one_line(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        damage: Callable[[Path], object], said: str) -> None:
    run = damaged(recorded_run, tmp_path, damage)
    code, lines = floodmark(capsys, "repro", str(run))
    assert code == 254 and len(lines) == 1 and said in lines[0], lines
    assert run_dirs(tmp_path / "store") == [run]


def test_repro_says_a_replay_of_an_edited_schedule_differs(recorded_run: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    run = damaged(recorded_run, tmp_path, lambda run: edit_json(run / "schedule.json", lambda d: d["faults"].pop()))
    code, lines = floodmark(capsys, "repro", str(run))
    assert code == 0, lines
    assert any(f"replay DIFFERS from {run}: " in line and "history.jsonl" in line for line in lines), lines


def test_repro_of_an_intact_run_is_identical(recorded_run: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = damaged(recorded_run, tmp_path, lambda run: None)
    code, lines = floodmark(capsys, "repro", str(run))
    assert code == 0 and any(line.startswith(f"floodmark: replay identical to {run}") for line in lines), lines


def test_faults_not_yet_due_when_the_phase_is_cut_short_are_not_recorded(tmp_path: Path) -> None:
    """An interrupt ends the phase before later faults were due: they were never promised,
    and the history records nothing after the interrupt for them."""
    import asyncio

    from fault_driver_fixtures import kill_driver

    from floodmark.harness.schedule import Fault, Schedule

    driver, recorder, log = kill_driver(tmp_path, Schedule(
        (Fault(0, "kill", "leader", 0.0, 0.01, 1), Fault(1, "kill", "leader", 30.0, 1.0, 2)), 60.0))

    async def cut_short() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, stop.set)
        await driver.run(recorder.seconds(), stop)

    asyncio.run(cut_short())
    recorder.close()
    log.flush()
    assert sorted(executed(tmp_path)) == [0]
    assert [op.f for op in read_history(tmp_path / "history.jsonl")] == ["start-kill"] * 2 + ["stop-kill"] * 2
