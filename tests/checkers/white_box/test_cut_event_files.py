"""Node event files cut short: what a node's story lacks proves nothing once it is cut.

A broker killed while writing its last event leaves a line cut short at the end of its file;
so does a file cut anywhere by a copy that stopped or a disk that filled. Without a
``digest.json`` to show the files are those the run wrote, the two look alike, and the
second loses every event after the cut. The invariants checker found ``isr-member-lacks-
committed`` by what a member's events lack, so a cut file made a valid run INVALID (seed 3,
``n2.jsonl`` cut halfway: 359 findings). A finding about a member whose file is cut short is
now no proof: unknown, saying why; findings about whole files stand. A file cut exactly
before a line's newline ends in a whole line with none after it: every event is written with
its newline, so that is a cut too (Hypothesis found it: ``n1.jsonl`` cut after its second
line, its newline gone, gave INVALID with 1,396 findings).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runner_fixtures import valid_sim_run

from floodmark.checkers.registry import check_run


def _valid_run() -> Path:
    return valid_sim_run(seed=3, time_limit=20)


def _cut_copy(into: Path, node_file: str, at: int) -> Path:
    """A copy of the run without its digest and verdict, ``node_file`` cut after ``at`` bytes."""
    copy = into / "run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(_valid_run(), copy)
    (copy / "digest.json").unlink()
    (copy / "results.json").unlink()
    events = copy / "events" / node_file
    events.write_bytes(events.read_bytes()[:at])
    return copy


def test_a_member_file_cut_halfway_is_unknown_not_invalid(tmp_path: Path) -> None:
    """The input that was judged INVALID, kept as a regression case."""
    whole = (_valid_run() / "events" / "n2.jsonl").read_bytes()
    half = len(whole) // 2
    assert whole[half - 1:half] != b"\n"  # mid-line: the file ends in a line cut short
    results = check_run(_cut_copy(tmp_path, "n2.jsonl", half))
    invariants = results["checkers"]["invariants"]
    assert invariants["valid"] == "unknown", invariants
    assert invariants["anomalies"] == []
    assert invariants["stats"]["unproven"] == {"n2": invariants["stats"]["unproven"]["n2"]}
    assert invariants["stats"]["unproven"]["n2"] > 0
    assert "n2" in invariants["stats"]["unjudged_because"] and "cut short" in invariants["stats"]["unjudged_because"]
    assert results["valid"] == "unknown"
    assert any("n2.jsonl" in note and "cut short" in note for note in results["notes"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_event_file_cut_mid_line_never_makes_a_valid_run_invalid(tmp_path: Path, data: st.DataObject) -> None:
    run = _valid_run()
    node_file = data.draw(st.sampled_from(sorted(p.name for p in (run / "events").glob("*.jsonl"))))
    whole = (run / "events" / node_file).read_bytes()
    ends = {i + 1 for i, byte in enumerate(whole) if byte == ord("\n")}
    at = data.draw(st.integers(1, len(whole) - 1).filter(lambda n: n not in ends))
    results = check_run(_cut_copy(tmp_path, node_file, at))
    assert results["valid"] is not False, {name: c["stats"].get("anomalies") for name, c in results["checkers"].items()}


def test_a_file_cut_just_before_a_newline_is_unknown_not_invalid(tmp_path: Path) -> None:
    """The last line is whole and read, but nothing after it is: the member's story is cut."""
    whole = (_valid_run() / "events" / "n1.jsonl").read_bytes()
    second_newline = whole.index(b"\n", whole.index(b"\n") + 1)
    results = check_run(_cut_copy(tmp_path, "n1.jsonl", second_newline))
    invariants = results["checkers"]["invariants"]
    assert invariants["valid"] == "unknown" and invariants["anomalies"] == [], invariants["stats"]
    assert invariants["stats"]["unproven"]["n1"] > 0
    assert results["valid"] == "unknown"
    assert any("n1.jsonl:2" in note and "no newline" in note for note in results["notes"]), results["notes"]


def test_a_whole_file_is_not_cut(tmp_path: Path) -> None:
    """The same run, its files whole but without the digest: judged valid, with no note of a cut."""
    results = check_run(_cut_copy(tmp_path, "n1.jsonl", len((_valid_run() / "events" / "n1.jsonl").read_bytes())))
    assert results["valid"] is True, results["checkers"]["invariants"]["stats"]
    assert not any("cut short" in note for note in results.get("notes", []))


@pytest.mark.parametrize("member_cut", [True, False])
def test_only_findings_about_a_cut_member_are_set_aside(member_cut: bool) -> None:
    """Findings about members whose files are whole still make the run invalid."""
    from floodmark.checkers.white_box.invariants import set_aside_unproven
    from floodmark.contracts.results import Anomaly

    lacks = [Anomaly("isr-member-lacks-committed", "n1 moved its HW ...", "t0", 0, (5,), details={"member": "n2"}),
             Anomaly("isr-member-lacks-committed", "n1 moved its HW ...", "t0", 0, (6,), details={"member": "n3"}),
             Anomaly("acked-below-min-isr", "n1 acknowledged ...", "t0", 0, (7,), details={"member": "n2"})]
    proven, unproven = set_aside_unproven(lacks, frozenset({"n2"} if member_cut else set()))
    if member_cut:
        assert [a.offsets for a in proven] == [(6,), (7,)] and unproven == {"n2": 1}
    else:
        assert proven == lacks and unproven == {}


def _without_last_lines(into: Path, node_file: str, lines: int) -> Path:
    whole = (_valid_run() / "events" / node_file).read_bytes()
    at = len(whole)
    for _ in range(lines):
        at = whole.rindex(b"\n", 0, at - 1) + 1
    return _cut_copy(into, node_file, at)


@pytest.mark.parametrize("node_file", ["n1.jsonl", "n2.jsonl", "n3.jsonl"])
@pytest.mark.parametrize("lines", [20, 200])
def test_a_file_cut_at_a_line_s_end_without_a_digest_is_never_invalid(tmp_path: Path, node_file: str,
                                                                        lines: int) -> None:
    """Whole lines removed at the end leave no cut line and no gap: a member's story then ends
    before the appends its leaders counted, which proves nothing (was INVALID: 4 to 100
    isr-member-lacks-committed findings on such copies of valid runs)."""
    results = check_run(_without_last_lines(tmp_path, node_file, lines))
    invariants = results["checkers"]["invariants"]
    assert invariants["valid"] != False and invariants["anomalies"] == [], invariants["stats"]  # noqa: E712
    assert results["valid"] == "unknown" or results["valid"] is True


def test_a_member_whose_story_ends_before_the_commit_is_no_proof_without_a_digest() -> None:
    """The finding stands when the files are the run's own, or when the member's own HW went
    past what it is said to lack (it contradicts itself however its file ends)."""
    from floodmark.checkers.white_box.invariants import set_aside_unproven
    from floodmark.contracts.node_events import HwChanged, NodeEvent
    from floodmark.contracts.results import Anomaly

    def hw(high: int) -> list[NodeEvent]:
        return [NodeEvent("n2", 0, 0.0, HwChanged(topic="t0", partition=0, leader_epoch=1, role="follower",
                                                  previous=0, high_watermark=high, log_end=high))]

    lacks = [Anomaly("isr-member-lacks-committed", "n1 moved its HW ...", "t0", 0, (5, 6), details={"member": "n2"})]
    assert set_aside_unproven(lacks, frozenset()) == (lacks, {})  # the digest says the files are whole
    assert set_aside_unproven(lacks, frozenset(), {"n2": hw(5)}) == ([], {"n2": 1})  # its story ends at HW 5
    assert set_aside_unproven(lacks, frozenset(), {"n2": hw(6)}) == (lacks, {})  # it knew 5 was committed


def _without_line(into: Path, node_file: str, kind: bytes, role: bytes, nth: int) -> Path:
    """A copy of the run without its digest and verdict, ``node_file`` without its ``nth``
    event of ``kind`` and ``role`` (counted from the middle of the file), not renumbered."""
    copy = _cut_copy(into, node_file, len((_valid_run() / "events" / node_file).read_bytes()))
    events = copy / "events" / node_file
    lines = events.read_bytes().split(b"\n")
    matching = [i for i, line in enumerate(lines) if i > len(lines) // 2
                and b'"kind":"' + kind + b'"' in line and b'"role":"' + role + b'"' in line]
    del lines[matching[nth]]
    events.write_bytes(b"\n".join(lines))
    return copy


@pytest.mark.parametrize(("node_file", "role"), [("n1.jsonl", b"follower"), ("n2.jsonl", b"follower"),
                                                 ("n3.jsonl", b"follower"), ("n1.jsonl", b"leader"),
                                                 ("n2.jsonl", b"leader"), ("n3.jsonl", b"leader")])
def test_an_append_missing_from_the_middle_of_a_file_is_never_invalid(tmp_path: Path, node_file: str,
                                                                     role: bytes) -> None:
    """A line missing from the middle (a gap in the numbering) took the append the findings
    say the node lacks: a valid run so damaged read INVALID (isr-member-lacks-committed for a
    follower's append, leader-lacks-committed for a leader's); its findings are no proof."""
    results = check_run(_without_line(tmp_path, node_file, b"appended", role, 3))
    invariants = results["checkers"]["invariants"]
    assert invariants["valid"] == "unknown" and invariants["anomalies"] == [], invariants["stats"]
    assert "missing from its file" in invariants["stats"]["unjudged_because"]
    assert results["valid"] == "unknown"


def test_parts_of_files_that_miss_lines_leave_the_findings_unproven(tmp_path: Path) -> None:
    """Spark's by-partition groups hold a part of each file, so the gap is told apart
    (``whole_file_gap``): every node's story is then no proof by what it lacks, and the
    findings that a line missing from the middle of a file made stay unknown there too."""
    from floodmark.checkers.event_coverage import first_gap
    from floodmark.checkers.registry import check_history
    from floodmark.contracts.history import read_history
    from floodmark.contracts.node_events import read_events_dir
    from floodmark.contracts.run_config import read_test_config

    damaged = _without_line(tmp_path, "n2.jsonl", b"appended", b"follower", 3)
    events = read_events_dir(damaged / "events")
    gap = first_gap(events)
    assert gap is not None and "n2" in gap
    args = (read_history(damaged / "history.jsonl"), events, read_test_config(damaged / "test.yaml"))
    whole = check_history(*args, checkers=["invariants"])["checkers"]["invariants"]
    assert whole["valid"] == "unknown" and whole["stats"]["unproven_missing_lines"], whole["stats"]
    grouped = check_history(*args, checkers=["invariants"], whole_file_gap=gap)["checkers"]["invariants"]
    assert grouped["valid"] == "unknown" and grouped["anomalies"] == [], grouped["stats"]
    assert grouped["stats"]["unproven_missing_lines"] == whole["stats"]["unproven_missing_lines"]
