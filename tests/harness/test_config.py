"""Tests for floodmark.harness.config: defaults, validation with named keys, YAML round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.contracts.run_config import DEFAULT_NEMESIS
from floodmark.harness.config import (
    NEMESIS_KINDS,
    ConfigError,
    TestConfig,
    dump_config,
    load_config,
    make_config,
    parse_nemesis,
    recorded_settings,
)


def test_defaults_make_a_meaningful_sixty_second_test() -> None:
    config = TestConfig()
    assert config.time_limit == 60
    assert config.nemesis == NEMESIS_KINDS
    assert config.acks == "all" and config.acks_code == -1
    assert config.replication_factor == 3 and config.min_insync_replicas == 2
    assert config.topic_names == ("t0", "t1")
    assert len(config.topic_partitions) == config.topics * config.partitions
    assert config.name == "queue-all-default"


@pytest.mark.parametrize(
    ("values", "key", "fragment"),
    [
        ({"cluster": "kubernetes"}, "cluster", "docker, local"),
        ({"nodes": 10}, "nodes", "at most 9"),
        ({"nodes": "three"}, "nodes", "expected a number"),
        ({"workload": "bank"}, "workload", "queue, log-lin"),
        ({"nemesis": "partition,flood"}, "nemesis", "'flood'"),
        ({"variant": "nope"}, "variant", "truncate-to-hw"),
        ({"acks": 2}, "acks", "all"),
        ({"time_limit": -1}, "time_limit", "at least"),
        ({"replication_factor": 4}, "replication_factor", "3 nodes"),
        ({"min_insync_replicas": 3, "replication_factor": 2}, "min_insync_replicas", "replication factor 2"),
        ({"fault_duration": [5, 1]}, "fault_duration", "greater than max"),
        ({"concurrency": 1}, "concurrency", "at least 2 workers"),
        ({"partitions": 1.5}, "partitions", "whole number"),
        # (a float: read as 12345678901234568, and the test would have run another seed)
        ({"seed": 12345678901234567.0}, "seed", "a number this large is not exact; write it as an integer"),
        ({"colour": "red"}, "colour", "unknown key"),
    ],
)
def test_bad_values_name_the_key(values: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make_config(values, "my.yaml")
    assert raised.value.key == key
    assert fragment in str(raised.value)
    assert str(raised.value).startswith("my.yaml: ")


def test_nemesis_spellings() -> None:
    assert make_config({"nemesis": "all"}).nemesis == NEMESIS_KINDS
    assert parse_nemesis("none") == ()
    assert parse_nemesis("kill,partition") == ("partition", "kill")
    assert parse_nemesis(["clock"]) == ("clock",)


def test_dashed_keys_and_acks_spellings() -> None:
    config = make_config({"replication-factor": 2, "min-insync-replicas": 1, "acks": "1"})
    assert config.replication_factor == 2 and config.acks == 1 and config.acks_code == 1
    assert make_config({"acks": -1}).acks == "all"


def test_yaml_round_trip_and_overrides(tmp_path: Path) -> None:
    config = make_config({"seed": 42, "nodes": 5, "nemesis": "pause", "variant": "unclean-election", "name": "mine"})
    path = tmp_path / "test.yaml"
    dump_config(config, path)
    assert load_config(path) == config
    overridden = load_config(path, {"time_limit": 10, "seed": 7})
    assert overridden.time_limit == 10 and overridden.seed == 7 and overridden.nodes == 5
    assert overridden.name == "mine"


def test_derived_name_follows_overrides(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("nemesis: kill\n")
    assert load_config(path, {"variant": "truncate-to-hw"}).name == "queue-kill-truncate-to-hw"


def test_yaml_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("nodes: 3\nnemesis: [partition\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(path) in str(raised.value) and "line" in str(raised.value)
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_yaml_value_errors_name_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("nodes: 3\nrate: fast\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert raised.value.key == "rate" and raised.value.source == str(path)


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        TestConfig().nodes = 5  # type: ignore[misc]


def test_replace_keeps_custom_names_and_rederives_derived_ones() -> None:
    assert TestConfig().replace(variant="truncate-to-hw").name == "queue-all-truncate-to-hw"
    assert TestConfig(name="mine").replace(variant="truncate-to-hw").name == "mine"


def test_nemesis_kinds_have_one_order() -> None:
    assert TestConfig(nemesis=("kill", "partition")) == TestConfig(nemesis=("partition", "kill"))
    assert TestConfig(nemesis=("kill", "partition")).name == "queue-partition+kill-default"


def test_the_default_faults_are_ones_the_harness_has() -> None:
    assert set(DEFAULT_NEMESIS) <= set(NEMESIS_KINDS)
    assert make_config({"nemesis": "all"}).nemesis == NEMESIS_KINDS


def test_unclean_election_is_recorded_from_the_variant() -> None:
    assert make_config({"variant": "unclean-election"}).unclean_leader_election is True
    assert make_config({"variant": "truncate-to-hw"}).unclean_leader_election is False
    # Changing the variant on top of a loaded test derives the setting again.
    loaded = make_config({"variant": "unclean-election"})
    assert make_config({"variant": "default"}, "command line", loaded).unclean_leader_election is False
    assert recorded_settings(TestConfig(variant="unclean-election")).unclean_leader_election is True
    assert recorded_settings(TestConfig(producer_retries_without_idempotence=True)).producer_retries_without_idempotence is False


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"variant": "default", "unclean_leader_election": True}, "unclean_leader_election"),
        ({"variant": "unclean-election", "unclean-leader-election": False}, "unclean_leader_election"),
        ({"producer_retries_without_idempotence": True}, "producer_retries_without_idempotence"),
        ({"unclean_leader_election": "yes"}, "unclean_leader_election"),
    ],
)
def test_recorded_settings_cannot_be_chosen(values: dict, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make_config(values, "my.yaml")
    assert raised.value.key == key and str(raised.value).startswith(f"my.yaml: {key}: ")


def test_a_recorded_setting_stated_as_recorded_is_accepted(tmp_path: Path) -> None:
    config = make_config({"variant": "unclean-election", "unclean_leader_election": True})
    assert config.unclean_leader_election is True
    path = tmp_path / "test.yaml"
    dump_config(config, path)
    assert "unclean_leader_election: true" in path.read_text()
    assert load_config(path) == config  # what repro reads back


def test_an_old_test_yaml_is_reproduced_with_the_setting_its_variant_had(tmp_path: Path) -> None:
    path = tmp_path / "test.yaml"
    path.write_text("variant: unclean-election\nseed: 4\n")
    assert load_config(path).unclean_leader_election is True


def test_all_means_every_kind_the_backend_applies() -> None:
    sim = make_config({"cluster": "sim"})
    assert sim.nemesis == NEMESIS_KINDS + ("power", "session", "message")
    assert sim.name == "queue-all-default"
    assert make_config({"cluster": "sim", "nemesis": "all"}).nemesis == sim.nemesis
    assert make_config({"cluster": "local", "nemesis": "all"}).nemesis == NEMESIS_KINDS
    assert make_config({"cluster": "sim", "nemesis": "kill"}).nemesis == ("kill",)


def test_a_real_backend_refuses_faults_only_the_simulator_can_apply() -> None:
    with pytest.raises(ConfigError, match="only --cluster sim can") as raised:
        make_config({"cluster": "docker", "nemesis": "kill,power"})
    assert raised.value.key == "nemesis"


def test_the_inter_broker_protocol_is_one_of_the_references_versions() -> None:
    from floodmark.harness.config import ConfigError
    from floodmark.run.assemble import broker_args

    assert TestConfig().inter_broker_protocol == "heartbeats"
    config = make_config({"inter_broker_protocol": "kip-343"})
    assert config.inter_broker_protocol == "kip-343"
    args = broker_args(config)
    assert args[args.index("--inter-broker-protocol") + 1] == "kip-343"
    with pytest.raises(ConfigError, match="inter_broker_protocol: must be one of legacy, heartbeats, kip-343"):
        make_config({"inter_broker_protocol": "2.8"})


# ---------------------------------------------------------------- linger (Kafka's linger.ms)


def test_linger_is_seconds_defaults_to_zero_and_round_trips(tmp_path: Path) -> None:
    from floodmark.contracts.run_config import read_test_config

    assert TestConfig().linger == 0.0  # Kafka 4.0's default is 5 ms; ours keeps every old seed
    assert make_config({"linger": 0.005}).linger == 0.005
    assert make_config({"linger": "0.02"}).linger == 0.02 and make_config({"linger": 1}).linger == 1.0
    path = tmp_path / "test.yaml"
    path.write_text("linger: 0.02\nnodes: 3\n")
    config = load_config(path, {"linger": 0.05})
    assert config.linger == 0.05
    dump_config(config, path)
    assert "linger: 0.05" in path.read_text().splitlines()
    assert load_config(path) == config
    assert (read_test_config(path) or TestConfig()).linger == 0.05


@pytest.mark.parametrize(("value", "fragment"), [
    (-0.001, "must be at least 0.0"),
    (5, "must be at most 1"),  # milliseconds written as seconds
    ("5ms", "expected a number"),
    (True, "expected a number"),
    (float("nan"), "finite"),
    ([0.005], "expected a number"),
])
def test_a_bad_linger_is_refused_in_one_line_naming_the_key(value: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make_config({"linger": value}, "my.yaml")
    assert raised.value.key == "linger" and fragment in str(raised.value)
    assert str(raised.value).startswith("my.yaml: linger: ") and "\n" not in str(raised.value)


def test_the_run_command_takes_linger_and_refuses_a_bad_one_with_exit_254(
        capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from floodmark.cli import main
    from floodmark.errors import EXIT_BAD_ARGUMENTS
    from floodmark.run.commands import config_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    assert config_from_args(parser.parse_args(["run", "--cluster", "sim", "--linger", "0.005"])).linger == 0.005
    assert main(["run", "--cluster", "sim", "--linger", "2"]) == EXIT_BAD_ARGUMENTS
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["floodmark run: error: command line: linger: must be at most 1, got 2.0"]


@pytest.mark.parametrize("text", [
    "nodes: null", "time_limit: ~", "acks: null", "cluster: null", "code_version: null", "fault_duration: [null, 2]",
    "unclean_leader_election: null", "unclean_leader_election: ", "nodes: true", "rate: false", "null: 1",
])
def test_a_value_is_named_as_the_yaml_spells_it_not_as_python_does(text: str, tmp_path: Path) -> None:
    # (it said "got None", "got NoneType", "got True", "None: unknown key")
    from floodmark.contracts.run_config import config_from_dict, read_yaml_mapping

    path = tmp_path / "test.yaml"
    path.write_text(text + "\n")
    for read in (lambda: load_config(path), lambda: config_from_dict(read_yaml_mapping(path), str(path))):
        with pytest.raises(ConfigError) as raised:
            read()
        said = str(raised.value)
        assert not any(word in said for word in ("None", "True", "False")), said
        assert ("null" if "null" in text or "~" in text or text.endswith(": ") else text.split()[-1]) in said, said
