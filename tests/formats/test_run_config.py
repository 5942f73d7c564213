"""The run configuration contract: reading a run's test.yaml (or results.json's copy) as a typed object."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from floodmark.contracts.run_config import (
    DEFAULT_NEMESIS,
    STATED_BY_EVERY_RUN,
    ConfigError,
    TestConfig,
    all_kinds,
    config_from_dict,
    read_test_config,
)
from floodmark.harness.config import dump_config, make_config


def test_a_run_without_test_yaml_states_no_configuration(tmp_path: Path) -> None:
    assert read_test_config(tmp_path / "test.yaml") is None


def test_what_the_harness_writes_reads_back_equal(tmp_path: Path) -> None:
    config = make_config({"seed": 9, "variant": "unclean-election", "acks": 1, "nemesis": "kill,pause"})
    dump_config(config, tmp_path / "test.yaml")
    read = read_test_config(tmp_path / "test.yaml")
    assert read == config
    assert read is not None and read.unclean_leader_election is True and read.acks == 1
    assert read.nemesis == ("pause", "kill") and read.name == "queue-pause+kill-unclean-election"
    assert config_from_dict(config.to_dict(), "results.json: config") == config  # the copy in results.json


def test_an_old_test_yaml_without_the_new_keys_reads_with_them_off(tmp_path: Path) -> None:
    old = TestConfig(variant="unclean-election", seed=3).to_dict()
    del old["unclean_leader_election"], old["producer_retries_without_idempotence"]
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(old))
    read = read_test_config(tmp_path / "test.yaml")
    # Nothing is inferred from the variant's name: the file did not state the setting.
    assert read is not None and read.variant == "unclean-election" and read.unclean_leader_election is False
    assert read.producer_retries_without_idempotence is False and read.seed == 3


def test_reading_checks_types_not_the_harness_choices(tmp_path: Path) -> None:
    # A run of another version or another system may name a cluster, workload, variant or
    # fault the harness does not have; it is still a readable configuration.
    foreign = {"cluster": "k8s", "workload": "bank", "variant": "kip-999", "nemesis": ["flood", "kill"],
               "replication-factor": 5, "nodes": 12, "acks": "-1"}
    read = config_from_dict(foreign, "x.yaml")
    assert (read.cluster, read.workload, read.variant, read.nodes, read.replication_factor) == \
        ("k8s", "bank", "kip-999", 12, 5)
    assert read.nemesis == ("kill", "flood") and read.acks == "all" and read.acks_all
    assert config_from_dict({"nemesis": "all"}, "x.yaml").nemesis == DEFAULT_NEMESIS
    assert config_from_dict({"nemesis": "none"}, "x.yaml").nemesis == ()


@pytest.mark.parametrize("nemesis", ["nemesis: all\n", "nemesis: [all]\n", ""])
def test_a_sim_run_s_all_is_the_simulator_s_fault_kinds_as_the_harness_ran_it(tmp_path: Path, nemesis: str) -> None:
    # A hand-written run test.yaml saying "all" (or nothing) on cluster sim was read as the
    # real backends' kinds: results.json and the report then named faults the run did not
    # have and left out the power, session and message faults it injected.
    stated = "".join(f"{key}: {value}\n" for key, value in
                     {"cluster": "sim", "nodes": 3, "workload": "queue", "topics": 2, "partitions": 3,
                      "replication_factor": 3, "min_insync_replicas": 2, "acks": "all"}.items())
    (tmp_path / "test.yaml").write_text(stated + nemesis)
    read = read_test_config(tmp_path / "test.yaml")
    ran = make_config({"cluster": "sim", **({"nemesis": "all"} if nemesis else {})})
    assert read is not None and read.nemesis == ran.nemesis == all_kinds("sim")
    assert read.name == ran.name == "queue-all-default"
    assert config_from_dict({"cluster": "docker", "nemesis": "all"}, "x.yaml").nemesis == DEFAULT_NEMESIS


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("acks: sometimes\n", "acks", "must be one of all, 1, 0, got 'sometimes'"),
        ("ack: 1\n", "ack", "unknown key"),
        ("nodes: three\n", "nodes", "expected a number, got 'three'"),
        ("partitions: 1.5\n", "partitions", "whole number"),
        ("min_insync_replicas: 0\n", "min_insync_replicas", "at least 1"),
        ("unclean_leader_election: maybe\n", "unclean_leader_election", "expected true or false"),
        ("nemesis: {kill: 1}\n", "nemesis", "got a mapping"),
        ("variant: [a, b]\n", "variant", "expected a string, got a list"),
        ("fault_duration: [5, 1]\n", "fault_duration", "greater than max"),
        ("seed: -1\n", "seed", "at least 0"),
        ("seed: '\u0663'\n", "seed", "got '\u0663', which Python reads as 3: write it in ASCII digits"),
        ("nodes: '\uff13'\n", "nodes", "which Python reads as 3"),
        ("seed: '3_0'\n", "seed", "got '3_0', which Python reads as 30"),
        ("time_limit: ' 10'\n", "time_limit", "got ' 10', which Python reads as 10.0"),
    ],
)
def test_a_malformed_test_yaml_names_the_file_and_the_key(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    path = tmp_path / "test.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        read_test_config(path)
    assert raised.value.key == key and raised.value.source == str(path)
    assert str(raised.value).startswith(f"{path}: {key}: ") and fragment in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("nodes: 3\nnemesis: [partition\n", "not valid YAML (line 3, column 1: "),
        ("- partition\n- kill\n", "expected a mapping, got a list"),
        (b"seed: \xff\xff\n", "not valid YAML ("),
        ("just words\n", "expected a mapping, got a string"),
    ],
)
def test_a_test_yaml_that_is_no_configuration_names_the_file(tmp_path: Path, content: str | bytes, fragment: str) -> None:
    path = tmp_path / "test.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ConfigError) as raised:
        read_test_config(path)
    assert raised.value.key is None
    assert str(raised.value).startswith(f"{path}: ") and fragment in str(raised.value)


def test_an_error_never_repeats_a_huge_or_nested_value() -> None:
    with pytest.raises(ConfigError) as raised:
        config_from_dict({"acks": "x" * 10_000}, "results.json: config")
    assert len(str(raised.value)) < 200
    deep: list = []
    for _ in range(900):
        deep = [deep]
    with pytest.raises(ConfigError, match="expected a number, got a list"):
        config_from_dict({"nodes": deep}, "results.json: config")


def test_the_contract_states_what_the_run_promised() -> None:
    assert TestConfig().acks_all and not TestConfig(acks=0).acks_all
    assert TestConfig().unclean_leader_election is False
    assert TestConfig().producer_retries_without_idempotence is False


def test_the_names_a_test_may_use_are_the_harness_s():
    from floodmark.contracts.run_config import KNOWN_NEMESIS, VARIANT_NAMES
    from floodmark.harness.config import ALL_KINDS
    from floodmark.reference.protocol.variants import VARIANTS

    assert tuple(VARIANTS) == VARIANT_NAMES
    assert KNOWN_NEMESIS == ALL_KINDS


@pytest.mark.parametrize("text", ["", "~\n", "{}\n", "# only a comment\n"])
def test_a_run_test_yaml_that_states_nothing_is_refused_not_read_as_the_defaults(tmp_path: Path, text: str) -> None:
    # The audit's F02: an emptied test.yaml turned an invalid run (acks=all, min.insync 3)
    # into a valid one judged by the defaults (min.insync 2).
    (tmp_path / "test.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"test.yaml: states no configuration"):
        read_test_config(tmp_path / "test.yaml")


def test_a_run_test_yaml_cut_short_is_refused_naming_what_it_does_not_state(tmp_path: Path) -> None:
    full = yaml.safe_dump(TestConfig(min_insync_replicas=3, seed=1).to_dict(), sort_keys=False)
    torn = full[:full.index("min_insync_replicas")]
    (tmp_path / "test.yaml").write_text(torn)
    with pytest.raises(ConfigError, match=r"test.yaml: min_insync_replicas: not stated \(nor acks\)"):
        read_test_config(tmp_path / "test.yaml")


@given(left_out=st.sets(st.sampled_from(sorted(TestConfig().to_dict()))))
@settings(max_examples=60, deadline=None)
def test_a_run_test_yaml_reads_exactly_when_it_states_every_setting_a_verdict_depends_on(
        tmp_path_factory: pytest.TempPathFactory, left_out: set[str]) -> None:
    values = {k: v for k, v in TestConfig(seed=5, acks=1).to_dict().items() if k not in left_out}
    path = tmp_path_factory.mktemp("run") / "test.yaml"
    path.write_text(yaml.safe_dump(values))
    if left_out & set(STATED_BY_EVERY_RUN):
        with pytest.raises(ConfigError, match="not stated|states no configuration"):
            read_test_config(path)
    else:
        read = read_test_config(path)
        assert read is not None and read.acks == 1  # what it states, never a default in its place


@given(seed=st.integers(min_value=0, max_value=2**63 - 1))
@example(seed=2**53 + 1)
@example(seed=2**53 - 1)
@settings(max_examples=200, deadline=None)
def test_a_seed_written_with_a_fraction_part_reads_as_written_or_is_refused(seed: int) -> None:
    """``seed: 12345678901234567.0`` read as the float nearest it, 12345678901234568: a run of
    another seed than the file says, and nothing told."""
    written = f"{seed}.0"
    try:
        read = config_from_dict(yaml.safe_load(f"seed: {written}"), "test.yaml").seed
    except ConfigError as e:
        assert "a number this large is not exact; write it as an integer" in str(e)
        assert seed >= 2**53
    else:
        assert read == seed


@given(text=st.text(st.characters(codec="utf-8"), max_size=8) | st.from_regex(r"[+-]?[0-9_ ]{1,6}", fullmatch=True),
       kind=st.sampled_from((int, float)))
@example(text="\u0663", kind=int)
@example(text="\u0661\u0660", kind=float)
@example(text="3_0", kind=int)
@settings(max_examples=300, deadline=None)
def test_a_number_written_as_a_string_reads_only_as_the_ascii_digits_show_it(text: str, kind: type) -> None:
    """Property: a string where a number belongs (``seed: "3"``) reads as the number its
    ASCII digits show or is refused; never as what Python's int() and float() also read (any
    script's digits: ``"\u0663"`` is 3; digit separators: ``"3_0"`` is 30; blanks around)."""
    key = "seed" if kind is int else "time_limit"
    try:
        read = getattr(config_from_dict({key: text}, "test.yaml"), key)
    except ConfigError:
        return
    assert text.isascii() and text.strip() == text and "_" not in text
    assert read == kind(text)
