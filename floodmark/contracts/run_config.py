"""The run configuration: what one chaos test was, as every part that reads runs sees it.

A test is named by what it does: which cluster backend and how many nodes, which workload at
what rate and concurrency, which faults, for how long, against which protocol variant, with
which topic layout and durability settings. Together with the seed this decides every choice
the harness makes, so the configuration plus the seed *is* the test: the harness saves it as
``test.yaml`` in the run directory and copies it into ``results.json``.

The configuration also records the effective settings that decide what Kafka's contract
promises the run: ``acks``, ``min_insync_replicas``, whether unclean leader election was
enabled, and whether the producer could write a record twice. Checkers, reports and the
pipeline read those here, so they judge a run by what it states, not by knowing the
implementation that ran it (the same checkers judge foreign Jepsen histories).

This module is a contract, below everything else: it describes and reads a configuration.
Choosing one (options and test files checked against the backends, workloads, fault kinds
and variants the harness has) is :mod:`floodmark.harness.config`'s business. Reading a run's
``test.yaml`` checks the types of the values only, so a run stays readable whatever it ran;
a key this version does not know, or a value of the wrong type, is a :class:`ConfigError`
naming the file and the key; a reader that judges the run also checks its names
(:func:`check_names`: the workload, the variant and the fault kinds), as the harness does before it runs
one. A run that states no configuration at all (no ``test.yaml``, a foreign history) has
none: readers get ``None``, never defaults that would claim settings nobody stated
(acks=all, say). A ``test.yaml`` that is there but cannot be read (a symbolic link to
nothing or in a loop, a directory) is a ConfigError, never taken for no configuration. Keys a ``test.yaml`` leaves out take the defaults below,
which is what the harness does with such a file; ``test.yaml`` files written before a key
existed read the same way (an old file without ``unclean_leader_election`` states it off).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from floodmark.contracts.config_values import (
    MAX_COUNT,
    MAX_RATE,
    MAX_SECONDS,
    YAML_WORDS,
    ConfigError,
    fault_kind_words,
    read_acks,
    read_name,
    read_number,
    read_range,
    read_run_id,
    shown_value,
    value_kind,
)
from floodmark.errors import SourceError
from floodmark.inputs.safe_yaml import describe_error, load_yaml
from floodmark.inputs.sources import special_file_problem

# The faults a test injects unless it names others (every kind the real backends apply),
# also the order in which a configuration lists fault kinds; kinds not listed here follow,
# by name. A test whose faults are exactly these is named "all".
DEFAULT_NEMESIS: tuple[str, ...] = ("partition", "clock", "pause", "disk", "kill", "admin")
# The kinds only the simulator applies; with them, "all" on ``cluster: sim``.
SIMULATED_NEMESIS: tuple[str, ...] = ("power", "session", "message")
# Kinds that "all" leaves out and a test names to get: added after "all" was fixed, so every
# test and seed written against "all" keeps its schedule (explore draws the simulator's on
# its own, see ``run.explore``). ``stall`` and ``failover`` (a group of faults aimed at one
# partition's roles) only the simulator applies; ``upgrade`` (a double roll to KIP-343)
# every backend does.
SIMULATED_NAMED_ONLY: tuple[str, ...] = ("stall", "failover")
NAMED_ONLY_NEMESIS: tuple[str, ...] = (*SIMULATED_NAMED_ONLY, "upgrade")
# Every fault kind a test may name, in the order a configuration lists them.
KNOWN_NEMESIS: tuple[str, ...] = (*DEFAULT_NEMESIS, *SIMULATED_NEMESIS, *NAMED_ONLY_NEMESIS)
# The protocol variants a test may name. What each does is the reference implementation's
# business (floodmark.reference.protocol.variants, which a test holds to this list): a
# reader of runs needs only the names, to refuse a test.yaml that names another.
VARIANT_NAMES: tuple[str, ...] = (
    "default", "truncate-to-hw", "no-kip-279", "unfenced-fetch", "isr-admission-below-epoch",
    "unconditional-isr-write", "no-controller-epoch-check", "unclean-election", "acks-all-isr-of-one",
    "no-kip-966", "stale-isr-change-accepted",
)

# The workloads a test may name: which checkers judge a run follows from it.
WORKLOAD_NAMES: tuple[str, ...] = ("queue", "log-lin")


@dataclass(frozen=True)
class TestConfig:
    """One chaos test. Defaults give a meaningful 60-second queue test under every fault."""

    __test__ = False  # not a pytest test class, despite the name

    name: str = ""  # derived from workload, nemesis and variant when empty
    seed: int | None = None  # chosen at random (and printed) when None
    cluster: str = "docker"
    nodes: int = 3
    workload: str = "queue"
    nemesis: tuple[str, ...] = DEFAULT_NEMESIS
    time_limit: float = 60.0  # seconds of workload under faults
    variant: str = "default"
    topics: int = 2  # named t0 .. t{topics-1}
    partitions: int = 3  # per topic
    replication_factor: int = 3
    min_insync_replicas: int = 2
    acks: str | int = "all"
    rate: float = 200.0  # client ops per second, over all workers
    concurrency: int = 8  # client workers
    # Harness timing (seconds).
    recovery_time: float = 30.0  # at most this long after the final heal-all, before the final drain
    fault_duration: tuple[float, float] = (3.0, 12.0)  # a fault lasts between these
    quiet_period: tuple[float, float] = (3.0, 8.0)  # no fault between faults
    op_timeout: float = 5.0  # a client op with no answer by then ends "info" (or "fail" for reads)
    drain_timeout: float = 60.0  # the final drain gives up on a partition after this
    check_time_limit: float = 120.0  # searching checkers answer "unknown" past this
    zk_session_timeout: float = 6.0  # brokers' ZooKeeper session timeout (pauses straddle it)
    # Kafka's linger.ms, in seconds: how long the producer holds a partition's batch open for
    # more sends (0: only the sends of the same event-loop turn share a batch). Kafka 4.0
    # made 5 ms its default (KIP-1030); ours stays 0 so every earlier run and seed replays.
    linger: float = 0.0
    # Kafka's max.poll.records: the most records a consumer's poll takes of each partition it
    # reads. With 100 the consumers keep up with the producers; with a few they fall behind
    # the high watermark, so their position's advance past a short read is exercised too.
    poll_max_records: int = 100
    # On the simulator, whether a power loss keeps a random prefix of each file's unsynced
    # bytes (a page cache that wrote some back, cut anywhere: torn records for log recovery
    # to cut) instead of none. Off by default so that every earlier run and seed replays.
    power_loss_tears: bool = False
    # Which generation of the inter-broker protocol every broker speaks: legacy (no heartbeats,
    # the leader writes ISR changes to ZooKeeper), heartbeats (KIP-343's heartbeats and
    # self-fencing) or kip-343 (ISR changes proposed to the controller).
    inter_broker_protocol: str = "heartbeats"
    # Recorded, not chosen: the floodmark code version that ran the test (set by the runner,
    # so a repro records the version it actually ran).
    code_version: str = ""
    # Recorded, not chosen: the run's id, which every broker it started names in its node
    # events (see floodmark.contracts.run_ids), so that events of another run are told from
    # its own. None: a run from before run ids (a test file's own is replaced by the runner's).
    run_id: str | None = None
    # Recorded, not chosen: effective settings that follow from what ran. Kafka's
    # unclean.leader.election.enable (an out-of-sync replica may become leader, losing what
    # it lacked); the harness derives it from the variant.
    unclean_leader_election: bool = False
    # Kafka's retries without enable.idempotence: the producer may send a record again after
    # an attempt whose outcome it did not learn, so a record may be written twice. The
    # reference producer never does (it reports such a send as unknown).
    producer_retries_without_idempotence: bool = False

    def __post_init__(self) -> None:
        # One spelling per set of kinds, so equal tests compare (and are named) equal.
        order = {kind: position for position, kind in
                 enumerate(DEFAULT_NEMESIS + SIMULATED_NEMESIS + NAMED_ONLY_NEMESIS)}
        object.__setattr__(self, "nemesis", tuple(sorted(set(self.nemesis), key=lambda k: (order.get(k, len(order)), k))))
        if not self.name:
            object.__setattr__(self, "name", default_name(self))

    @property
    def topic_names(self) -> tuple[str, ...]:
        return tuple(f"t{i}" for i in range(self.topics))

    @property
    def topic_partitions(self) -> tuple[tuple[str, int], ...]:
        """Every (topic, partition) of the test, in a fixed order."""
        return tuple((t, p) for t in self.topic_names for p in range(self.partitions))

    @property
    def acks_code(self) -> int:
        """The produce request's acks field: -1 for "all"."""
        return -1 if self.acks == "all" else int(self.acks)

    @property
    def acks_all(self) -> bool:
        """Whether every acknowledgement waited for the whole ISR (the only durable setting)."""
        return self.acks == "all"

    def replace(self, **changes: Any) -> TestConfig:
        """A copy with ``changes``; a derived name is derived again from the new values."""
        if "name" not in changes and self.name == default_name(self):
            changes["name"] = ""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for test.yaml and results.json (lists, not tuples)."""
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            d[f.name] = list(value) if isinstance(value, tuple) else value
        return d


def all_kinds(cluster: str) -> tuple[str, ...]:
    """What "all" fault kinds are on a backend: every kind it can apply."""
    return DEFAULT_NEMESIS + SIMULATED_NEMESIS if cluster == "sim" else DEFAULT_NEMESIS


def default_name(config: TestConfig) -> str:
    faults = "+".join(config.nemesis) if config.nemesis else "none"
    if set(config.nemesis) == set(all_kinds(config.cluster)):
        faults = "all"
    return f"{config.workload}-{faults}-{config.variant}"


FIELDS: dict[str, dataclasses.Field[Any]] = {f.name: f for f in dataclasses.fields(TestConfig)}


# --- reading -------------------------------------------------------------------------------


# What a run's verdict depends on, stated in every ``test.yaml`` the harness has ever written
# (it writes every key). A run's file without one of them was cut short or written by hand,
# and defaults in its place would claim settings nobody stated.
STATED_BY_EVERY_RUN: tuple[str, ...] = ("nodes", "workload", "topics", "partitions", "replication_factor",
                                        "min_insync_replicas", "acks")


def read_test_config(path: str | Path) -> TestConfig | None:
    """A run's ``test.yaml`` as its configuration, or None when the run has no such file
    (a symbolic link that leads nowhere is a file that cannot be read: a ConfigError).

    Unlike a test definition a user writes (``floodmark run -f``), a run's file must state
    each of :data:`STATED_BY_EVERY_RUN`: an empty one, or one cut short, is a ConfigError
    naming what it leaves out, never read as the defaults."""
    if not os.path.lexists(path):
        return None
    source = str(path)
    special = special_file_problem(path)  # a FIFO or a device is named at once, never waited on
    if special is not None:
        raise ConfigError(source, None, special)
    values = read_yaml_mapping(path)
    config = config_from_dict(values, source)  # wrong keys and values first: they say more
    check_stated(values, source, "remove it to check the run without one")
    return config


def read_run_config(path: str | Path) -> TestConfig | None:
    """A run's ``test.yaml`` (:func:`read_test_config`) held to what a test may name and to a
    layout its cluster can hold (:func:`check_names`, :func:`check_layout`): what every reader
    that judges a run from it (``check``, ``analyze``) requires alike, so no run is judged by
    one and refused by another."""
    config = read_test_config(path)
    if config is not None:
        check_layout(check_names(config, str(path)), str(path))
    return config


def check_stated(values: Mapping[Any, Any], source: str, instead: str) -> None:
    """A ConfigError unless a run's ``test.yaml`` ``values`` state each of
    :data:`STATED_BY_EVERY_RUN`; ``instead`` says what to do with an empty one."""
    if not values:
        raise ConfigError(source, None, f"states no configuration (an empty file): a run's test.yaml states "
                                        f"every setting; {instead}")
    stated = {str(key).replace("-", "_") for key in values}
    missing = [key for key in STATED_BY_EVERY_RUN if key not in stated]
    if missing:
        others = f" (nor {', '.join(missing[1:])})" if missing[1:] else ""
        raise ConfigError(source, missing[0], f"not stated{others}: a run's test.yaml states every setting its "
                                              "verdict depends on; this one was cut short or written by hand")


def check_names(config: TestConfig, source: str) -> TestConfig:
    """``config`` if its workload, variant and fault kinds are ones a test may name; else a
    ConfigError naming ``source`` and the key, in the harness's words."""
    if config.workload not in WORKLOAD_NAMES:
        raise ConfigError(source, "workload", f"unknown workload {shown_value(config.workload)}; choose one of: "
                                              f"{', '.join(WORKLOAD_NAMES)}")
    if config.variant not in VARIANT_NAMES:
        raise ConfigError(source, "variant", f"unknown variant {shown_value(config.variant)}; choose one of: "
                                             f"{', '.join(VARIANT_NAMES)}")
    unknown = [kind for kind in config.nemesis if kind not in KNOWN_NEMESIS]
    if unknown:
        raise ConfigError(source, "nemesis", f"unknown fault kind {unknown[0][:40]!r}; choose from "
                                             f"{', '.join(KNOWN_NEMESIS)}, 'all' or 'none'")
    return config


def check_layout(config: TestConfig, source: str) -> TestConfig:
    """``config`` if its replicas fit its cluster: a replication factor of at most its nodes, a
    min.insync of at most its replication factor; else a ConfigError naming ``source`` and
    the key. No run has another layout (the harness refuses it), and a verdict judged by one
    (every acknowledgement below min.insync) would say nothing of the run."""
    if config.replication_factor > config.nodes:
        raise ConfigError(
            source, "replication_factor",
            f"{config.replication_factor} is more than the {config.nodes} nodes of the cluster (nodes): a "
            "partition cannot have more replicas than there are brokers to hold them",
        )
    if config.min_insync_replicas > config.replication_factor:
        raise ConfigError(
            source, "min_insync_replicas",
            f"{config.min_insync_replicas} is more than the replication factor {config.replication_factor} "
            "(replication_factor): Kafka accepts such a topic, but no acks=all send to it can ever succeed "
            "(NOT_ENOUGH_REPLICAS), so the test would test nothing",
        )
    return config


MAX_CONFIG_BYTES = 1 << 20  # a test definition is a few hundred bytes; more is not one


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """A YAML file of configuration keys (an empty file has none); raises ConfigError.

    The file is read once and at most :data:`MAX_CONFIG_BYTES` (so ``-f /dev/zero`` or a FIFO
    is refused, not read for ever); it must be UTF-8, and a key given twice is refused."""
    from floodmark.inputs.sources import decode_utf8, read_source

    source = str(path)
    try:
        data_bytes = read_source(source, limit=MAX_CONFIG_BYTES)
    except SourceError as e:
        raise ConfigError(source, None, e.problem) from None
    try:
        text = decode_utf8(data_bytes, source)
    except SourceError as e:
        raise ConfigError(source, None, f"not valid YAML (line {e.line}: {e.problem})") from None
    try:
        data = load_yaml(text, source)
    except yaml.YAMLError as e:
        raise ConfigError(source, None, f"not valid YAML ({describe_error(e)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(source, None, f"expected a mapping, got {value_kind(data)}")
    return data


def unknown_key(source: str, raw_key: Any) -> ConfigError:
    """The error for a key no configuration has, with the nearest known key if one is close."""
    import difflib

    key = YAML_WORDS[raw_key] if raw_key is None or isinstance(raw_key, bool) else str(raw_key)
    shown = key if len(key) <= 40 else key[:37] + "..."
    close = difflib.get_close_matches(key.replace("-", "_"), list(FIELDS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(FIELDS)}"
    return ConfigError(source, shown, f"unknown key{hint}")


def config_from_dict(values: Mapping[Any, Any], source: str) -> TestConfig:
    """Values as ``test.yaml`` (or the copy in ``results.json``) holds them, type-checked.

    Keys may be spelled with dashes; absent keys take the defaults. Raises ConfigError
    naming ``source`` and the key for an unknown key or a value of the wrong type.

    ``nemesis: all``, or no ``nemesis`` at all, is every kind the stated ``cluster`` applies,
    as the harness reads it when it runs the test (:func:`all_kinds`): a simulator run's
    "all" includes power, session and message faults.
    """
    items = dict(field_items(values, source))
    config = TestConfig(**{key: _typed(source, key, value) for key, value in items.items()})
    if "nemesis" not in items or fault_kind_words(source, items["nemesis"], "") == ["all"]:
        config = config.replace(nemesis=all_kinds(config.cluster))
    return config


def field_items(values: Mapping[Any, Any], source: str) -> Iterator[tuple[str, Any]]:
    """Each key as its field's name (dashes read as underscores) with its value, in order.

    A key no field has, or one given in both spellings, is a ConfigError naming ``source``.
    """
    seen: set[str] = set()
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in FIELDS:
            raise unknown_key(source, raw_key)
        if key in seen:
            raise ConfigError(source, key, "given twice (as dashes and as underscores)")
        seen.add(key)
        yield key, value


_WHOLE = ("nodes", "topics", "partitions", "replication_factor", "min_insync_replicas", "concurrency",
          "poll_max_records")
_SECONDS = ("time_limit", "rate", "recovery_time", "op_timeout", "drain_timeout", "check_time_limit",
            "zk_session_timeout", "linger")
_WORDS = ("cluster", "workload", "variant", "inter_broker_protocol")
_FLAGS = ("unclean_leader_election", "producer_retries_without_idempotence", "power_loss_tears")


def _typed(source: str, key: str, value: Any) -> Any:
    """One value in its field's type (the harness checks which values it can run)."""
    if key == "name":
        if value is None:
            return ""
        return read_name(source, key, _text(source, key, value))
    if key == "seed":
        return None if value is None else read_number(source, key, value, int, 0, 2**63 - 1)
    if key == "code_version":
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(source, key, f"expected a string, got {value_kind(value)}")
        return str(value)
    if key == "run_id":
        return read_run_id(source, key, value)
    if key in _WORDS:
        return read_name(source, key, _text(source, key, value))
    if key == "nemesis":
        return fault_kinds(source, value)
    if key == "acks":
        return read_acks(source, key, value)
    if key in _WHOLE:
        return read_number(source, key, value, int, 1, MAX_COUNT)
    if key in _SECONDS:
        return read_number(source, key, value, float, 0.0, MAX_RATE if key == "rate" else MAX_SECONDS)
    if key in ("fault_duration", "quiet_period"):
        return read_range(source, key, value)
    if key in _FLAGS:
        if not isinstance(value, bool):
            raise ConfigError(source, key, f"expected true or false, got {shown_value(value)}")
        return value
    raise ConfigError(source, key, "unknown key")  # pragma: no cover - FIELDS guards this


def _text(source: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(source, key, f"expected a string, got {value_kind(value)}")
    return value


def fault_kinds(source: str, value: Any) -> tuple[str, ...]:
    """Fault kinds as a list or a comma-separated string; ``none`` is none, ``all`` the defaults."""
    words = fault_kind_words(source, value, f"expected a list of fault kinds, got {shown_value(value)}")
    return DEFAULT_NEMESIS if words == ["all"] else tuple(words)


