"""The real runtime: the protocol running as a process on real clocks, TCP, ZooKeeper and disks.

:class:`RealRuntime` gives protocol code the same ``runtime.Runtime`` the simulation gives
it, built from real parts: ``time.monotonic``/``time.time`` (clock faults injected with
libfaketime land in ``wall_time``), asyncio tasks, the TCP transport (``real.transport``),
kazoo against a real ZooKeeper (``real.kazoo_coordination``), files on disk
(``real.files``) and an append-only node event file (``floodmark.contracts.node_events``).

:func:`client_runtime` is the lighter runtime the harness's clients use: network, clocks,
randomness and optionally ZooKeeper (admin tools write there), but no storage or events.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import random
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from floodmark.contracts.node_event_kinds import KnownKind, Stopped
from floodmark.contracts.node_events import NodeEventWriter
from floodmark.reference.real.kazoo_coordination import KazooCoordination
from floodmark.reference.real.transport import TcpNetwork
from floodmark.reference.runtime import AppendFile, Coordination, Network, Storage


class RealRuntime:
    """``runtime.Runtime`` for a broker process (or a client, see :func:`client_runtime`)."""

    def __init__(self, node: str, advertised_address: str, listen: str | None,
                 zookeeper_hosts: str | None, events_path: str | Path | None,
                 storage: Storage, seed: int | str, network: Network | None = None) -> None:
        self.node = node
        self.advertised_address = advertised_address
        self.log = logging.getLogger(f"floodmark.{node}")
        self.network: Network = network if network is not None else TcpNetwork(listen, self.log, advertised=advertised_address)
        self.storage = storage
        self.random = random.Random(seed)
        self.zookeeper_hosts = zookeeper_hosts
        self._events = NodeEventWriter(events_path, node) if events_path else None
        self._stopped = False  # the process said it stopped cleanly: it emits nothing more
        self._tasks: dict[asyncio.Task[Any], None] = {}
        self._sessions: list[Coordination] = []

    def monotonic(self) -> float:
        return time.monotonic()

    def wall_time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def safepoint(self) -> None:
        return None  # a real thread stops wherever its process is stopped

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks[task] = None  # a strong reference: the loop keeps only weak ones
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("task %s failed", task.get_name(), exc_info=task.exception())

    async def coordination(self, session_timeout: float) -> Coordination:
        if not self.zookeeper_hosts:
            raise RuntimeError(f"{self.node} was started without a ZooKeeper address")
        session = await KazooCoordination.connect(self.zookeeper_hosts, session_timeout)
        self._sessions.append(session)
        return session

    def emit(self, event: KnownKind) -> None:
        if self._stopped:
            # A task still ending after the clean stop (close() cancels it): its event would
            # say the process went on after it ended, which readers refuse (contracts.node_lives).
            self.log.warning("event %s after the clean stop: not recorded", event)
            return
        if self._events is not None:
            self._events.write(self.wall_time(), event)
        else:
            self.log.debug("event %s", event)
        self._stopped = type(event) is Stopped

    async def close(self) -> None:
        """Cancel background tasks, close connections and sessions, close the event file."""
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.network.close()
        for session in self._sessions:
            await session.close()
        if self._events is not None:
            self._events.close()


class NoStorage:
    """Storage for runtimes that must not touch disks: every call fails as EPERM would."""

    def _refuse(self, path: str) -> OSError:
        return PermissionError(errno.EPERM, "this runtime has no storage", path)

    def exists(self, path: str) -> bool:
        raise self._refuse(path)

    def is_dir(self, path: str) -> bool:
        raise self._refuse(path)

    def list_dir(self, path: str) -> list[str]:
        raise self._refuse(path)

    def make_dirs(self, path: str) -> None:
        raise self._refuse(path)

    def open_append(self, path: str) -> AppendFile:
        raise self._refuse(path)

    def read(self, path: str, offset: int = 0, length: int = -1) -> bytes:
        raise self._refuse(path)

    def size(self, path: str) -> int:
        raise self._refuse(path)

    def truncate(self, path: str, size: int) -> None:
        raise self._refuse(path)

    def write_atomic(self, path: str, data: bytes) -> None:
        raise self._refuse(path)

    def defer_syncs(self) -> None:
        pass

    def complete_syncs(self) -> list[OSError]:
        return []

    def rename(self, src: str, dst: str) -> None:
        raise self._refuse(src)

    def remove(self, path: str) -> None:
        raise self._refuse(path)

    def remove_tree(self, path: str) -> None:
        raise self._refuse(path)


def client_runtime(name: str, seed: int | str, *, zookeeper_hosts: str | None = None,
                   network: Network | None = None) -> RealRuntime:
    """A runtime for a client in the harness: it only makes requests (it serves nothing).

    ``network`` lends it another runtime's connections (closing this runtime leaves them open).
    """
    return RealRuntime(node=name, advertised_address="", listen=None, zookeeper_hosts=zookeeper_hosts,
                       events_path=None, storage=NoStorage(), seed=seed, network=network)
