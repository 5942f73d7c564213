"""Choosing a test: options and test files to a configuration the harness can run.

The configuration itself (:class:`~floodmark.contracts.run_config.TestConfig`, its fields and defaults,
and reading a run's ``test.yaml``) is a contract every part that reads runs shares. This
module is the harness's side of it: which backends, workloads, fault kinds and protocol
variants exist, which values and combinations of values a test may use, and the settings the
harness records rather than lets a test choose (unclean leader election follows from the
variant), so that checkers can read from the configuration what the run promised.

Configurations come from command-line options or from a YAML file (``floodmark run -f``)
whose keys are the field names (``replication_factor`` or ``replication-factor``). Bad values
are rejected with an error naming the key and the file, before anything starts; the saved
``test.yaml`` reads back through the same checks, so ``floodmark repro`` rebuilds the test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from floodmark.contracts.config_values import (
    MAX_SECONDS,
    ConfigError,
    fault_kind_words,
    read_name,
    read_number,
    read_range,
    read_run_id,
    shown_value,
    value_kind,
)
from floodmark.contracts.run_config import (
    DEFAULT_NEMESIS,
    NAMED_ONLY_NEMESIS,
    SIMULATED_NAMED_ONLY,
    SIMULATED_NEMESIS,
    WORKLOAD_NAMES,
    TestConfig,
    all_kinds,
    check_layout,
    check_stated,
    default_name,
    field_items,
    read_yaml_mapping,
)
from floodmark.harness.faults import UPGRADE_TARGET
from floodmark.reference.protocol import inter_broker_protocol as ibp
from floodmark.reference.protocol.variants import VARIANTS

CLUSTERS = ("docker", "local", "sim")
WORKLOADS = WORKLOAD_NAMES
# The fault kinds every backend applies ("all" on a real cluster), those only the simulator
# can, and those every backend applies but only a test that names them gets.
NEMESIS_KINDS = DEFAULT_NEMESIS
SIMULATED_KINDS = SIMULATED_NEMESIS + SIMULATED_NAMED_ONLY
NAMED_ONLY_KINDS = tuple(kind for kind in NAMED_ONLY_NEMESIS if kind not in SIMULATED_KINDS)
ALL_KINDS = NEMESIS_KINDS + SIMULATED_KINDS + NAMED_ONLY_KINDS
ACKS = ("all", 1, 0)
MAX_NODES = 9
# What one machine can run: more is a typo, and would only fail later (or never end).
MAX_LAYOUT = {"topics": 100, "partitions": 100, "replication_factor": MAX_NODES, "min_insync_replicas": MAX_NODES,
              "concurrency": 1000, "poll_max_records": 100_000}
MAX_RATE = 100_000.0  # client ops per second
# Kafka's linger.ms is milliseconds (5 by default since Kafka 4.0); a second of linger
# holds every send that long, which is a typo (ms read as seconds), not a test.
MAX_LINGER = 1.0
# Where the upgrade fault starts brokers when the test does not say (it takes them to UPGRADE_TARGET).
UPGRADE_FROM = ibp.LEGACY


def parse_nemesis(value: Any, source: str = "<options>") -> tuple[str, ...]:
    """`all`, `none`, `partition,kill` or a list of kinds -> a tuple of kinds in canonical order."""
    words = fault_kind_words(source, value, "expected a list of kinds or a comma-separated string, "
                                            f"got {value_kind(value)}")
    if words == ["all"]:
        return ALL_KINDS  # narrowed to what the cluster can apply by make_config
    unknown = [w for w in words if w not in ALL_KINDS]
    if unknown:
        raise ConfigError(
            source, "nemesis",
            f"unknown fault kind {unknown[0][:40]!r}; choose from {', '.join(ALL_KINDS)}, 'all' or 'none'",
        )
    return tuple(k for k in ALL_KINDS if k in words)


def _choice(source: str, key: str, value: Any, choices: tuple[Any, ...]) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int) or value not in choices:
        shown = repr(value) if isinstance(value, str | int) and len(repr(value)) <= 40 else value_kind(value)
        raise ConfigError(source, key, f"must be one of {', '.join(map(str, choices))}, got {shown}")
    return value


def make_config(values: Mapping[str, Any], source: str = "<options>", base: TestConfig | None = None) -> TestConfig:
    """Validate raw values (from YAML or options) on top of ``base`` (defaults when None)."""
    known = dict(field_items(values, source))
    base = base or TestConfig()
    name = known.pop("name", base.name if _custom_name(base) else "")
    if not isinstance(name, str | type(None)):
        raise ConfigError(source, "name", f"expected a string, got {value_kind(name)}")
    if name:
        name = read_name(source, "name", name)
    converted = {k: _convert(source, k, v) for k, v in known.items()}
    stated = {k: converted.pop(k) for k in RECORDED if k in converted}
    # "all" means every kind the backend applies: the default, or asked for in so many words.
    wants_all = (_is_all(known["nemesis"]) if "nemesis" in known
                 else set(base.nemesis) == set(all_kinds(base.cluster)))
    config = recorded_settings(dataclasses.replace(base, name=name or "", **converted))
    if wants_all:
        config = config.replace(nemesis=all_kinds(config.cluster))
    if ("upgrade" in config.nemesis and "inter_broker_protocol" not in known
            and config.inter_broker_protocol == ibp.DEFAULT):
        # An upgrade is from the protocol before KIP-343 unless the test chose where it starts.
        config = config.replace(inter_broker_protocol=UPGRADE_FROM)
    for key, value in stated.items():
        if getattr(config, key) != value:
            raise ConfigError(source, key, f"is recorded, not chosen: {RECORDED[key]}, so it is "
                                           f"{str(getattr(config, key)).lower()} here, not {str(value).lower()}")
    return validate(config, source)


def _is_all(value: Any) -> bool:
    return (isinstance(value, str) and value.strip() == "all") or \
        (isinstance(value, list | tuple) and [str(v).strip() for v in value] == ["all"])


# The settings the harness records rather than lets a test choose, and why they have the
# value they have: the reference enables what a variant switches on, and nothing else.
RECORDED = {
    "unclean_leader_election": "unclean leader election follows from the variant (unclean-election enables it)",
    "producer_retries_without_idempotence": "the reference producer never resends a send whose outcome it did not learn",
}

# Every setting that is true or false.
YES_OR_NO = (*RECORDED, "power_loss_tears")


def recorded_settings(config: TestConfig) -> TestConfig:
    """``config`` with the effective settings that follow from what the harness runs."""
    return config.replace(
        unclean_leader_election=VARIANTS[config.variant].unclean_leader_election,
        producer_retries_without_idempotence=False,
    )


def _custom_name(config: TestConfig) -> bool:
    return config.name != default_name(config)


def _convert(source: str, key: str, value: Any) -> Any:
    """Turn one raw value into the field's type, or raise ConfigError naming the key."""
    if key == "seed":
        return None if value is None else read_number(source, key, value, int, 0, 2**63 - 1)
    if key == "code_version":
        if not isinstance(value, str | int | float):
            raise ConfigError(source, key, f"expected a string, got {value_kind(value)}")
        return str(value)
    if key == "run_id":  # (the runner gives every run its own: a test file's is replaced)
        return read_run_id(source, key, value)
    if key == "cluster":
        return _choice(source, key, value, CLUSTERS)
    if key == "workload":
        return _choice(source, key, value, WORKLOADS)
    if key == "nemesis":
        return parse_nemesis(value, source)
    if key == "variant":
        if not isinstance(value, str):
            raise ConfigError(source, key, f"unknown variant: expected a name, got {value_kind(value)}; choose one "
                              f"of: {', '.join(VARIANTS)}")
        if value not in VARIANTS:
            shown = repr(value) if len(value) <= 40 else "a string"
            raise ConfigError(source, key, f"unknown variant {shown}; choose one of: {', '.join(VARIANTS)}")
        return value
    if key == "inter_broker_protocol":
        return _choice(source, key, value, ibp.VERSIONS)
    if key == "acks":
        if value in ("all", "-1", -1):
            return "all"
        if isinstance(value, str) and value in ("0", "1"):
            value = int(value)
        return _choice(source, key, value, ACKS)
    if key == "nodes":
        return read_number(source, key, value, int, 1, MAX_NODES)
    if key in MAX_LAYOUT:
        return read_number(source, key, value, int, 1, MAX_LAYOUT[key])
    if key in ("fault_duration", "quiet_period"):
        return read_range(source, key, value)
    if key in ("time_limit", "rate", "recovery_time", "op_timeout", "drain_timeout",
               "check_time_limit", "zk_session_timeout"):
        return read_number(source, key, value, float, 0.0 if key == "recovery_time" else 0.01,
                           MAX_RATE if key == "rate" else MAX_SECONDS)
    if key == "linger":
        return read_number(source, key, value, float, 0.0, MAX_LINGER)
    if key in YES_OR_NO:
        if not isinstance(value, bool):
            raise ConfigError(source, key, f"expected true or false, got {shown_value(value)}")
        return value
    raise ConfigError(source, key, "unknown key")  # pragma: no cover - FIELDS guards this


def validate(config: TestConfig, source: str = "<options>") -> TestConfig:
    """Check the relations between keys (each key alone was checked when converted)."""
    check_layout(config, source)
    simulated = [kind for kind in config.nemesis if kind in SIMULATED_KINDS]
    if simulated and config.cluster != "sim":
        raise ConfigError(
            source, "nemesis",
            f"the {config.cluster} backend cannot apply {', '.join(simulated)} faults; only --cluster sim can",
        )
    if config.power_loss_tears and config.cluster != "sim":
        raise ConfigError(source, "power_loss_tears", "only the simulator tears writes at a power loss "
                          "(--cluster sim); a real machine's disk decides that itself")
    if "upgrade" in config.nemesis and config.inter_broker_protocol in (UPGRADE_TARGET, ibp.TRUNCATE_ON_FETCH):
        already = ("which they run already" if config.inter_broker_protocol == UPGRADE_TARGET
                   else f"older than the {ibp.TRUNCATE_ON_FETCH} they run")
        raise ConfigError(source, "inter_broker_protocol",
                          f"the upgrade fault moves brokers to {UPGRADE_TARGET}, {already}; "
                          f"start them at {ibp.LEGACY} or {ibp.HEARTBEATS}")
    if config.workload == "queue" and config.concurrency < 2:
        raise ConfigError(source, "concurrency", "the queue workload needs at least 2 workers (a producer and a consumer)")
    return config


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> TestConfig:
    """Read a YAML test file, then apply ``overrides`` (command-line options win)."""
    config = make_config(read_yaml_mapping(path), str(path))
    if overrides:
        config = make_config(overrides, "command line", config)
    return config


def load_run_config(path: str | Path) -> TestConfig:
    """A run's own ``test.yaml``, to replay the run (repro, shrink): as :func:`load_config`
    reads a test file, and it must state every setting the run's verdict depends on, as the
    harness writes it; a key deleted by hand would otherwise replay as its default (3 brokers
    for a run of 5), and the replay would pass for the run's."""
    values = read_yaml_mapping(path)
    config = make_config(values, str(path))  # wrong keys and values first: they say more
    check_stated(values, str(path), "a replay runs what the run's own file states")
    return config


def dump_config(config: TestConfig, path: str | Path) -> None:
    """Write test.yaml (atomic, so a crash never leaves half a test definition)."""
    tmp = Path(f"{path}.tmp")
    note = ""
    if "upgrade" in config.nemesis:
        note = (f"# The upgrade fault rolls every broker from inter_broker_protocol (when a test does not\n"
                f"# choose it, {UPGRADE_FROM}) to {UPGRADE_TARGET}, twice, one broker at a time.\n")
    tmp.write_text(note + yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
    tmp.replace(path)
