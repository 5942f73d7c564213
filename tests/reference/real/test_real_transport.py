"""Tests of the TCP transport (floodmark.reference.real.transport) over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from zookeeper_server import free_port

from floodmark.reference.protocol import messages as m
from floodmark.reference.real.transport import UNKNOWN_SERVER_ERROR, TcpNetwork, split_address

log = logging.getLogger("test")


def run(coro_fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(), 30))


@contextlib.asynccontextmanager
async def serving(handler: Any) -> AsyncIterator[tuple[TcpNetwork, TcpNetwork, str]]:
    """A server running ``handler`` on a free loopback port, a client, and the server's
    address; both closed at the end (closing the server twice is harmless)."""
    address = f"127.0.0.1:{free_port()}"
    server = TcpNetwork(address, log)
    await server.serve(handler)
    client = TcpNetwork(None, log)
    try:
        yield server, client, address
    finally:
        await client.close()
        await server.close()


async def offsets(sender: str, message: Any) -> Any:
    if isinstance(message, m.ProduceRequest):
        await asyncio.sleep(0.001 * (message.partition % 5))
        return m.ProduceResponse(None, base_offset=message.partition)
    return m.ErrorResponse("INVALID_REQUEST", type(message).__name__)


def test_pipelined_requests_on_one_reused_connection() -> None:
    connections: list[str] = []

    async def scenario() -> None:
        async def handler(sender: str, message: Any) -> Any:
            connections.append(sender)
            return await offsets(sender, message)

        async with serving(handler) as (_, client, address):
            replies = await asyncio.gather(*(
                client.request(address, m.ProduceRequest("t", i, ("v",)), 5.0) for i in range(300)))
            # Slow and fast handlers interleave, yet every reply reaches its own request.
            assert [r.base_offset for r in replies] == list(range(300))
            assert len(set(connections)) == 1

    run(scenario)


def test_handler_failure_is_answered_and_the_server_keeps_serving() -> None:
    async def scenario() -> None:
        async def handler(sender: str, message: Any) -> Any:
            if isinstance(message, m.MetadataRequest):
                raise RuntimeError("bug")
            return await offsets(sender, message)

        async with serving(handler) as (_, client, address):
            failed = await client.request(address, m.MetadataRequest(), 5.0)
            assert isinstance(failed, m.ErrorResponse) and failed.error == UNKNOWN_SERVER_ERROR
            assert "RuntimeError: bug" in failed.message
            assert (await client.request(address, m.ProduceRequest("t", 1, ()), 5.0)).base_offset == 1

    run(scenario)


@pytest.mark.parametrize("garbage, logged", [
    (b"\x00\x00\x00\x05hello", "not valid JSON"),
    (b"\xff\xff\xff\xff", "over the limit"),
    (b"\x00\x00\x00\x02\xc3\x28", "not UTF-8"),
    (b'\x00\x00\x00\x1a{"id":1,"body":{"type":1}}', "unknown message type"),
])
def test_malformed_frames_close_only_that_connection(garbage: bytes, logged: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with serving(offsets) as (_, client, address):
            host, port = split_address(address)
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(garbage)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed on us
            writer.close()
            assert (await client.request(address, m.ProduceRequest("t", 3, ()), 5.0)).base_offset == 3

    with caplog.at_level(logging.WARNING, logger="test"):
        run(scenario)
    assert any(logged in r.getMessage() for r in caplog.records)


def test_unreachable_peer_is_a_connection_error() -> None:
    async def scenario() -> None:
        client = TcpNetwork(None, log)
        with pytest.raises(ConnectionError):
            await client.request(f"127.0.0.1:{free_port()}", m.MetadataRequest(), 2.0)
        with pytest.raises(ValueError, match="not a host:port"):
            await client.request("nonsense", m.MetadataRequest(), 2.0)

    run(scenario)


def test_timeout_then_the_connection_still_works() -> None:
    async def scenario() -> None:
        async def handler(sender: str, message: Any) -> Any:
            if isinstance(message, m.MetadataRequest):
                await asyncio.sleep(0.5)
            return await offsets(sender, message)

        async with serving(handler) as (_, client, address):
            with pytest.raises(TimeoutError):
                await client.request(address, m.MetadataRequest(), 0.1)
            await asyncio.sleep(0.6)  # the late answer arrives and is dropped
            assert (await client.request(address, m.ProduceRequest("t", 4, ()), 5.0)).base_offset == 4

    run(scenario)


def test_server_going_away_breaks_requests_in_flight() -> None:
    async def scenario() -> None:
        started = asyncio.Event()

        async def handler(sender: str, message: Any) -> Any:
            started.set()
            await asyncio.sleep(30)
            return m.ProduceResponse(None)

        async with serving(handler) as (server, client, address):
            pending = asyncio.ensure_future(client.request(address, m.ProduceRequest("t", 0, ()), 20.0))
            await started.wait()
            await server.close()
            with pytest.raises(ConnectionError):
                await pending
            with pytest.raises(ConnectionError):  # and a new connection is refused
                await client.request(address, m.MetadataRequest(), 2.0)

    run(scenario)



def test_a_request_to_our_own_address_is_answered_in_process_without_a_socket() -> None:
    """A controller telling its own broker about thousands of partitions skips the codec: the
    same handler answers, started as its own task, under the same timeout and error rules."""
    seen: list[tuple[str, Any]] = []

    async def scenario() -> None:
        advertised = f"localhost:{free_port()}"
        listen = f"127.0.0.1:{split_address(advertised)[1]}"
        node = TcpNetwork(listen, log, advertised=advertised)
        release = asyncio.Event()

        async def handler(sender: str, message: Any) -> Any:
            seen.append((sender, message))
            if isinstance(message, m.MetadataRequest):
                raise RuntimeError("bug")
            if isinstance(message, m.ProduceRequest) and message.partition == 9:
                await release.wait()  # slower than the caller waits
            return await offsets(sender, message)

        await node.serve(handler)
        try:
            request = m.ProduceRequest("t", 3, ("v",))
            reply = await node.request(advertised, request, 5.0)
            assert reply == m.ProduceResponse(None, base_offset=3)
            assert seen[-1] == (advertised, request) and seen[-1][1] is request  # not a decoded copy
            assert (await node.request(listen, m.ProduceRequest("t", 4, ()), 5.0)).base_offset == 4
            failed = await node.request(advertised, m.MetadataRequest(), 5.0)
            assert isinstance(failed, m.ErrorResponse) and failed.error == UNKNOWN_SERVER_ERROR
            with pytest.raises(TimeoutError):
                await node.request(advertised, m.ProduceRequest("t", 9, ()), 0.05)
            # The timed-out handler still runs to its end, as it would behind a socket.
            release.set()
            await asyncio.sleep(0.05)
            assert [type(msg).__name__ for _, msg in seen].count("ProduceRequest") == 3
            assert {sender for sender, _ in seen} == {advertised}  # never a socket's peer address
        finally:
            await node.close()
        with pytest.raises(ConnectionError):  # closed: no longer answering, even ourselves
            await node.request(advertised, request, 0.5)

    run(scenario)


def test_requests_to_peers_made_with_one_to_ourselves_go_out_first() -> None:
    """A new controller tells its own broker and the others at once, and has no connection to
    the others yet: its own broker's handler (5,000 new leaderships, chunk after chunk) starts
    only once those connections are open and the others' requests written."""
    seen_when_local_began: list[bool] = []

    async def scenario() -> None:
        async with serving(offsets) as (peer, _, peer_address):
            own = f"127.0.0.1:{free_port()}"
            node = TcpNetwork(own, log)

            async def handler(sender: str, message: Any) -> Any:
                connection = node._connections.get(peer_address)
                seen_when_local_began.append(connection is not None and not connection.closed)
                return await offsets(sender, message)

            await node.serve(handler)
            try:
                local, remote = await asyncio.gather(
                    node.request(own, m.ProduceRequest("t", 1, ()), 5.0),
                    node.request(peer_address, m.ProduceRequest("t", 2, ()), 5.0))
                assert (local.base_offset, remote.base_offset) == (1, 2)
            finally:
                await node.close()

    run(scenario)
    assert seen_when_local_began == [True]
