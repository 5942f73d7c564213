"""The run directory contract: its layout, ``latest``, what it recorded, and its digests
(which the checkers and the report consult)."""

import json
import os
from pathlib import Path

from floodmark.run import digest
from floodmark.run_dirs.run_digests import (
    changed_since_digest,
    changed_since_judged,
    compute_digest,
    load_digest,
)
from floodmark.run_dirs.rundir import RunDir, create_run_dir, find_run_dirs, safe_name


def test_run_dirs_are_laid_out_and_latest_follows(tmp_path):
    first = create_run_dir(tmp_path, "queue all/docker", 7)
    first.history.write_text("")
    second = create_run_dir(tmp_path, "queue all/docker", 8)
    second.history.write_text("")
    assert first.path != second.path
    assert first.events.is_dir() and first.logs.is_dir()
    assert first.path.name.endswith("-s7") and first.test_name == safe_name("queue all/docker")
    assert os.path.realpath(tmp_path / "latest") == str(second.path.resolve())
    assert [r.path for r in find_run_dirs(tmp_path)][0] == second.path


def test_runs_finishing_at_once_all_point_latest_without_tripping(tmp_path: Path) -> None:
    # explore --jobs: several runs of one store finish together; none may fail on the link.
    import threading

    from floodmark.run_dirs.rundir import LATEST, update_latest

    runs = [tmp_path / f"t/2026-s{i}" for i in range(8)]
    for run in runs:
        run.mkdir(parents=True)
    errors: list[BaseException] = []

    def finish(run: Path) -> None:
        try:
            for _ in range(100):
                update_latest(tmp_path, run)
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=finish, args=(run,)) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (tmp_path / LATEST).resolve() in {r.resolve() for r in runs}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_recorded_files_are_every_input_of_the_run_but_not_its_report(tmp_path: Path) -> None:
    run = create_run_dir(tmp_path, "t", 1)
    for path in (run.history, run.config, run.report, run.events / "n1.jsonl", run.node_logs("n1") / "stdout.log"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    recorded = set(run.recorded_files())
    assert {run.history, run.config, run.schedule, run.results, run.digest,
            run.events / "n1.jsonl", run.node_logs("n1") / "stdout.log"} == recorded
    assert run.report not in recorded


def _run(tmp_path: Path) -> RunDir:
    run = RunDir(tmp_path / "run")
    (run.path / "events").mkdir(parents=True)
    run.history.write_text('{"index":0}\n')
    (run.events / "n1.jsonl").write_text("{}\n")
    return run


def test_floodmark_run_digest_still_names_the_moved_functions(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert digest.compute is compute_digest and digest.load is load_digest
    saved = digest.save(run)
    assert saved == compute_digest(run) == load_digest(run) and set(saved) == {"run", "history.jsonl", "events/n1.jsonl"}
    assert issubclass(digest.DigestError, ValueError)


def test_changed_since_digest_names_each_file_that_differs(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert changed_since_digest(run) == f"{run.digest}: no such file, so nothing records which history and node " \
                                        "events were judged"
    digest.save(run)
    assert changed_since_digest(run) is None
    (run.events / "n2.jsonl").write_text("")  # a node's file the digest does not name is a difference too
    assert changed_since_digest(run) == f"events/n2.jsonl differs from what {run.digest} records"
    run.history.write_text("")
    assert changed_since_digest(run) == f"events/n2.jsonl, history.jsonl differ from what {run.digest} records"


def test_an_unreadable_digest_is_named_not_raised(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.digest.write_text(json.dumps({"run": "0" * 64}))
    assert changed_since_digest(run) == f"{run.digest}: not a digest (no 'history.jsonl')"
    run.digest.unlink()
    run.digest.mkdir()
    problem = changed_since_digest(run)
    assert problem is not None and problem.startswith(f"{run.digest}: ") and "\n" not in problem


def test_what_results_json_says_it_judged_decides_before_the_digest(tmp_path: Path) -> None:
    run = _run(tmp_path)
    judged = compute_digest(run)
    assert changed_since_judged(run, judged) is None  # no digest.json needed (a real cluster's run)
    run.history.write_text("")
    assert changed_since_judged(run, judged) == f"history.jsonl changed since {run.results} judged it"
    (run.events / "n1.jsonl").write_text("")
    assert changed_since_judged(run, judged) == f"events/n1.jsonl, history.jsonl changed since {run.results} judged them"
    for unrecorded in (None, {}, {"run": 1}, ["x"], "text"):  # an older results file, or a damaged record
        assert changed_since_judged(run, unrecorded) == changed_since_digest(run)


def test_the_digest_records_the_configuration_the_checkers_judge_by(tmp_path: Path) -> None:
    # The checkers read acks and min.insync from test.yaml: a run whose acks were edited from
    # all to 1 afterwards would have every lost write forgiven, so the digest covers it too.
    run = _run(tmp_path)
    run.config.write_text("acks: all\n")
    saved = digest.save(run)
    assert set(saved) == {"run", "history.jsonl", "events/n1.jsonl", "test.yaml"}
    assert load_digest(run) == saved
    run.config.write_text("acks: 1\n")
    assert changed_since_digest(run) == f"test.yaml differs from what {run.digest} records"
    assert changed_since_judged(run, saved) == f"test.yaml changed since {run.results} judged it"
    assert compute_digest(run)["run"] == saved["run"]  # a replay's identity is its history and events alone


def test_a_configuration_or_event_file_removed_since_is_a_change_and_said_gone(tmp_path: Path) -> None:
    # Without test.yaml the checkers judge the run with no settings at all (every loss
    # forgiven that acks=1 would forgive, no min.insync): a verdict judged with it is not
    # of the run without it. It was taken as unchanged.
    run = _run(tmp_path)
    run.config.write_text("acks: all\n")
    saved = digest.save(run)
    run.config.unlink()
    assert changed_since_digest(run) == f"test.yaml (gone) differs from what {run.digest} records"
    assert changed_since_judged(run, saved) == f"test.yaml (gone) changed since {run.results} judged it"
    (run.events / "n1.jsonl").unlink()
    assert changed_since_judged(run, saved) == (f"events/n1.jsonl (gone), test.yaml (gone) changed since "
                                                f"{run.results} judged them")
    assert digest.differences(saved, compute_digest(run), configuration=False) == ["events/n1.jsonl"]


def test_a_digest_from_before_the_configuration_was_recorded_still_holds(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.config.write_text("acks: all\n")
    older = {name: value for name, value in digest.save(run).items() if name != "test.yaml"}
    run.digest.write_text(json.dumps(older))
    assert changed_since_digest(run) is None
    assert changed_since_judged(run, older) is None


def test_a_replay_is_compared_by_its_history_and_events_not_by_the_code_it_names(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.config.write_text("code_version: aaaaaaa\n")
    original = compute_digest(run)
    run.config.write_text("code_version: bbbbbbb\n")
    replay = compute_digest(run)
    assert digest.differences(original, replay) == ["test.yaml"]
    assert digest.differences(original, replay, configuration=False) == []
    run.history.write_text("")
    assert digest.differences(original, compute_digest(run), configuration=False) == ["history.jsonl"]
