"""Client runtimes on real sockets: how the harness's workload processes reach a real cluster.

Every client process (a workload worker's session) gets its own runtime (tasks, seeded
random stream) from :func:`~floodmark.reference.real.runtime.client_runtime`, but they all
share one set of TCP connections, one per broker, as the threads of one JVM share a Kafka
producer's: requests issued in the same turn of the event loop leave in one write. A session
borrows the connections through :class:`LentNetwork`, so closing it leaves them open.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from floodmark.harness.seeds import derive
from floodmark.reference.real.runtime import RealRuntime, client_runtime
from floodmark.reference.runtime import Handler, Network, Runtime


class LentNetwork:
    """Another runtime's connections, lent to a session: closing the session leaves them open."""

    def __init__(self, network: Network) -> None:
        self._network = network

    def request(self, address: str, message: Any, timeout: float) -> Coroutine[Any, Any, Any]:
        # The shared network's own coroutine, not one wrapping it: one frame less per request.
        return self._network.request(address, message, timeout)

    async def serve(self, handler: Handler) -> None:
        raise RuntimeError("client sessions do not serve requests")

    async def close(self) -> None:
        """Nothing to do: the connections belong to the host."""


class RealClientHost:
    """``workloads.clients.ClientHost`` for a real cluster."""

    def __init__(self, zookeeper: str, seed: int) -> None:
        self.zookeeper = zookeeper
        self.seed = seed
        self._connections = client_runtime("clients", derive(seed, "clients"))

    def connections(self) -> Runtime:
        return self._connections

    def session(self, label: str) -> Runtime:
        return client_runtime(label, derive(self.seed, label), zookeeper_hosts=self.zookeeper,
                              network=LentNetwork(self._connections.network))

    async def end_session(self, runtime: Runtime) -> None:
        if isinstance(runtime, RealRuntime):
            await runtime.close()

    async def close(self) -> None:
        await self._connections.close()
