"""``check --checker NAME RUN`` keeps the other checkers' verdicts only while they are of
this run's files (audit F13).

A run directory whose files changed since its digest.json was saved is refused (audit F09);
with the digest removed, on purpose, the files are checked as they are. The verdicts
already in results.json are kept only when the history and node events are
still, byte for byte, those they judged: the digests each check records beside them
(``judged_files``), or for a results file written before those were, the run's digest.json.
Otherwise (a file changed, nothing readable says what was judged) those checkers are
unknown, each saying so, and one warning line names results.json and why.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from checkers_fixtures import make_run_dir

from floodmark.checkers.registry import check_run
from floodmark.cli import main
from floodmark.errors import UsageError
from floodmark.rundir import RunDir, compute_digest

OTHERS = ["durability", "queue", "hw", "leader", "invariants"]  # a queue run's checkers but stats
DROPPED = "not checked again, and its old verdict is not kept (the notes say why)"


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("kept") / "store"
    assert main(["run", "--cluster", "sim", "--time-limit", "5", "--seed", "3", "--store", str(store)]) == 0
    return (store / "latest").resolve()


@pytest.fixture
def run(sim_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(sim_run, copy)
    return copy


def _results(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((path / "results.json").read_text())
    return loaded


def _check_stats(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["check", "--checker", "stats", str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_verdicts_of_the_very_files_digested_are_kept_without_a_word(run: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    before = _results(run)["checkers"]
    code, out, err = _check_stats(run, capsys)
    assert (code, err) == (0, "") and out.startswith(f"VALID    {run}  ")
    after = _results(run)
    assert after["valid"] is True and "notes" not in after
    assert {name: after["checkers"][name] for name in OTHERS} == {name: before[name] for name in OTHERS}


def test_the_audit_case_an_emptied_history_drops_the_old_verdicts(run: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # audit F13: history.jsonl emptied after the run; results.json is the original's (valid)
    (run / "history.jsonl").write_text("")
    _refused_until_the_digest_is_removed(run, "history.jsonl differs", capsys)
    code, out, err = _check_stats(run, capsys)
    warning = (f"{run / 'results.json'}: the verdicts of {', '.join(OTHERS)} are not kept (history.jsonl "
               f"changed since {run / 'results.json'} judged it): they are unknown until checked again")
    assert code == 2 and err == f"floodmark check: warning: {warning}\n"
    assert out.startswith(f"UNKNOWN  {run}  durability unknown [error: {DROPPED}]")
    assert out.rstrip().endswith("overall: UNKNOWN (1 path)")
    results = _results(run)
    assert results["valid"] == "unknown" and results["notes"] == [warning]
    assert results["checkers"]["stats"]["valid"] is True
    for name in OTHERS:
        assert results["checkers"][name] == {"valid": "unknown", "anomalies": [], "anomaly_counts": {},
                                             "stats": {"error": DROPPED}}
    # and so on the next partial check too: nothing makes the dropped verdicts come back
    assert _check_stats(run, capsys)[0] == 2


def test_a_torn_last_line_drops_the_old_verdicts_and_says_both(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = run / "history.jsonl"
    history.write_bytes(history.read_bytes()[:-10])
    _refused_until_the_digest_is_removed(run, "history.jsonl differs", capsys)
    code, out, err = _check_stats(run, capsys)
    lines = err.splitlines()
    assert code == 2 and out.startswith("UNKNOWN  ") and len(lines) == 2
    assert "not read: the last line is cut short" in lines[0]
    assert lines[1].endswith(f"(history.jsonl changed since {run / 'results.json'} judged it): they are "
                             "unknown until checked again")


def test_changed_node_events_drop_the_old_verdicts(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = sorted((run / "events").glob("*.jsonl"))[0]
    events.write_bytes(b"")
    _refused_until_the_digest_is_removed(run, f"events/{events.name} differs", capsys)
    code, _, err = _check_stats(run, capsys)
    assert code == 2 and f"(events/{events.name} changed since {run / 'results.json'} judged it)" in err


def test_a_run_without_a_digest_keeps_what_its_results_say_they_judged(run: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # A real cluster's run has no digest.json: its results.json records what it judged.
    (run / "digest.json").unlink()
    code, _, err = _check_stats(run, capsys)
    assert (code, err) == (0, "") and _results(run)["valid"] is True and "notes" not in _results(run)
    (run / "history.jsonl").write_text("")
    code, _, err = _check_stats(run, capsys)
    assert code == 2 and "(history.jsonl changed since" in err


def _as_written_before_judged_files(path: Path) -> None:
    """results.json as a check wrote it before it recorded what it judged."""
    results = _results(path)
    del results["judged_files"]
    (path / "results.json").write_text(json.dumps(results))


def _refused_until_the_digest_is_removed(run: Path, differs: str, capsys: pytest.CaptureFixture[str]) -> None:
    """check refuses a run directory changed since its digest was saved (audit F09: node events
    cut at a line's end were judged as a run with made-up violations), in one line saying how
    to check the files as they are; then takes that advice."""
    code, out, err = _check_stats(run, capsys)
    assert code == 254 and err.count("\n") == 1
    assert err == (f"floodmark check: error: {run}: {differs} from what digest.json recorded at the end of the "
                   "run, so this is not the run that was recorded; remove digest.json to check the files as they "
                   "are now\n")
    (run / "digest.json").unlink()


def _digest(path: Path) -> None:
    (path / "digest.json").write_text(json.dumps(compute_digest(RunDir(path))))


def test_without_a_digest_or_a_record_of_what_was_judged_the_old_verdicts_are_not_kept(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path, "hw-decrease")
    assert check_run(path)["valid"] is False
    _as_written_before_judged_files(path)
    why = "digest.json: no such file, so nothing records which history and node events were judged"
    notes: list[str] = []
    results = check_run(path, checkers=["queue"], note=notes.append)
    assert results["checkers"]["hw"]["valid"] == "unknown" and results["valid"] == "unknown"
    assert len(notes) == 1 and notes[0].startswith(f"{path / 'results.json'}: the verdicts of durability, hw, ")
    assert f"({path / why}" in notes[0] and "\n" not in notes[0]


@pytest.mark.parametrize(("digest", "why"), [
    ("{bad", "digest.json: not a digest: not valid JSON"),
    ("[]", "digest.json: not a digest (expected an object of file digests)"),
    ('{"run": "x", "history.jsonl": "y"}', "digest.json: not a digest ('run' is not a SHA-256 in hex)"),
    ("directory", "digest.json: is a directory"),
])
def test_a_digest_that_cannot_be_read_is_refused_in_one_line(tmp_path: Path, digest: str, why: str) -> None:
    path = make_run_dir(tmp_path)
    if digest == "directory":
        (path / "digest.json").mkdir()
    else:
        (path / "digest.json").write_text(digest)
    with pytest.raises(UsageError) as refused:
        check_run(path)
    assert str(refused.value).startswith(f"{path / why}") and "\n" not in str(refused.value)
    assert str(refused.value).endswith("remove digest.json to check the files as they are now")
    assert not (path / "results.json").exists()


def test_with_the_files_digested_the_old_verdicts_are_kept(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path, "hw-decrease")
    _digest(path)
    assert check_run(path)["valid"] is False
    _as_written_before_judged_files(path)
    notes: list[str] = []
    results = check_run(path, checkers=["queue"], note=notes.append)
    assert notes == [] and results["valid"] is False and results["checkers"]["hw"]["valid"] is False


def test_checking_every_checker_again_needs_no_digest(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path)
    check_run(path)
    notes: list[str] = []
    names = ["durability", "queue", "hw", "leader", "invariants", "stats"]
    results = check_run(path, checkers=names, note=notes.append)
    assert notes == [] and results["valid"] is True and list(results["checkers"]) == names
