"""Shared fixtures for runtime tests: a real ZooKeeper server, a client backend on it, and a
TCP proxy that can black-hole a connection (a network partition between one client and
ZooKeeper without root or iptables).

Use: ``from tests.runtime_fixtures import zookeeper_server_fixture  # noqa: F401`` and ask for
the fixture ``zookeeper_server`` (a running :class:`ZooKeeperServer`, shared by the test
session; skipped with the reason when Java or the ZooKeeper jar is missing).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from collections.abc import Awaitable, Iterator
from typing import TypeVar

import pytest
from zookeeper_server import ZooKeeperServer, missing_requirements

from floodmark.reference.real.kazoo_coordination import KazooCoordination
from floodmark.reference.runtime import Coordination

T = TypeVar("T")


@pytest.fixture(scope="session", name="zookeeper_server")
def zookeeper_server_fixture() -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the test session (tests use unique root paths)."""
    problem = missing_requirements()
    if problem:
        pytest.skip(f"needs a real ZooKeeper: {problem}")
    server = ZooKeeperServer()
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


class RealZooKeeperBackend:
    """Runs coordination scenarios on an asyncio loop against a real ZooKeeper."""

    def __init__(self, server: ZooKeeperServer, hosts: str | None = None) -> None:
        self.server = server
        self.hosts = hosts or server.address
        self.root = f"/suite-{uuid.uuid4().hex[:12]}"
        self.loop = asyncio.new_event_loop()
        self._sessions: list[Coordination] = []

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    async def session(self, timeout: float = 6.0) -> Coordination:
        zk = await KazooCoordination.connect(self.hosts, timeout)
        self._sessions.append(zk)
        return zk

    async def settle(self) -> None:
        await asyncio.sleep(0.3)

    def close(self) -> None:
        async def cleanup() -> None:
            for zk in self._sessions:
                await zk.close()
            if self.server.running:
                admin = await KazooCoordination.connect(self.server.address, 6.0)
                try:
                    if await admin.exists(self.root):
                        await admin.delete(self.root, recursive=True)
                finally:
                    await admin.close()

        try:
            self.run(cleanup())
        finally:
            self.loop.close()


class BlockableProxy:
    """Forwards TCP connections to ``target``; ``block()`` holds every byte until ``unblock()``.

    Holding (not dropping) bytes is what TCP does across a short partition: the data is
    retransmitted once the path is back. A client that gives up meanwhile closes its socket.
    """

    _ids = itertools.count()

    def __init__(self, target: str) -> None:
        self.target_host, port = target.rsplit(":", 1)
        self.target_port = int(port)
        self.loop = asyncio.new_event_loop()
        self._open = asyncio.Event()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name=f"proxy-{next(self._ids)}")
        self._server: asyncio.AbstractServer | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(5)

    async def _start(self) -> None:
        self._open.set()
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            client_w.close()
            return
        self._writers += [client_w, server_w]
        await asyncio.gather(self._pump(client_r, server_w), self._pump(server_r, client_w))

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                await self._open.wait()
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.close()

    def block(self) -> None:
        self.loop.call_soon_threadsafe(self._open.clear)

    def unblock(self) -> None:
        self.loop.call_soon_threadsafe(self._open.set)

    def stop(self) -> None:
        async def shutdown() -> None:
            self._open.set()
            if self._server is not None:
                self._server.close()
            for writer in self._writers:
                writer.close()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


@pytest.fixture(name="zookeeper_proxy")
def zookeeper_proxy_fixture(zookeeper_server: ZooKeeperServer) -> Iterator[BlockableProxy]:
    proxy = BlockableProxy(zookeeper_server.address)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


# Import these two into a test module to use the fixtures "zookeeper_server" and "zookeeper_proxy".
__all__ = ["BlockableProxy", "RealZooKeeperBackend", "zookeeper_proxy_fixture", "zookeeper_server_fixture"]
