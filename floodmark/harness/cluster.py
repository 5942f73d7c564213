"""The cluster: ZooKeeper plus N brokers, as *nodes* the harness can start, stop, kill and probe.

A node is a small machine with one process on it. The machine is a Docker container or a
network namespace; it has its own network stack (so iptables rules inside it cut exactly its
traffic), its own files and an address on the run's private network. The process is the
broker or the ZooKeeper server, which the harness starts, signals and restarts *inside* the
machine, so a restarted broker finds its data directory, its address and any partition rules
exactly as it left them, as a rebooted Kafka process on a real host would.

Every backend offers the same node-control interface (``Node``) and cluster interface
(``Cluster``), so nemeses and workloads never know which backend runs them:

- ``start()`` / ``stop(timeout)`` (SIGTERM, then SIGKILL) / ``kill()`` (SIGKILL) /
  ``pause()`` (SIGSTOP) / ``resume()`` (SIGCONT) / ``is_running()`` / ``pid()``;
- ``exec(argv, user=...)`` runs a command *on the machine* (root by default; ``user=BROKER_USER``
  runs it as the unprivileged user the broker runs as);
- ``copy_from`` / ``copy_to`` move files between the machine and the harness;
- ``inter_broker_protocol`` / ``set_inter_broker_protocol(version)``: the protocol version a
  broker starts at, changed for its next start on (an upgrade's roll; see
  ``floodmark.nemesis.upgrade``), so a broker restarted later by any fault keeps it.

Brokers always run unprivileged, so that a permission fault on their log directory really
denies them, and always under libfaketime, so that clock faults can move their wall clock
(see ``floodmark.nemesis.clock``).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from floodmark.run_dirs.rundir import RunDir

Role = Literal["broker", "zookeeper"]

BROKER_PORT = 9092
ZOOKEEPER_PORT = 2181
ZOOKEEPER_NODE = "zk"
# Runs commands as the user the broker process runs as (see Node.exec).
BROKER_USER = "broker"
# Every label/name the harness creates starts with this, so cleanup can find them.
NAME_PREFIX = "fm-"
RUN_LABEL = "floodmark.run"
OWNER_LABEL = "floodmark.owner"


class ClusterError(RuntimeError):
    """A cluster could not be set up or a node could not be controlled; says which and why."""


@dataclass(frozen=True)
class ExecResult:
    """What a command run on a node did."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: how many brokers, which variant, and the run they belong to."""

    brokers: int = 3
    variant: str = "default"
    run_id: str = field(default_factory=lambda: new_run_id())
    seed: int = 0
    log_dirs_per_broker: int = 2
    # Extra ``floodmark broker`` arguments (e.g. timeouts), appended verbatim.
    broker_args: tuple[str, ...] = ()
    ready_timeout: float = 60.0

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= 9:
            raise ValueError(f"brokers: must be between 1 and 9, got {self.brokers}")
        if not self.run_id.isalnum() or len(self.run_id) > 8:
            raise ValueError(f"run_id: must be at most 8 letters/digits, got {self.run_id!r}")


def new_run_id() -> str:
    """A short random id; short because Linux interface names are limited to 15 characters."""
    return secrets.token_hex(3)


def broker_name(broker_id: int) -> str:
    return f"n{broker_id}"


@runtime_checkable
class Node(Protocol):
    """One machine of the cluster with its one process (broker or ZooKeeper)."""

    @property
    def name(self) -> str: ...
    @property
    def role(self) -> Role: ...
    @property
    def broker_id(self) -> int | None: ...
    @property
    def ip(self) -> str:
        """The node's address on the run's private network (what iptables rules name)."""
        ...
    @property
    def address(self) -> str:
        """host:port the harness and the other nodes connect to."""
        ...
    @property
    def log_dirs(self) -> tuple[str, ...]:
        """The broker's log directories, as paths on the node (empty for ZooKeeper)."""
        ...
    @property
    def clock_file(self) -> str | None:
        """The libfaketime timestamp file on the node (None when the process is not faked)."""
        ...
    @property
    def events_path(self) -> str | None:
        """The broker's node-event file on the node (None for ZooKeeper)."""
        ...

    def start(self) -> None: ...
    def stop(self, timeout: float = 10.0) -> None: ...
    def kill(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def is_running(self) -> bool: ...
    def pid(self) -> int | None:
        """The process id as seen on the node (None when not running)."""
        ...
    def exec(self, argv: Sequence[str], user: str | None = None, timeout: float = 30.0) -> ExecResult: ...
    def copy_from(self, path: str, dest: Path) -> None: ...
    def copy_to(self, src: Path, path: str) -> None: ...
    def write_file(self, path: str, content: str, user: str | None = None) -> None:
        """Replace a file on the node atomically (readers never see half a file)."""
        ...
    @property
    def inter_broker_protocol(self) -> str | None:
        """The version the broker starts at (None: ZooKeeper, or a command that names none)."""
        ...
    def set_inter_broker_protocol(self, version: str) -> None:
        """From its next start on, the broker speaks ``version``."""
        ...


@runtime_checkable
class Cluster(Protocol):
    """ZooKeeper and the brokers of one run, with their private network."""

    @property
    def run_id(self) -> str: ...
    @property
    def nodes(self) -> Sequence[Node]: ...
    @property
    def brokers(self) -> Sequence[Node]: ...
    @property
    def zookeeper(self) -> Node: ...
    @property
    def zookeeper_address(self) -> str: ...
    @property
    def bootstrap_addresses(self) -> list[str]: ...

    def node(self, name: str) -> Node: ...
    def broker(self, broker_id: int) -> Node: ...
    def setup(self) -> None: ...
    def teardown(self, collect_into: RunDir | None = None) -> None: ...


def find_node(nodes: Sequence[Node], name: str) -> Node:
    for node in nodes:
        if node.name == name:
            return node
    raise KeyError(f"no node named {name!r}; nodes are {[n.name for n in nodes]}")


def find_broker(nodes: Sequence[Node], broker_id: int) -> Node:
    for node in nodes:
        if node.broker_id == broker_id:
            return node
    raise KeyError(f"no broker with id {broker_id}")


class NodeIdentity:
    """What every backend's node answers from the attributes it was made with.

    A backend's node sets ``_name``, ``_role``, ``_broker_id``, ``_ip``, ``_port``,
    ``_log_dirs`` and ``_clock_file``; how it runs its process is its own business.
    """

    _name: str
    _role: Role
    _broker_id: int | None
    _ip: str
    _port: int
    _log_dirs: tuple[str, ...]
    _clock_file: str | None

    name = property(lambda self: self._name)
    role = property(lambda self: self._role)
    broker_id = property(lambda self: self._broker_id)
    ip = property(lambda self: self._ip)
    log_dirs = property(lambda self: self._log_dirs)
    clock_file = property(lambda self: self._clock_file)

    @property
    def address(self) -> str:
        return f"{self._ip}:{self._port}"


PROTOCOL_OPTION = "--inter-broker-protocol"


class ProcessCommand:
    """The inter-broker protocol of a node whose process is started from ``argv``: read from
    and written into its ``--inter-broker-protocol`` option (appended when it has none)."""

    argv: list[str]
    _role: Role

    @property
    def inter_broker_protocol(self) -> str | None:
        if self._role != "broker":
            return None
        return option_value(self.argv, PROTOCOL_OPTION)

    def set_inter_broker_protocol(self, version: str) -> None:
        if self._role != "broker":
            raise ClusterError(f"{' '.join(self.argv[:1])}: only a broker speaks an inter-broker protocol")
        self.argv = with_option(self.argv, PROTOCOL_OPTION, version)


def option_value(argv: Sequence[str], option: str) -> str | None:
    """The value of the last ``option value`` pair in ``argv`` (the one argparse keeps)."""
    found = None
    for position, word in enumerate(argv[:-1]):
        if word == option:
            found = argv[position + 1]
    return found


def with_option(argv: Sequence[str], option: str, value: str) -> list[str]:
    """``argv`` with every ``option`` set to ``value``, or with the pair appended."""
    changed = list(argv)
    positions = [p for p, word in enumerate(changed[:-1]) if word == option]
    for position in positions:
        changed[position + 1] = value
    return changed if positions else [*changed, option, value]


class NodeRoster:
    """What every backend's cluster answers from its list of nodes (ZooKeeper first).

    A backend sets ``spec`` and keeps its nodes in ``_nodes``; this supplies the lookups of
    the ``Cluster`` protocol, so the backends differ only in how they make and run nodes.
    """

    spec: ClusterSpec
    _nodes: Sequence[Node]

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes)

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self._nodes if n.role == "broker"]

    @property
    def zookeeper(self) -> Node:
        return self.node(ZOOKEEPER_NODE)

    @property
    def zookeeper_address(self) -> str:
        return self.zookeeper.address

    @property
    def bootstrap_addresses(self) -> list[str]:
        return [b.address for b in self.brokers]

    def node(self, name: str) -> Node:
        return find_node(self._nodes, name)

    def broker(self, broker_id: int) -> Node:
        return find_broker(self._nodes, broker_id)


def broker_argv(
    python: str,
    broker_id: int,
    zookeeper: str,
    log_dirs: Sequence[str],
    listen: str,
    events: str,
    spec: ClusterSpec,
) -> list[str]:
    """The command line of one broker process.

    It goes through ``floodmark.reference.real.process`` directly rather than the ``floodmark``
    command, so a node needs only the reference's dependencies (kazoo), not the harness's.
    """
    return [
        python, "-c",
        "import sys; from floodmark.reference.real.process import main; sys.exit(main(sys.argv[1:]))",
        "--id", str(broker_id), "--zookeeper", zookeeper, "--log-dirs", ",".join(log_dirs),
        "--listen", listen, "--advertise", listen, "--events", events,
        "--variant", spec.variant, "--seed", str(spec.seed + broker_id),
        *spec.broker_args,
    ]


def standin_argv(command: Sequence[str], port: int, broker_id: int) -> list[str]:
    """A replacement broker command (tests), with ``{port}`` and ``{id}`` filled in."""
    return [a.replace("{port}", str(port)).replace("{id}", str(broker_id)) for a in command]


ZOOKEEPER_CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"


def zookeeper_config(data_dir: str, port: int = ZOOKEEPER_PORT) -> str:
    """A standalone zoo.cfg: no admin server, no four-letter words, short ticks."""
    return "\n".join([
        "tickTime=500",
        "initLimit=10",
        "syncLimit=5",
        f"dataDir={data_dir}",
        f"clientPort={port}",
        "clientPortAddress=0.0.0.0",
        "admin.enableServer=false",
        "4lw.commands.whitelist=",
        "maxSessionTimeout=60000",
        "minSessionTimeout=1000",
        "",
    ])


def zookeeper_argv(java: str, config_path: str) -> list[str]:
    return [java, "-Xmx256m", "-cp", ZOOKEEPER_CLASSPATH,
            "org.apache.zookeeper.server.ZooKeeperServerMain", config_path]
