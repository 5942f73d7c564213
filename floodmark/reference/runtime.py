"""The runtime boundary: everything protocol code may touch, and nothing else.

Protocol code in ``floodmark.reference`` (log, partition, broker, controller, client) never
opens a socket, reads a clock, calls kazoo, touches ``os`` or uses a global random generator.
It is handed a :class:`Runtime` and uses only that. Two runtimes implement it:

* the **real** runtime (``reference.real``): asyncio, TCP with length-prefixed frames, kazoo
  against a real ZooKeeper (its thread callbacks marshalled onto the event loop), real files;
* the **simulated** runtime (``reference.sim``): one process, virtual time, a simulated
  network that can drop and partition, an in-memory ZooKeeper with sessions, ephemerals,
  versions, watches and multi, and a disk that loses unsynced writes on a crash. It is
  deterministic: the same seed gives the same run.

Both run protocol coroutines on an asyncio event loop (the simulated one has virtual time),
so protocol code is ordinary ``async`` Python: it awaits ``runtime.sleep``,
``runtime.request`` and the coordination calls, and starts background work with
``runtime.spawn``. Wall time is where clock faults land; protocol code uses it where Kafka
uses wall time (replica lag), and the monotonic clock for everything else.

Errors cross the boundary as the exception types below (coordination) or as the standard
``OSError`` family (storage) and ``ConnectionError``/``TimeoutError`` (network), so protocol
code handles them the same way under both runtimes.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from floodmark.contracts.node_event_kinds import KnownKind
from floodmark.frozen_init import fast_frozen_init

# --------------------------------------------------------------------------- coordination


class CoordinationError(Exception):
    """Base of the ZooKeeper-shaped errors."""


class NoNodeError(CoordinationError):
    pass


class NodeExistsError(CoordinationError):
    pass


class BadVersionError(CoordinationError):
    pass


class NotEmptyError(CoordinationError):
    pass


class ConnectionLossError(CoordinationError):
    """The request may or may not have been applied (the session is still alive)."""


class SessionExpiredError(CoordinationError):
    """The session is gone, and with it this client's ephemeral nodes."""


class TransactionFailed(CoordinationError):
    """A multi-op transaction was rejected as a whole; ``index`` is the op that failed."""

    def __init__(self, index: int, cause: CoordinationError) -> None:
        super().__init__(f"transaction op {index} failed: {type(cause).__name__}: {cause}")
        self.index = index
        self.cause = cause


@fast_frozen_init  # a new controller reads 10,000 state nodes, each with its stat
@dataclass(frozen=True)
class Stat:
    """The parts of a ZooKeeper stat that the protocol uses."""

    version: int  # data version, for conditional set/delete
    czxid: int  # zxid of the create: a broker's incarnation id
    mzxid: int
    cversion: int  # children version
    ephemeral_owner: int  # session id, 0 for persistent nodes
    num_children: int = 0


SessionState = Literal["CONNECTED", "SUSPENDED", "LOST"]
WatchEventType = Literal["CREATED", "DELETED", "CHANGED", "CHILD"]


@dataclass(frozen=True)
class WatchEvent:
    type: WatchEventType
    path: str


WatchCallback = Callable[[WatchEvent], None]


# Transaction operations (for ``Coordination.multi``).
@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = -1


@dataclass(frozen=True)
class CheckOp:
    path: str
    version: int


TxnOp = CreateOp | SetDataOp | DeleteOp | CheckOp


def validate_path(path: str) -> None:
    """ZooKeeper's path rules, the same under both runtimes (kazoo raises ValueError for the
    same mistakes)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"ZooKeeper path must start with '/': {path!r}")
    if path != "/" and (path.endswith("/") or "//" in path):
        raise ValueError(f"ZooKeeper path has an empty component: {path!r}")


class Coordination(Protocol):
    """A ZooKeeper-shaped client bound to one session.

    Watches are one-shot, as in ZooKeeper; their callbacks and session-state listeners run
    on the runtime's event loop (never on another thread) and must not block: they spawn a
    task if they need to do work.
    """

    @property
    def session_id(self) -> int: ...

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False,
        sequential: bool = False, makepath: bool = False,
    ) -> str:
        """Create a node; returns the actual path (with the sequence suffix if sequential)."""
        ...

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]: ...

    async def get_many(self, paths: list[str]) -> list[tuple[bytes, Stat] | None]:
        """Read many nodes in a few round trips, without watches: one result per path, in
        order, ``None`` for a node that does not exist.

        For a controller re-reading thousands of partition states after failover. Each read
        sees a committed state, as separate ``get`` calls would, but the batch is not one
        snapshot. Meant for small nodes: a batch's replies share one ZooKeeper packet.
        """
        ...

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None: ...

    async def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        """Children names, sorted."""
        ...

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat: ...

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None: ...

    async def ensure_path(self, path: str) -> None: ...

    async def multi(self, ops: list[TxnOp]) -> list[Any]:
        """Apply all ops atomically or none; raises TransactionFailed on rejection.

        Returns per-op results: created path for CreateOp, Stat for SetDataOp, True otherwise.
        """
        ...

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None: ...

    async def close(self) -> None: ...


class SessionListeners:
    """Where a Coordination keeps its session-state listeners (the real and the simulated one).

    The implementation sets ``_listeners`` to an empty list and tells them of each change
    in its own way (its own log, its own failure record).
    """

    _listeners: list[Callable[[SessionState], None]]

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        self._listeners.append(listener)


# --------------------------------------------------------------------------- storage


class AppendFile(Protocol):
    """An open file that is only appended to (a log segment, an index)."""

    def write(self, data: bytes) -> None: ...

    def fsync(self) -> None: ...

    def size(self) -> int: ...

    def close(self) -> None: ...


class Storage(Protocol):
    """The broker's disks: paths are absolute ('/data/a/t-0/00000000000000000000.log').

    Every call raises ``OSError`` subclasses exactly as the OS would (``FileNotFoundError``,
    ``PermissionError`` when a directory is chmod 000 and the process lacks DAC override,
    ``NotADirectoryError`` when a directory was replaced by a file, ``OSError(EIO)``).
    A file already open keeps working after a permission change, as on Linux.
    Writes are durable only after ``fsync`` (or ``write_atomic``): the simulated disk
    drops unsynced bytes when the node crashes.
    """

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[str]:
        """Entry names, sorted."""
        ...

    def make_dirs(self, path: str) -> None: ...

    def open_append(self, path: str) -> AppendFile:
        """Open for appending, creating the file if needed."""
        ...

    def read(self, path: str, offset: int = 0, length: int = -1) -> bytes: ...

    def size(self, path: str) -> int: ...

    def truncate(self, path: str, size: int) -> None: ...

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write a small file whole (temp file, fsync, rename): for checkpoints."""
        ...

    def defer_syncs(self) -> None:
        """Start a group commit: until ``complete_syncs``, ``write_atomic`` writes its
        temporary file (errors still raise at once) but leaves the fsync and the rename to
        ``complete_syncs``. Reads do not see a deferred write before then."""
        ...

    def complete_syncs(self) -> list[OSError]:
        """Finish the group commit: every deferred ``write_atomic`` becomes durable with one
        sync per file system instead of two fsyncs per file. Returns the failures, each
        naming the target path in ``filename``; an empty list means all are durable."""
        ...

    def rename(self, src: str, dst: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def remove_tree(self, path: str) -> None: ...


# --------------------------------------------------------------------------- network


Handler = Callable[[str, Any], Awaitable[Any]]
"""Serves one request: (sender address, request message) -> response message."""


class Network(Protocol):
    """Request/response between node addresses ('host:port' real, node name simulated)."""

    async def request(self, address: str, message: Any, timeout: float) -> Any:
        """Send a request and await its response.

        Raises ``ConnectionError`` when the peer cannot be reached or the connection breaks
        (the request may or may not have been processed if it was sent), and
        ``TimeoutError`` when no response arrives in time.
        """
        ...

    async def serve(self, handler: Handler) -> None:
        """Start answering requests addressed to this node's advertised address."""
        ...

    async def close(self) -> None: ...


# --------------------------------------------------------------------------- the runtime


class Runtime(Protocol):
    node: str  # this node's name, "n1" (also names its event file)
    advertised_address: str  # what other nodes pass to ``network.request`` to reach us
    network: Network
    storage: Storage
    random: random.Random  # seeded; the only source of randomness for protocol code
    log: logging.Logger

    def monotonic(self) -> float:
        """Seconds, never goes backwards; for timeouts and intervals."""
        ...

    def wall_time(self) -> float:
        """Seconds since the epoch as this node believes it (clock faults land here)."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    async def safepoint(self) -> None:
        """A point where stopping this task does harm (a decision made, not yet acted on).
        Returns at once, without yielding; the simulator's thread stalls strike here, as the
        JVM stops threads for a collection at safepoints."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run a coroutine in the background; returns a handle with ``cancel()``.

        A task that raises is logged by the runtime, not silently dropped.
        """
        ...

    async def coordination(self, session_timeout: float) -> Coordination:
        """Open a new ZooKeeper session (a broker opens a new one after its session is LOST)."""
        ...

    def emit(self, event: KnownKind) -> None:
        """Record a node event: one of the kinds in ``floodmark.contracts.node_event_kinds``."""
        ...
