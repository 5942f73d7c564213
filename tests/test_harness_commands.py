"""Tests for floodmark.run.commands: options -> configuration, bad arguments, repro checks."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from floodmark import cli, errors
from floodmark.harness.config import NEMESIS_KINDS, TestConfig, dump_config
from floodmark.run import commands


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
     ("run", "--replication-factor", "5")],
)
def test_bad_values_are_usage_errors(argv: tuple[str, ...]) -> None:
    with pytest.raises(errors.UsageError):
        commands.config_from_args(parse(*argv))


def test_unparseable_options_exit_254(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parse("run", "--nodes", "three")
    assert raised.value.code == errors.EXIT_BAD_ARGUMENTS
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
