"""The simulated network and the TCP transport answer the same scenarios the same way: the
same results, the same error types. Protocol code tested on the simulation meets the same
behaviour in a real process.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from zookeeper_server import free_port

from floodmark.reference.protocol import messages as m
from floodmark.reference.real.transport import UNKNOWN_SERVER_ERROR as REAL_UNKNOWN
from floodmark.reference.real.transport import TcpNetwork
from floodmark.reference.runtime import Handler, Network
from floodmark.reference.sim import SimWorld
from floodmark.reference.sim.network import UNKNOWN_SERVER_ERROR as SIM_UNKNOWN

T = TypeVar("T")


class SimNetworks:
    def __init__(self) -> None:
        self.world = SimWorld(seed=9)
        self._names = (f"node{i}" for i in itertools.count())
        self.client: Network = self.world.add_node("client").network

    def run(self, coro: Awaitable[T]) -> T:
        return self.world.run(coro)

    async def server(self, handler: Handler) -> tuple[Network, str]:
        name = next(self._names)
        network = self.world.add_node(name).network
        await network.serve(handler)
        return network, name

    def nowhere(self) -> str:
        self.world.add_node("silent")  # exists, serves nothing
        return "silent"

    def close(self) -> None:
        self.world.close()


class TcpNetworks:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.log = logging.getLogger("parity")
        self.client: Network = TcpNetwork(None, self.log)
        self._servers: list[Network] = []

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 60))

    async def server(self, handler: Handler) -> tuple[Network, str]:
        address = f"127.0.0.1:{free_port()}"
        network = TcpNetwork(address, self.log)
        await network.serve(handler)
        self._servers.append(network)
        return network, address

    def nowhere(self) -> str:
        return f"127.0.0.1:{free_port()}"

    def close(self) -> None:
        async def close_all() -> None:
            for network in [self.client, *self._servers]:
                await network.close()

        self.run(close_all())
        self.loop.close()


@pytest.fixture(params=["sim", "tcp"])
def networks(request: pytest.FixtureRequest) -> Iterator[Any]:
    n: Any = SimNetworks() if request.param == "sim" else TcpNetworks()
    try:
        yield n
    finally:
        n.close()


async def by_partition(sender: str, message: Any) -> Any:
    await asyncio.sleep(0.001 * (message.partition % 3))
    return m.ProduceResponse(None, base_offset=message.partition)


def test_pipelined_requests_get_their_own_responses(networks: Any) -> None:
    async def scenario() -> list[int]:
        _, address = await networks.server(by_partition)
        replies = await asyncio.gather(*(
            networks.client.request(address, m.ProduceRequest("t", i, ()), 5.0) for i in range(40)))
        return [r.base_offset for r in replies]

    assert networks.run(scenario()) == list(range(40))


def test_a_failing_handler_answers_unknown_server_error(networks: Any) -> None:
    assert SIM_UNKNOWN == REAL_UNKNOWN

    async def broken(sender: str, message: Any) -> Any:
        raise ValueError("bug")

    async def scenario() -> Any:
        _, address = await networks.server(broken)
        return await networks.client.request(address, m.MetadataRequest(), 5.0)

    reply = networks.run(scenario())
    assert isinstance(reply, m.ErrorResponse) and reply.error == SIM_UNKNOWN and "bug" in reply.message


def test_nobody_listening_is_a_connection_error(networks: Any) -> None:
    async def scenario() -> None:
        with pytest.raises(ConnectionError):
            await networks.client.request(networks.nowhere(), m.MetadataRequest(), 5.0)

    networks.run(scenario())


def test_a_slow_answer_is_a_timeout_and_the_next_request_works(networks: Any) -> None:
    async def slow_first(sender: str, message: Any) -> Any:
        if isinstance(message, m.MetadataRequest):
            await asyncio.sleep(1.0)
        return await by_partition(sender, message)

    async def scenario() -> int:
        _, address = await networks.server(slow_first)
        with pytest.raises(TimeoutError):
            await networks.client.request(address, m.MetadataRequest(), 0.2)
        reply = await networks.client.request(address, m.ProduceRequest("t", 5, ()), 5.0)
        return int(reply.base_offset)

    assert networks.run(scenario()) == 5


def test_a_server_closing_its_network_breaks_calls_in_progress(networks: Any) -> None:
    started = asyncio.Event()

    async def stuck(sender: str, message: Any) -> Any:
        started.set()
        await asyncio.sleep(60)
        return m.ProduceResponse(None)

    async def scenario() -> None:
        server, address = await networks.server(stuck)
        pending = asyncio.ensure_future(networks.client.request(address, m.MetadataRequest(), 30.0))
        await started.wait()
        await server.close()
        with pytest.raises(ConnectionError):
            await pending
        with pytest.raises(ConnectionError):
            await networks.client.request(address, m.MetadataRequest(), 5.0)

    networks.run(scenario())
