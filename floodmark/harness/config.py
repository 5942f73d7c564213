"""The test configuration: everything that defines one chaos test, and nothing that varies by run.

A test is named by what it does: which cluster backend and how many nodes, which workload at
what rate and concurrency, which faults, for how long, against which protocol variant, with
which topic layout and durability settings (replication factor, min.insync.replicas, acks).
Together with the seed this decides every choice the harness makes, so the configuration
plus the seed *is* the test: it is saved as ``test.yaml`` in the run directory and copied
into ``results.json``, and ``floodmark repro`` rebuilds the same test from it.

Configurations come from command-line options or from a YAML file (``floodmark run -f``)
whose keys are the field names below (``replication_factor`` or ``replication-factor``).
Bad values are rejected with an error naming the key and the file, before anything starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from floodmark.reference.protocol.variants import VARIANTS
from floodmark.safe_yaml import load_yaml

CLUSTERS = ("docker", "local")
WORKLOADS = ("queue", "log-lin")
NEMESIS_KINDS = ("partition", "clock", "pause", "disk", "kill")
ACKS = ("all", 1, 0)
MAX_NODES = 9


class ConfigError(ValueError):
    """A configuration value that cannot be used: names the source, the key and the problem."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        super().__init__(f"{source}: {key}: {problem}")
        self.source = source
        self.key = key
        self.problem = problem


@dataclass(frozen=True)
class TestConfig:
    """One chaos test. Defaults give a meaningful 60-second queue test under every fault."""

    __test__ = False  # not a pytest test class, despite the name

    name: str = ""  # derived from workload, nemesis and variant when empty
    seed: int | None = None  # chosen at random (and printed) when None
    cluster: str = "docker"
    nodes: int = 3
    workload: str = "queue"
    nemesis: tuple[str, ...] = NEMESIS_KINDS
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
    # Recorded, not chosen: the floodmark code version that ran the test (set by the runner,
    # so a repro records the version it actually ran).
    code_version: str = ""

    def __post_init__(self) -> None:
        # One spelling per set of kinds, so equal tests compare (and are named) equal.
        order = {kind: position for position, kind in enumerate(NEMESIS_KINDS)}
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


def default_name(config: TestConfig) -> str:
    faults = "+".join(config.nemesis) if config.nemesis else "none"
    if set(config.nemesis) == set(NEMESIS_KINDS):
        faults = "all"
    return f"{config.workload}-{faults}-{config.variant}"


FIELDS: dict[str, dataclasses.Field[Any]] = {
    f.name: f for f in dataclasses.fields(TestConfig)
}


def parse_nemesis(value: Any, source: str = "<options>") -> tuple[str, ...]:
    """`all`, `none`, `partition,kill` or a list of kinds -> a tuple of kinds in canonical order."""
    if value is None:
        return ()
    if isinstance(value, str):
        words = [w.strip() for w in value.split(",") if w.strip()]
    elif isinstance(value, list | tuple):
        words = [str(w).strip() for w in value]
    else:
        raise ConfigError(source, "nemesis", f"expected a list of kinds or a comma-separated string, got {value!r}")
    if words == ["all"]:
        return NEMESIS_KINDS
    if words in ([], ["none"]):
        return ()
    unknown = [w for w in words if w not in NEMESIS_KINDS]
    if unknown:
        raise ConfigError(
            source, "nemesis",
            f"unknown fault kind {unknown[0]!r}; choose from {', '.join(NEMESIS_KINDS)}, 'all' or 'none'",
        )
    return tuple(k for k in NEMESIS_KINDS if k in words)


def _number(source: str, key: str, value: Any, kind: type, minimum: float, maximum: float | None = None) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str):
            try:
                value = kind(value)
            except ValueError:
                raise ConfigError(source, key, f"expected a number, got {value!r}") from None
        else:
            raise ConfigError(source, key, f"expected a number, got {value!r}")
    if kind is int and isinstance(value, float):
        if not value.is_integer():
            raise ConfigError(source, key, f"expected a whole number, got {value!r}")
        value = int(value)
    if value < minimum:
        raise ConfigError(source, key, f"must be at least {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(source, key, f"must be at most {maximum}, got {value!r}")
    return kind(value)


def _range(source: str, key: str, value: Any) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ConfigError(source, key, f"expected [min, max] in seconds, got {value!r}")
    low = _number(source, key, value[0], float, 0.1)
    high = _number(source, key, value[1], float, 0.1)
    if low > high:
        raise ConfigError(source, key, f"min {low} is greater than max {high}")
    return (low, high)


def _choice(source: str, key: str, value: Any, choices: tuple[Any, ...]) -> Any:
    if value not in choices:
        raise ConfigError(source, key, f"must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def make_config(values: Mapping[str, Any], source: str = "<options>", base: TestConfig | None = None) -> TestConfig:
    """Validate raw values (from YAML or options) on top of ``base`` (defaults when None)."""
    known: dict[str, Any] = {}
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in FIELDS:
            raise ConfigError(source, str(raw_key), f"unknown key; known keys: {', '.join(FIELDS)}")
        known[key] = value
    base = base or TestConfig()
    name = known.pop("name", base.name if _custom_name(base) else "")
    if not isinstance(name, str | type(None)):
        raise ConfigError(source, "name", f"expected a string, got {name!r}")
    converted = {k: _convert(source, k, v) for k, v in known.items()}
    config = dataclasses.replace(base, name=name or "", **converted)
    return validate(config, source)


def _custom_name(config: TestConfig) -> bool:
    return config.name != default_name(config)


def _convert(source: str, key: str, value: Any) -> Any:
    """Turn one raw value into the field's type, or raise ConfigError naming the key."""
    if key == "seed":
        return None if value is None else _number(source, key, value, int, 0, 2**63 - 1)
    if key == "code_version":
        if not isinstance(value, str | int | float):
            raise ConfigError(source, key, f"expected a string, got {type(value).__name__}")
        return str(value)
    if key == "cluster":
        return _choice(source, key, value, CLUSTERS)
    if key == "workload":
        return _choice(source, key, value, WORKLOADS)
    if key == "nemesis":
        return parse_nemesis(value, source)
    if key == "variant":
        if value not in VARIANTS:
            raise ConfigError(source, key, f"unknown variant {value!r}; choose one of: {', '.join(VARIANTS)}")
        return value
    if key == "acks":
        if value in ("all", "-1", -1):
            return "all"
        if isinstance(value, str) and value in ("0", "1"):
            value = int(value)
        return _choice(source, key, value, ACKS)
    if key == "nodes":
        return _number(source, key, value, int, 1, MAX_NODES)
    if key in ("topics", "partitions", "replication_factor", "min_insync_replicas", "concurrency"):
        return _number(source, key, value, int, 1)
    if key in ("fault_duration", "quiet_period"):
        return _range(source, key, value)
    if key in ("time_limit", "rate", "recovery_time", "op_timeout", "drain_timeout",
               "check_time_limit", "zk_session_timeout"):
        return _number(source, key, value, float, 0.0 if key == "recovery_time" else 0.01)
    raise ConfigError(source, key, "unknown key")  # pragma: no cover - FIELDS guards this


def validate(config: TestConfig, source: str = "<options>") -> TestConfig:
    """Check the relations between keys (each key alone was checked when converted)."""
    if config.replication_factor > config.nodes:
        raise ConfigError(
            source, "replication_factor",
            f"{config.replication_factor} is more than the {config.nodes} nodes of the cluster",
        )
    if config.min_insync_replicas > config.replication_factor:
        raise ConfigError(
            source, "min_insync_replicas",
            f"{config.min_insync_replicas} is more than the replication factor {config.replication_factor}",
        )
    if config.workload == "queue" and config.concurrency < 2:
        raise ConfigError(source, "concurrency", "the queue workload needs at least 2 workers (a producer and a consumer)")
    return config


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> TestConfig:
    """Read a YAML test file, then apply ``overrides`` (command-line options win)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(source, "-", f"cannot read the file ({e.strerror})") from None
    try:
        data = load_yaml(text, source)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "somewhere"
        raise ConfigError(source, "-", f"not valid YAML at {where}: {getattr(e, 'problem', e)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, "-", f"expected a mapping of keys to values, got {type(data).__name__}")
    config = make_config(data, source)
    if overrides:
        config = make_config(overrides, "command line", config)
    return config


def dump_config(config: TestConfig, path: str | Path) -> None:
    """Write test.yaml (atomic, so a crash never leaves half a test definition)."""
    tmp = Path(f"{path}.tmp")
    tmp.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
    tmp.replace(path)
