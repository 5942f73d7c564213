"""The registry: default checkers per workload, check_history and check_run.

``check --checker NAME RUN`` keeps the other checkers' verdicts only while they are of
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
import yaml
from checkers_fixtures import History, make_run_dir

from floodmark.checkers.api import CheckInput
from floodmark.checkers.linearizability.checker import ModelMismatch
from floodmark.checkers.permitted import NO_CONFIGURATION
from floodmark.checkers.registry import (
    CHECKER_NAMES,
    check_history,
    check_run,
    default_checkers,
    judge_history,
)
from floodmark.cli import main
from floodmark.contracts.history import read_history
from floodmark.contracts.results import CheckerResult
from floodmark.contracts.run_config import ConfigError, TestConfig
from floodmark.errors import UsageError
from floodmark.run_dirs.run_digests import compute_digest
from floodmark.run_dirs.rundir import RunDir
from floodmark.run_dirs.unfinished_runs import Interruption, unfinished_reason, write_interruption


def test_names_and_defaults() -> None:
    assert set(CHECKER_NAMES) == {"durability", "hw", "leader", "invariants", "queue", "linearizable", "convergence",
                                  "stats"}
    assert [c.name for c in default_checkers("queue")] == ["durability", "queue", "hw", "leader", "invariants", "stats"]
    assert [c.name for c in default_checkers("log-lin")] == ["linearizable", "hw", "leader", "invariants", "stats"]


def test_check_run_writes_results(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path)
    results = check_run(path)
    assert results["valid"] is True
    assert results["seed"] == 11 and results["config"]["workload"] == "queue"
    written = json.loads((path / "results.json").read_text())
    assert written["valid"] is True
    assert set(written["checkers"]) == {"durability", "queue", "hw", "leader", "invariants", "stats"}


def test_an_event_cut_short_by_a_kill_is_forgiven_and_said(tmp_path: Path) -> None:
    """As a torn last line of the history: the verdict stands on the rest, and a note (on
    stderr for floodmark check, and in results.json) names the line left unread."""
    path = make_run_dir(tmp_path)
    events = path / "events" / "n1.jsonl"
    lines = len(events.read_bytes().splitlines())
    with open(events, "ab") as f:
        f.write(b'{"node":"n1","seq":' + str(lines).encode() + b',"wall":1.0,"kind":"became_le')
    told: list[str] = []
    results = check_run(path, note=told.append)
    said = (f"{events}:{lines + 1}: its last line was cut short (the node was killed while writing it) "
            "and is not read")
    assert results["valid"] is True and told == [said] and results["notes"] == [said]


def test_check_run_judges_the_ops_it_is_handed_as_the_history_it_would_read(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path, "hw-decrease")
    ops = read_history(path / "history.jsonl", check_pairs=True)
    assert check_run(path, ops=ops) == check_run(path)
    assert check_run(path, ops=ops)["valid"] is False
    # What it is handed is what it judges (the runner hands it the history it read).
    assert check_run(path, ops=[])["checkers"] != check_run(path)["checkers"]


def _digest(path: Path) -> None:
    """Write the run's digest.json, as the runner does for a simulated run before it checks it."""
    from floodmark.run_dirs.run_digests import compute_digest
    from floodmark.run_dirs.rundir import RunDir

    (path / "digest.json").write_text(json.dumps(compute_digest(RunDir(path))))


def test_check_run_on_a_broken_run_and_partial_update(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path, "hw-decrease")
    _digest(path)
    assert check_run(path)["valid"] is False
    updated = check_run(path, checkers=["queue"])  # the hw verdict already stored is kept
    assert set(updated["checkers"]) >= {"hw", "queue"}
    assert updated["valid"] is False
    assert json.loads((path / "results.json").read_text())["checkers"]["hw"]["valid"] is False


def test_a_crashing_checker_gives_unknown_not_a_crash() -> None:
    class Broken:
        name = "broken"

        def check(self, run: CheckInput) -> CheckerResult:
            raise RuntimeError("boom")

    results = check_history([], {}, None, checkers=[Broken(), "stats"])
    assert results["valid"] == "unknown"
    assert "boom" in results["checkers"]["broken"]["stats"]["error"]
    assert results["checkers"]["stats"]["valid"] is True
    judged = judge_history([], {}, None, checkers=[Broken()])
    assert isinstance(judged["broken"].cause, RuntimeError)  # the typed cause, for callers that act on it


def test_a_history_that_does_not_fit_the_model_carries_the_typed_cause() -> None:
    h = History()
    h.call(0, "acquire", None)  # a mutex op, judged as a register
    judged = judge_history(h.ops, checkers=["linearizable"], model="cas-register")
    assert judged["linearizable"].valid == "unknown"
    assert isinstance(judged["linearizable"].cause, ModelMismatch)
    # said as why it is unknown, not as a checker's crash (an error with a traceback)
    assert judged["linearizable"].stats == {"unjudged_because": "the history does not fit the checker's model: op 0 "
                                            "(acquire nil): the cas-register model has no operation "
                                            "'acquire'"}


def test_a_history_without_configuration_is_judged_without_one() -> None:
    # A foreign queue history states no acks: its lost write is reported, but not as a
    # violation of an acks=all promise nobody stated.
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.poll(1, 0, 0, [(0, "a")], f="drain")
    results = check_history(h.ops, {}, None, checkers=["durability", "queue"])
    assert results["valid"] is False and results["config"] == {} and results["seed"] is None
    durability = results["checkers"]["durability"]
    assert durability["stats"]["violations"] == 0 and durability["stats"]["permitted"] == 1
    assert durability["anomalies"][0]["permitted_by"] == NO_CONFIGURATION
    stated = check_history(h.ops, {}, TestConfig(), checkers=["durability"])["checkers"]["durability"]
    assert stated["stats"]["violations"] == 1 and "permitted_by" not in stated["anomalies"][0]


def test_an_old_test_yaml_without_the_recorded_settings_still_reads(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path, "lost-write")
    old = yaml.safe_load((path / "test.yaml").read_text())
    del old["unclean_leader_election"], old["producer_retries_without_idempotence"]
    old["variant"] = "unclean-election"  # the old file names the variant; nothing is inferred from it
    (path / "test.yaml").write_text(yaml.safe_dump(old))
    results = check_run(path, checkers=["durability"])
    durability = results["checkers"]["durability"]
    assert results["config"]["unclean_leader_election"] is False
    assert durability["valid"] is False and durability["stats"]["violations"] == 1


def test_a_malformed_test_yaml_is_an_error_naming_the_file_and_key(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path)
    (path / "test.yaml").write_text("workload: queue\nacks: sometimes\n")
    with pytest.raises(ConfigError) as raised:
        check_run(path)
    assert str(raised.value).startswith(f"{path / 'test.yaml'}: acks: must be one of all, 1, 0")
    assert not (path / "results.json").exists()


@pytest.mark.parametrize("previous", [
    '{"valid": true, "checkers": [1]}', '{"valid": true, "checkers": null}', '{"valid": true, "checkers": {"hw": 3}}',
    '{"valid": true, "checkers": {"hw": {"valid": false, "stats": []}}}',
    '{"valid": true, "checkers": {"hw": {"valid": false, "anomaly_counts": "lost-write"}}}',
    '{"valid": true, "checkers": {"hw": {"valid": "no"}}}', '{"valid": true, "checkers": {"hw": {"anomalies": [1]}}}',
    "", "{bad", '{"valid": NaN}', "[" * 100_000,
    # no verdict as the report reads it: a valid checker listing anomalies, a verdict its checkers do not give
    '{"valid": true, "checkers": {"hw": {"valid": true, "anomalies": [{"type": "hw-decrease"}]}}}',
    '{"valid": true, "checkers": {"hw": {"valid": true, "anomaly_counts": {"hw-decrease": 1}}}}',
    '{"valid": true, "checkers": {"hw": {"valid": false}}}', '{"valid": "maybe", "checkers": {}}',
])
def test_an_ill_shaped_old_results_file_is_replaced_and_said_to_be(tmp_path: Path, previous: str) -> None:
    path = make_run_dir(tmp_path)
    _digest(path)
    (path / "results.json").write_text(previous)
    notes: list[str] = []
    results = check_run(path, checkers=["stats"], note=notes.append)
    assert results["checkers"]["stats"]["valid"] is True
    assert len(notes) == 2 and notes[0].startswith(f"{path / 'results.json'}: ") and "replaced" in notes[0]
    assert "\n" not in notes[0] and json.loads((path / "results.json").read_text())["notes"] == notes
    # The run's other checkers did not judge it: unknown, never a VALID over stats alone.
    assert results["valid"] == "unknown" and notes[1].endswith("unknown until floodmark check runs them "
                                                               "(all of them, without --checker)")
    again = check_run(path, checkers=["hw"], note=notes.append)["checkers"]
    assert again["stats"]["valid"] is True and again["hw"]["valid"] is True
    assert len(notes) == 2  # the file it wrote is kept from then on, without a word


def test_a_results_file_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    from floodmark.errors import UsageError

    path = make_run_dir(tmp_path)
    (path / "results.json").mkdir()
    with pytest.raises(UsageError, match=f"^{path / 'results.json'}: is a directory, not a file"):
        check_run(path, checkers=["stats"])


def test_a_run_without_test_yaml_is_judged_by_what_its_ops_are_and_says_so(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path, "hw-decrease")
    (path / "test.yaml").unlink()
    notes: list[str] = []
    results = check_run(path, note=notes.append)
    assert set(results["checkers"]) == {"durability", "queue", "hw", "leader", "invariants", "stats"}
    assert results["valid"] is False and results["checkers"]["hw"]["valid"] is False
    assert notes == [f"{path / 'test.yaml'}: no such file: the run states no configuration; judged as a queue "
                     "history, as its ops suggest, with no settings assumed"]


@pytest.mark.parametrize("damage", ["dangling", "loop", "directory"])
def test_a_test_yaml_that_is_there_but_unreadable_is_refused_naming_it(tmp_path: Path, damage: str) -> None:
    path = make_run_dir(tmp_path)
    config = path / "test.yaml"
    config.unlink()
    if damage == "dangling":
        config.symlink_to("nowhere.yaml")
    elif damage == "loop":
        config.symlink_to("test.yaml")
    else:
        config.mkdir()
    problem = {"dangling": "cannot read: a symbolic link to nothing", "directory": "is a directory, not a file",
               "loop": "cannot read: too many levels of symbolic links"}[damage]
    with pytest.raises(ConfigError) as refused:
        check_run(path)
    assert str(refused.value) == f"{config}: {problem}"


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("variant", "bogus", "variant: unknown variant 'bogus'; choose one of: default, truncate-to-hw"),
    ("workload", "zzz", "workload: unknown workload 'zzz'; choose one of: queue, log-lin"),  # the audit's F11
    ("nemesis", ["kill", "bogus"], "nemesis: unknown fault kind 'bogus'; choose from partition, clock"),
])
def test_a_test_yaml_naming_what_no_test_may_is_refused_as_repro_refuses_it(tmp_path: Path, key: str, value: object,
                                                                            problem: str) -> None:
    path = make_run_dir(tmp_path)
    config = yaml.safe_load((path / "test.yaml").read_text())
    config[key] = value
    (path / "test.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as refused:
        check_run(path)
    assert str(refused.value).startswith(f"{path / 'test.yaml'}: {problem}")


def test_a_run_without_test_yaml_checked_by_named_checkers_says_so(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path)
    (path / "test.yaml").unlink()
    notes: list[str] = []
    results = check_run(path, checkers=["hw"], note=notes.append)
    assert results["checkers"]["hw"]["valid"] is True and results["valid"] == "unknown"
    # The others of the workload its ops suggest are named, unknown: they never read it.
    assert {name for name, c in results["checkers"].items() if c["valid"] == "unknown"} == {
        "durability", "queue", "leader", "invariants", "stats"}
    assert notes == [f"{path / 'test.yaml'}: no such file: the run states no configuration; judged by the checkers "
                     "asked for, with no settings assumed",
                     f"{path / 'results.json'}: durability, queue, leader, invariants, stats did not judge the run: "
                     "unknown until floodmark check runs them (all of them, without --checker)"]


# ------------------------------------------------ check --checker keeps verdicts only of the files they judged

# A simulated queue run's checkers but stats (it records the wait for whole ISRs: convergence).
OTHERS = ["durability", "queue", "hw", "leader", "invariants", "convergence"]
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


@pytest.mark.parametrize("run_id", ["0123456789abcdef", None])
def test_a_results_file_of_another_run_is_not_kept_on_the_digest_s_word(run: Path, run_id: str | None,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # digest.json vouches for the run's files, not for a results.json copied in beside them
    # from another run of the same test (one written before judged_files, or without them):
    # its "valid" was kept, and an invalid run was judged VALID, exit 0.
    _as_written_before_judged_files(run)
    assert _check_stats(run, capsys)[0] == 0  # this run's own: kept on the digest's word
    results = _results(run)
    stated = results["config"].pop("run_id")
    if run_id is not None:  # another run's; None: one from before run ids
        results["config"]["run_id"] = run_id
    results.pop("judged_files")
    (run / "results.json").write_text(json.dumps(results))
    code, out, err = _check_stats(run, capsys)
    said = "names no run id" if run_id is None else f"names run id {run_id!r}"
    assert code == 2 and out.startswith(f"UNKNOWN  {run}  durability unknown [error: {DROPPED}]")
    assert err == (f"floodmark check: warning: {run / 'results.json'}: the verdicts of {', '.join(OTHERS)} are not "
                   f"kept ({run / 'results.json'} {said}, but {run / 'test.yaml'} states {stated!r}: it is another "
                   "run's): they are unknown until checked again\n")


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


@pytest.mark.parametrize("written_before_judged_files", [False, True])
def test_a_partial_check_reads_results_json_once_and_digests_the_run_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written_before_judged_files: bool) -> None:
    """check_run read results.json twice on a check of some checkers (once for what it judged,
    once for its verdicts) and, on a results file written before it recorded what it judged,
    digested the history and node events twice (a digest reads every byte of them). Each is
    read once now, and the old verdicts are kept as before."""
    import floodmark.contracts.results
    import floodmark.run_dirs.run_digests

    path = make_run_dir(tmp_path, "hw-decrease")
    _digest(path)
    assert check_run(path)["valid"] is False
    if written_before_judged_files:
        _as_written_before_judged_files(path)
    calls = {"read_results": 0, "compute_digest": 0}

    def counted(name: str, module: Any) -> None:
        original = getattr(module, name)

        def counting(*args: Any) -> Any:
            calls[name] += 1
            return original(*args)

        monkeypatch.setattr(module, name, counting)

    counted("read_results", floodmark.contracts.results)
    counted("compute_digest", floodmark.run_dirs.run_digests)
    results = check_run(path, checkers=["queue"])
    assert calls == {"read_results": 1, "compute_digest": 1}
    assert results["valid"] is False and results["checkers"]["hw"]["valid"] is False


# ------------------------------------------------ an interrupted run is unknown at best


def test_a_run_marked_interrupted_is_never_judged_valid(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(run)]) == 0  # the finished run, as it is: valid
    capsys.readouterr()
    marked = RunDir(run)
    write_interruption(marked, Interruption("the fault phase", 3.2, 2.9, 5.0, "SIGINT"))
    code = main(["check", str(run)])
    _, err = capsys.readouterr()
    reason = unfinished_reason(marked)
    assert code == 2 and reason is not None and reason in err
    results = _results(run)
    assert results["valid"] == "unknown" and results["interrupted"] == reason and reason in results["notes"]
