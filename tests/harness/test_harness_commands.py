"""Tests for floodmark.run.commands: options -> configuration, bad arguments, repro checks."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from floodmark import cli, errors
from floodmark.harness.config import NEMESIS_KINDS, TestConfig, dump_config
from floodmark.run import commands, explore_commands


def kill_schedule(folder: Path, time_limit: int) -> Path:
    """A hand-written schedule: one kill of a leader from 1 s to 2 s, in ``folder``/s.json."""
    schedule = folder / "s.json"
    schedule.write_text(f'{{"time_limit": {time_limit}, "faults": [{{"number": 0, "kind": "kill", "shape": "leader", '
                        '"start": 1, "duration": 1, "seed": 1}]}')
    return schedule


def parser() -> argparse.ArgumentParser:
    p = cli.ArgumentParser(prog="floodmark")
    commands.register(p.add_subparsers(dest="command"))
    return p


def parse(*argv: str) -> argparse.Namespace:
    return parser().parse_args(list(argv))


def test_options_become_the_configuration() -> None:
    args = parse("run", "--cluster", "local", "--workload", "log-lin", "--nemesis", "kill,pause",
                 "--time-limit", "30", "--seed", "42", "--variant", "truncate-to-hw", "--nodes", "5",
                 "--rate", "500", "--concurrency", "4", "--topics", "1", "--partitions", "4",
                 "--replication-factor", "3", "--min-insync-replicas", "2", "--acks", "1")
    config = commands.config_from_args(args)
    assert config == TestConfig(
        cluster="local", workload="log-lin", nemesis=("pause", "kill"), time_limit=30, seed=42,
        variant="truncate-to-hw", nodes=5, rate=500, concurrency=4, topics=1, partitions=4,
        replication_factor=3, min_insync_replicas=2, acks=1,
    )
    assert args.func is commands.run_command


def test_defaults_without_options() -> None:
    config = commands.config_from_args(parse("run"))
    assert config.nemesis == NEMESIS_KINDS and config.cluster == "docker" and config.seed is None


def test_file_with_overrides(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("nodes: 5\nnemesis: none\nseed: 3\n")
    config = commands.config_from_args(parse("run", "-f", str(path), "--seed", "9"))
    assert config.nodes == 5 and config.nemesis == () and config.seed == 9


@pytest.mark.parametrize(
    "argv",
    [("run", "--nodes", "12"), ("run", "--variant", "bogus"), ("run", "--nemesis", "flood"),
     ("run", "--replication-factor", "5"), ("run", "--nemesis", ""), ("run", "--nemesis", ","),
     ("run", "--nemesis", "partition,,kill"), ("run", "--nemesis", "all,none")],
)
def test_bad_values_are_usage_errors(argv: tuple[str, ...]) -> None:
    with pytest.raises(errors.UsageError):
        commands.config_from_args(parse(*argv))


def test_unparseable_options_exit_254(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parse("run", "--nodes", "three")
    assert raised.value.code == errors.EXIT_BAD_ARGUMENTS
    # One line: what is wrong, and where help is (not the usage block first).
    assert capsys.readouterr().err == ("floodmark run: error: argument --nodes: invalid int value: 'three' "
                                       "(see floodmark run --help)\n")
    with pytest.raises(SystemExit) as raised:
        parse("run", "--cluster", "k8s")
    assert raised.value.code == errors.EXIT_BAD_ARGUMENTS


def test_help_explains_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("run", "--help")
    text = capsys.readouterr().out
    for fragment in ("--nemesis", "repro", "exit codes", "truncate-to-hw", "examples", "--time-limit"):
        assert fragment in text


def test_repro_rejects_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(errors.UsageError, match="not a run directory"):
        commands.repro_command(parse("repro", str(tmp_path)))
    dump_config(TestConfig(), tmp_path / "test.yaml")
    with pytest.raises(errors.UsageError, match="no seed"):
        commands.repro_command(parse("repro", str(tmp_path)))
    dump_config(TestConfig(seed=4), tmp_path / "test.yaml")
    (tmp_path / "schedule.json").write_text('{"seed": 5, "faults": []}')
    with pytest.raises(errors.UsageError, match="differs"):
        commands.repro_command(parse("repro", str(tmp_path)))
    (tmp_path / "test.yaml").write_text("nodes: 99\n")
    with pytest.raises(errors.UsageError, match="nodes"):
        commands.repro_command(parse("repro", str(tmp_path)))


def _stored_run(path: Path, *, seed: int = 4) -> Path:
    """A run directory as far as repro reads it before replaying: configuration and schedule."""
    path.mkdir(parents=True, exist_ok=True)
    dump_config(TestConfig(cluster="sim", seed=seed, time_limit=5), path / "test.yaml")
    (path / "schedule.json").write_text(f'{{"seed": {seed}, "time_limit": 5, "faults": []}}')
    return path


@pytest.mark.parametrize(("damage", "problem"), [
    ("directory", "schedule.json: is a directory, not a file"),
    ("loop", "schedule.json: cannot read: too many levels of symbolic links"),
    ("missing", "schedule.json: no such file: every run records its fault schedule there"),
])
def test_repro_refuses_a_schedule_it_cannot_read_rather_than_draw_another(tmp_path: Path, damage: str,
                                                                         problem: str) -> None:
    run = _stored_run(tmp_path / "run")
    (run / "schedule.json").unlink()
    if damage == "directory":
        (run / "schedule.json").mkdir()
    elif damage == "loop":
        (run / "schedule.json").symlink_to("schedule.json")
    with pytest.raises(errors.UsageError) as refused:
        commands.repro_command(parse("repro", str(run), "--store", str(tmp_path / "out")))
    assert str(refused.value).startswith(f"{run / problem}")
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.parametrize(("digest", "problem"), [
    ("{bad", "not a digest: not valid JSON"), ("", "not a digest: not valid JSON"),
    ("[]", "not a digest (expected an object of file digests)"), ("{}", "not a digest (no 'run')"),
    ('{"run": "x", "history.jsonl": "y"}', "not a digest ('run' is not a SHA-256 in hex)"),
    ('{"run": "' + "0" * 64 + '", "history.jsonl": "' + "0" * 64 + '", "../x": "' + "0" * 64 + '"}',
     "not a digest ('../x' is not a file a run's digest names)"),
    (None, "is a directory, not a file"),
])
def test_repro_refuses_a_digest_it_cannot_compare_with(tmp_path: Path, digest: str | None, problem: str) -> None:
    run = _stored_run(tmp_path / "run")
    if digest is None:
        (run / "digest.json").mkdir()
    else:
        (run / "digest.json").write_text(digest)
    with pytest.raises(errors.UsageError) as refused:
        commands.repro_command(parse("repro", str(run), "--store", str(tmp_path / "out")))
    assert str(refused.value) == f"{run / 'digest.json'}: {problem}" or \
        str(refused.value).startswith(f"{run / 'digest.json'}: {problem}")


def test_repro_of_a_test_yaml_in_a_symlink_loop_names_the_loop(tmp_path: Path) -> None:
    run = _stored_run(tmp_path / "run")
    (run / "test.yaml").unlink()
    (run / "test.yaml").symlink_to("test.yaml")
    with pytest.raises(errors.UsageError, match="test.yaml: cannot read: too many levels of symbolic links"):
        commands.repro_command(parse("repro", str(run)))


def test_a_fault_that_starts_at_or_after_the_time_limit_is_refused(tmp_path: Path) -> None:
    schedule = tmp_path / "s.json"
    schedule.write_text('{"time_limit": 5, "faults": [{"number": 0, "kind": "kill", "shape": "leader", '
                        '"start": 500, "duration": 2.0, "seed": 1}]}')
    with pytest.raises(errors.UsageError) as refused:
        commands.run_command(parse("run", "--cluster", "sim", "--time-limit", "5", "--seed", "3",
                                   "--schedule", str(schedule), "--store", str(tmp_path / "store")))
    assert str(refused.value) == (f"{schedule}: fault 0 (kill leader) starts at 500 s, at or after the test's "
                                  "time limit of 5 s: it would never run")
    assert not (tmp_path / "store").exists()
    run = _stored_run(tmp_path / "run")
    (run / "schedule.json").write_text(schedule.read_text().replace('"time_limit": 5', '"seed": 4, "time_limit": 5'))
    with pytest.raises(errors.UsageError, match="fault 0 .kill leader. starts at 500 s"):
        commands.repro_command(parse("repro", str(run)))


def test_repro_of_a_simulated_run_without_its_digest_says_it_cannot_compare(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert commands.run_command(parse("run", "--cluster", "sim", "--time-limit", "5", "--seed", "3",
                                      "--nemesis", "kill", "--store", str(store))) == 0
    run = (store / "latest").resolve()
    commands.repro_command(parse("repro", str(run)))
    assert f"floodmark: replay identical to {run}" in capsys.readouterr().err
    (run / "digest.json").unlink()
    commands.repro_command(parse("repro", str(run)))
    assert (f"floodmark: {run / 'digest.json'}: no such file: whether the replay is byte-identical cannot be "
            "compared") in capsys.readouterr().err


@pytest.mark.parametrize(("damage", "problem"), [
    ("garbage", "not a results file: not valid JSON"), ("missing", "no such file or directory"),
    ("fifo", "is a FIFO, not a file"), ("directory", "is a directory, not a file"),
])
def test_shrink_names_a_results_file_it_cannot_read(tmp_path: Path, damage: str, problem: str) -> None:
    import os

    run = _stored_run(tmp_path / "store" / "t" / "run")
    results = run / "results.json"
    {"garbage": lambda: results.write_text("{bad"), "missing": lambda: None,
     "fifo": lambda: os.mkfifo(results), "directory": results.mkdir}[damage]()
    with pytest.raises(errors.UsageError) as refused:  # the audit's E6: "the run has no anomalies to preserve"
        explore_commands.shrink_command(parse("shrink", str(run)))
    assert str(refused.value).startswith(f"{results}: {problem}")
    assert "the anomalies to preserve are read from it" in str(refused.value)


@pytest.mark.parametrize("judged_files", [True, False])
def test_shrink_refuses_a_verdict_judged_on_another_run_s_files(tmp_path: Path, judged_files: bool) -> None:
    """A failing run's results.json copied beside a passing run's files: the shrink took its
    anomalies for this run's, spent its budget on candidates that all passed, and said the
    run "stays the smallest" failing run, exiting 0, where the report shows it unchecked.
    One that records no judged_files (as written before they were) is told by its run id."""
    import json

    from floodmark.run.explore import run_seed

    failing = run_seed(1000, "truncate-to-hw", str(tmp_path / "found"))
    assert failing.valid is False and failing.run_dir is not None
    store = tmp_path / "store"
    assert commands.run_command(parse("run", "--cluster", "sim", "--nemesis", "kill", "--time-limit", "3",
                                      "--seed", "3", "--store", str(store))) == errors.EXIT_VALID
    run = (store / "latest").resolve()
    results = json.loads((Path(failing.run_dir) / "results.json").read_text())
    if not judged_files:
        del results["judged_files"]
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(errors.UsageError) as refused:
        explore_commands.shrink_command(parse("shrink", str(run), "--budget", "1"))
    assert str(refused.value).startswith(f"{run / 'results.json'}: its verdict is not of this run's files (")
    assert judged_files or "it is another run's" in str(refused.value)
    assert str(refused.value).endswith(f"; run floodmark check {run} to judge the run again")
    assert sorted(p.name for p in (store / "queue-kill-default").iterdir()) == [run.name]  # no candidate ran


def test_a_schedule_giving_a_fault_number_twice_is_refused(tmp_path: Path) -> None:
    """The run records each fault by its number: a second fault 0 would overwrite the first's record."""
    schedule = tmp_path / "s.json"
    schedule.write_text('{"time_limit": 10, "faults": ['
                        '{"number": 0, "kind": "partition", "shape": "halves", "start": 1, "duration": 2, "seed": 1},'
                        '{"number": 0, "kind": "kill", "shape": "leader", "start": 5, "duration": 2, "seed": 2}]}')
    with pytest.raises(errors.UsageError) as refused:
        commands.run_command(parse("run", "--cluster", "sim", "--schedule", str(schedule),
                                   "--store", str(tmp_path / "store")))
    assert str(refused.value) == f"{schedule}: fault 1: number 0 is fault 0's already"
    assert not (tmp_path / "store").exists()


def test_a_schedule_refused_by_the_backend_leaves_no_run_directory_and_latest_as_it_was(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert commands.run_command(parse("run", "--cluster", "sim", "--nemesis", "none", "--time-limit", "2",
                                      "--seed", "1", "--store", str(store))) == errors.EXIT_VALID
    before = (store / "latest").resolve()
    schedule = tmp_path / "s.json"
    schedule.write_text('{"time_limit": 4, "faults": [{"number": 0, "kind": "kill", "shape": "no-such-shape", '
                        '"start": 1, "duration": 2, "seed": 1}]}')
    with pytest.raises(errors.UsageError) as refused:
        commands.run_command(parse("run", "--cluster", "sim", "--nemesis", "kill", "--schedule", str(schedule),
                                   "--store", str(store)))
    # (named by its file, as every other schedule error is: the audit's F14)
    assert str(refused.value).startswith(f"{schedule}: fault 0 (kill:no-such-shape): unknown shape; known: ")
    assert (store / "latest").resolve() == before
    assert sorted(p.name for p in store.iterdir()) == ["latest", "queue-none-default"]  # nothing of the refused test


def test_a_schedule_says_how_long_its_test_runs_unless_the_command_line_does(tmp_path: Path) -> None:
    schedule = kill_schedule(tmp_path, time_limit=3)
    store = tmp_path / "store"
    commands.run_command(parse("run", "--cluster", "sim", "--nemesis", "kill", "--seed", "2",
                               "--schedule", str(schedule), "--store", str(store)))
    assert "time_limit: 3" in (store / "latest" / "test.yaml").read_text()
    commands.run_command(parse("run", "--cluster", "sim", "--nemesis", "kill", "--seed", "2", "--time-limit", "4",
                               "--schedule", str(schedule), "--store", str(store)))
    assert "time_limit: 4" in (store / "latest" / "test.yaml").read_text()


def test_a_store_that_is_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("")
    for store in (a_file, a_file / "below"):
        with pytest.raises(errors.UsageError) as refused:
            commands.run_command(parse("run", "--cluster", "sim", "--store", str(store)))
        assert str(refused.value).startswith(f"--store {store}: ")


def test_a_schedule_time_limit_no_test_may_have_is_named_as_the_schedule_s(tmp_path: Path) -> None:
    """Audit: refused as the command line's ("command line: time_limit: must be at least
    0.01"), which the user never gave."""
    schedule = tmp_path / "s.json"
    schedule.write_text('{"time_limit": 0, "faults": []}')
    with pytest.raises(errors.UsageError) as refused:
        commands.run_command(parse("run", "--cluster", "sim", "--schedule", str(schedule),
                                   "--store", str(tmp_path / "store")))
    assert str(refused.value) == f"{schedule}: time_limit: must be at least 0.01, got 0.0"
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(("cut", "problem"), [
    ("nodes", "nodes: not stated: a run's test.yaml states every setting its verdict depends on"),
    (None, "states no configuration (an empty file)"),
])
def test_repro_refuses_a_test_yaml_cut_short_rather_than_replay_defaults(tmp_path: Path, cut: str | None,
                                                                        problem: str) -> None:
    """Audit: a run of 5 brokers whose ``nodes`` line was deleted replayed with 3, and the
    replay was said to differ by nondeterminism."""
    run = _stored_run(tmp_path / "run")
    text = (run / "test.yaml").read_text()
    (run / "test.yaml").write_text("" if cut is None else "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith(f"{cut}:")))
    with pytest.raises(errors.UsageError) as refused:
        commands.repro_command(parse("repro", str(run), "--store", str(tmp_path / "out")))
    assert str(refused.value).startswith(f"{run / 'test.yaml'}: {problem}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("cluster", "nemesis", "kind", "problem"), [
    # (the audit: each was "the test has no power nemesis", naming neither the backend nor what to do)
    ("docker", "all", "power", "the docker backend cannot apply power faults; only --cluster sim can"),
    ("local", "partition", "message", "the local backend cannot apply message faults; only --cluster sim can"),
    ("sim", "partition", "meteor", "unknown fault kind; known: partition, clock, pause, disk, kill, admin, "),
    ("sim", "partition", "power", "the test has no power nemesis"),
])
def test_a_schedule_fault_the_test_cannot_apply_is_refused_naming_the_backend(
        tmp_path: Path, cluster: str, nemesis: str, kind: str, problem: str) -> None:
    schedule = tmp_path / "s.json"
    schedule.write_text(f'{{"time_limit": 3, "faults": [{{"number": 0, "kind": "{kind}", "shape": "leader", '
                        '"start": 1, "duration": 1, "seed": 1}]}')
    with pytest.raises(errors.UsageError) as refused:
        commands.run_command(parse("run", "--cluster", cluster, "--nemesis", nemesis, "--schedule", str(schedule),
                                   "--store", str(tmp_path / "store")))
    assert str(refused.value).startswith(f"{schedule}: fault 0 ({kind}:leader): {problem}")
    assert not any((tmp_path / "store").rglob("test.yaml"))  # refused before the run started


@pytest.mark.parametrize("name", ["", " ", "\t"])
@pytest.mark.parametrize(("option", "said"), [("--schedule", "--schedule"), ("-f", "-f/--file")])
def test_an_empty_file_name_is_refused_not_taken_for_no_file(tmp_path: Path, option: str, said: str,
                                                              name: str) -> None:
    """Audit: ``--schedule ''`` ran the seed's own schedule, ``-f ''`` the default test (60 s
    under every fault): another test than the one named, without a word. A blank name was
    refused as a file that cannot be read, named as nothing ("error:  : cannot read")."""
    with pytest.raises(errors.UsageError) as refused:
        commands.run_command(parse("run", "--cluster", "sim", option, name, "--store", str(tmp_path / "store")))
    blank = "an empty" if not name else "a blank"
    assert str(refused.value).startswith(f"{said}: {blank} file name ({name!r}); give one")
    assert not (tmp_path / "store").exists()


def _digest_run(run: Path) -> str:
    import json

    return str(json.loads((run / "digest.json").read_text())["run"])


def test_a_schedule_s_seed_is_the_run_s_so_a_simulated_run_s_schedule_replays_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Gap: ``run --schedule RUN/schedule.json`` drew a seed of its own, so the schedule of a
    simulated bug's run replayed another run (the same faults, other client choices)."""
    store = tmp_path / "store"
    test = ("run", "--cluster", "sim", "--nemesis", "kill", "--store", str(store))
    assert commands.run_command(parse(*test, "--time-limit", "5", "--seed", "3")) == 0
    original = (store / "latest").resolve()
    capsys.readouterr()
    commands.run_command(parse(*test, "--schedule", str(original / "schedule.json")))
    replay = (store / "latest").resolve()
    assert replay != original and "seed: 3\n" in (replay / "test.yaml").read_text()
    assert _digest_run(replay) == _digest_run(original)  # byte for byte
    assert "replaces" not in capsys.readouterr().err  # nothing overridden, nothing said
    commands.run_command(parse("run", "-f", str(original / "test.yaml"), "--schedule", str(original / "schedule.json"),
                               "--store", str(store)))
    assert _digest_run((store / "latest").resolve()) == _digest_run(original)  # as --help says
    commands.run_command(parse(*test, "--seed", "4", "--schedule", str(original / "schedule.json")))
    assert "seed: 4\n" in ((store / "latest") / "test.yaml").read_text()  # the command line states it
    assert (f"floodmark run: {original / 'schedule.json'}: --seed 4 replaces the schedule's 3: the run is not "
            "the one the schedule recorded\n") in capsys.readouterr().err


def test_a_schedule_s_seed_and_time_limit_replace_a_test_file_s_and_say_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schedule = tmp_path / "s.json"
    schedule.write_text('{"seed": 9, "time_limit": 3, "faults": []}')
    test_file = tmp_path / "t.yaml"
    test_file.write_text("cluster: sim\nnemesis: none\nseed: 7\ntime_limit: 4\n")
    store = tmp_path / "store"
    commands.run_command(parse("run", "-f", str(test_file), "--schedule", str(schedule), "--store", str(store)))
    recorded = (store / "latest" / "test.yaml").read_text()
    assert "seed: 9\n" in recorded and "time_limit: 3.0\n" in recorded
    assert (f"floodmark run: {schedule}: the schedule's seed 9 replaces {test_file}'s 7; the schedule's time "
            f"limit 3 s replaces {test_file}'s 4 s\n") in capsys.readouterr().err


def test_repro_replays_a_schedule_json_cut_short_by_hand_and_blames_the_edit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Gap: repro ran test.yaml's time limit whatever the run's schedule.json said, so a
    schedule shortened by hand replayed at its old length (and a replay of an edited
    schedule that differed was blamed on nondeterminism)."""
    import json

    schedule = kill_schedule(tmp_path, time_limit=5)
    store = tmp_path / "store"
    commands.run_command(parse("run", "--cluster", "sim", "--nemesis", "kill", "--seed", "2",
                               "--schedule", str(schedule), "--store", str(store)))
    run = (store / "latest").resolve()
    recorded = json.loads((run / "schedule.json").read_text())
    (run / "schedule.json").write_text(json.dumps({**recorded, "time_limit": 3}))
    capsys.readouterr()
    commands.repro_command(parse("repro", str(run)))
    replay = (store / "latest").resolve()
    assert "time_limit: 3.0\n" in (replay / "test.yaml").read_text()
    assert json.loads((replay / "schedule.json").read_text())["time_limit"] == 3
    err = capsys.readouterr().err
    edit = "time limit 3 s, test.yaml's 5 s"
    assert f"floodmark: {run / 'schedule.json'}: edited since the run ({edit}); replaying it as it is now\n" in err
    assert f"(schedule.json edited since the run: {edit})\n" in err and "nondeterminism" not in err

    faults = [{**recorded["faults"][0], "duration": 0.5}]  # a fault edited, the time limit as it was
    (run / "schedule.json").write_text(json.dumps({**recorded, "faults": faults}))
    commands.repro_command(parse("repro", str(run)))
    err = capsys.readouterr().err
    assert f"{run / 'schedule.json'}: edited since the run (fault 0 not as the run executed)" in err
    for limit, refused in ((0.5, "fault 0 (kill leader) starts at 1 s, at or after the test's time limit of 0.5 s"),
                           (0, "time_limit: must be at least 0.01, got 0.0")):
        (run / "schedule.json").write_text(json.dumps({**recorded, "time_limit": limit}))
        with pytest.raises(errors.UsageError) as refusal:  # cut too short: refused, naming the file
            commands.repro_command(parse("repro", str(run)))
        assert str(refusal.value).startswith(f"{run / 'schedule.json'}: {refused}")
    (run / "schedule.json").write_text(json.dumps(recorded))  # as the run wrote it: nothing said
    commands.repro_command(parse("repro", str(run)))
    err = capsys.readouterr().err
    assert "edited" not in err and f"floodmark: replay identical to {run}" in err


def test_a_run_s_schedule_under_another_test_says_which_settings_differ_and_how_to_replay_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A schedule.json carries no brokers or backend: replayed without its run's test.yaml,
    it runs on the command line's test, which stderr says when it is not the run's."""
    store = tmp_path / "store"
    test = ("run", "--cluster", "sim", "--nemesis", "kill", "--store", str(store))
    commands.run_command(parse(*test, "--time-limit", "2", "--seed", "3", "--nodes", "5"))
    run = (store / "latest").resolve()
    capsys.readouterr()
    commands.run_command(parse(*test, "--schedule", str(run / "schedule.json")))
    assert (f"floodmark run: {run / 'schedule.json'}: its run was another test (nodes 5, not 3); to replay that "
            f"run: floodmark repro {run} (or run -f {run / 'test.yaml'} --schedule {run / 'schedule.json'})\n"
            ) in capsys.readouterr().err
    commands.run_command(parse(*test, "--nodes", "5", "--schedule", str(run / "schedule.json")))
    assert "another test" not in capsys.readouterr().err
