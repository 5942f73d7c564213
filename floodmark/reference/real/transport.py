"""Request/response over TCP: length-prefixed frames, one reused connection per peer.

A node talks to each peer over one connection, opened on first use and kept. Requests are
*pipelined*: each carries a correlation id, many can be in flight at once, and the reader
task matches each response to its waiting request by id. The server side reads frames in
order and starts a handler task for each request at once, so handlers begin in arrival
order (as in the simulated network) while slow ones (a long-poll fetch, an acks=all
produce waiting for followers) do not hold up the others; responses go back as they are
ready.

Both ends send through a :class:`FrameWriter`: frames that become ready in the same turn of
the event loop (the responses one high-watermark advance wakes, the requests of every client
woken by one read) leave in one write, so a busy connection costs a system call per turn
rather than per frame. Frames keep their order; nothing waits beyond the current turn.

A request to the node's own address (a controller telling its own broker about 10,000
partitions) is answered in the process, without the codec or a socket: the same handler,
started as a task of its own as a frame would start it, under the same timeout. Nothing is
lost by it: no fault a real cluster applies (a cut, a pause) separates a process from itself.
Requests to peers made with it go out first, so that the peers work while this process
does: the handler starts once they are sent, or once the connections they are opening
(begun at most :data:`CONNECT_HEAD_START` seconds ago) are open. A new controller has no
connection to most brokers yet; opening one takes a few turns of the event loop, and each
turn would otherwise be a chunk of its own broker's 5,000 new leaderships.

Errors follow the ``runtime.Network`` contract: a peer that cannot be reached or a
connection that breaks raises ``ConnectionError`` in every request waiting on it, and a
request without a response in time raises ``TimeoutError`` (its late response, if any, is
dropped). A malformed or oversized frame is a protocol violation: it is logged, that
connection is closed, and the process carries on serving everyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Coroutine
from typing import Any

from floodmark.reference.protocol import wire
from floodmark.reference.protocol.messages import ErrorResponse, Errors
from floodmark.reference.runtime import Handler

UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"  # a handler raised instead of answering


def split_address(address: str) -> tuple[str, int]:
    """'host:port' -> (host, port), with a clear error for anything else."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port address: {address!r}")
    return host.strip("[]"), int(port)


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, Any]:
    """The next (correlation id, message); IncompleteReadError at end of stream, WireError if malformed."""
    prefix = await reader.readexactly(wire.LENGTH_PREFIX.size)
    payload = await reader.readexactly(wire.frame_length(prefix))
    return wire.decode_payload(payload)


WRITE_BACKLOG_LIMIT = 1 << 20  # bytes queued in the socket's transport before a writer waits
# How long a request to ourselves lets connections just begun to peers open first (on a
# LAN it takes a millisecond; one that hangs, to a cut-off peer, is not waited for longer).
CONNECT_HEAD_START = 0.1


class FrameWriter:
    """Sends the frames queued during one turn of the event loop with a single write."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._frames: list[bytes] = []

    def write(self, frame: bytes) -> None:
        if not self._frames:
            self._loop.call_soon(self._flush)
        self._frames.append(frame)

    def _flush(self) -> None:
        frames, self._frames = self._frames, []
        if frames and not self._writer.is_closing():
            self._writer.write(frames[0] if len(frames) == 1 else b"".join(frames))

    def backlog(self) -> int:
        """Bytes the transport has not yet handed to the socket (frames of this turn excluded)."""
        return self._writer.transport.get_write_buffer_size()


class Connection:
    """The client end of one connection: pending requests by correlation id."""

    def __init__(self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 log: logging.Logger) -> None:
        self.address = address
        self._reader = reader
        self._writer = writer
        self._frames = FrameWriter(writer)
        self._log = log
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.closed = False
        self._reading = asyncio.get_running_loop().create_task(self._read_responses(),
                                                               name=f"responses from {address}")

    async def request(self, message: Any, timeout: float) -> Any:
        if self.closed:
            raise ConnectionResetError(f"connection to {self.address} is closed")
        correlation_id = next(self._ids)
        frame = wire.encode_frame(correlation_id, message)
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._pending[correlation_id] = reply
        # A plain timer, not asyncio.wait_for: this is the hot path of every request.
        timer = loop.call_later(timeout, _time_out, reply, self.address, timeout)
        try:
            self._frames.write(frame)
            if self._frames.backlog() > WRITE_BACKLOG_LIMIT:
                await self._writer.drain()
            return await reply
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)

    async def _read_responses(self) -> None:
        error: Exception = ConnectionResetError(f"connection to {self.address} closed by the peer")
        try:
            while True:
                correlation_id, message = await read_frame(self._reader)
                reply = self._pending.get(correlation_id)
                if reply is not None and not reply.done():
                    reply.set_result(message)
        except asyncio.IncompleteReadError:
            pass
        except wire.WireError as e:
            self._log.warning("malformed response from %s: %s; closing the connection", self.address, e)
            error = ConnectionResetError(f"malformed response from {self.address}: {e}")
        except OSError as e:
            error = ConnectionResetError(f"connection to {self.address} broke: {e}")
        finally:
            self.close(error)

    def close(self, error: Exception | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        failure = error or ConnectionResetError(f"connection to {self.address} closed")
        for reply in self._pending.values():
            if not reply.done():
                reply.set_exception(failure)
        self._pending.clear()
        self._writer.close()
        if self._reading is not asyncio.current_task():
            self._reading.cancel()


def _time_out(reply: asyncio.Future[Any], address: str, timeout: float) -> None:
    if not reply.done():
        reply.set_exception(TimeoutError(f"no response from {address} within {timeout}s"))


class TcpNetwork:
    """``runtime.Network`` over TCP; serves on ``listen`` (host:port) once ``serve`` is called."""

    def __init__(self, listen: str | None, log: logging.Logger, *, advertised: str | None = None) -> None:
        self.listen = listen
        self._own_addresses = {a for a in (listen, advertised) if a is not None}
        self._own_name = advertised or listen or "self"
        self._handler: Handler | None = None  # once serving: what answers requests to ourselves
        self._log = log
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Future[Connection]] = {}
        self._connect_began: dict[str, float] = {}  # loop time each connect in progress began
        self._server: asyncio.AbstractServer | None = None
        self._serving: dict[asyncio.StreamWriter, None] = {}
        self._handler_tasks: dict[asyncio.Task[Any], None] = {}
        self.bound_port: int | None = None

    # ------------------------------------------------------------------ client side

    async def request(self, address: str, message: Any, timeout: float) -> Any:
        if self._handler is not None and address in self._own_addresses:
            return await self._request_locally(self._handler, message, timeout)
        connection = self._connections.get(address)
        if connection is None or connection.closed:
            connection = await self._connection(address, timeout)
        return await connection.request(message, timeout)

    async def _request_locally(self, handler: Handler, message: Any, timeout: float) -> Any:
        # Requests to peers made in the same turn (the controller tells every broker at once)
        # are encoded and on their way first: the peers then work while we do.
        await asyncio.sleep(0)
        await self._let_new_connections_open()
        task = self._start_handler(self._response(handler, self._own_name, message),
                                   f"handle {type(message).__name__} from ourselves")
        done, _ = await asyncio.wait({task}, timeout=timeout)  # a late answer is dropped, as on a socket
        if not done:
            raise TimeoutError(f"no response from ourselves within {timeout}s")
        return task.result()

    async def _let_new_connections_open(self) -> None:
        """Wait (up to CONNECT_HEAD_START) for the connections to peers begun in the last
        CONNECT_HEAD_START; the requests waiting on them are then sent before we go on."""
        now = asyncio.get_running_loop().time()
        fresh = [pending for address, pending in self._connecting.items()
                 if now - self._connect_began.get(address, now) < CONNECT_HEAD_START]
        if fresh:
            await asyncio.wait(fresh, timeout=CONNECT_HEAD_START)
            await asyncio.sleep(0)  # the requests waiting on them resume first, and write

    def _start_handler(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._handler_tasks[task] = None
        task.add_done_callback(self._handler_tasks.pop)
        return task

    async def _connection(self, address: str, timeout: float) -> Connection:
        existing = self._connections.get(address)
        if existing is not None and not existing.closed:
            return existing
        pending = self._connecting.get(address)
        if pending is None:  # one connect per peer, however many requests wait for it
            pending = asyncio.ensure_future(self._connect(address, timeout))
            self._connecting[address] = pending
            self._connect_began[address] = asyncio.get_running_loop().time()
            pending.add_done_callback(lambda _: (self._connecting.pop(address, None),
                                                 self._connect_began.pop(address, None)))
        return await asyncio.shield(pending)

    async def _connect(self, address: str, timeout: float) -> Connection:
        host, port = split_address(address)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except TimeoutError:
            raise TimeoutError(f"could not connect to {address} within {timeout}s") from None
        except ConnectionError:
            raise
        except OSError as e:  # unreachable host, unknown name: the peer cannot be reached
            raise ConnectionRefusedError(f"cannot connect to {address}: {e}") from e
        connection = Connection(address, reader, writer, self._log)
        self._connections[address] = connection
        return connection

    # ------------------------------------------------------------------ server side

    async def serve(self, handler: Handler) -> None:
        if self.listen is None:
            raise RuntimeError("this runtime has no listen address and cannot serve")
        host, port = split_address(self.listen)

        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._serve_connection(handler, reader, writer)

        self._server = await asyncio.start_server(on_connection, host, port, reuse_address=True)
        self.bound_port = self._server.sockets[0].getsockname()[1]
        self._handler = handler

    async def _serve_connection(self, handler: Handler, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        sender = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._serving[writer] = None
        frames = FrameWriter(writer)
        try:
            while True:
                correlation_id, message = await read_frame(reader)
                self._start_handler(self._answer(handler, sender, writer, frames, correlation_id, message),
                                    f"handle {type(message).__name__} from {sender}")
        except asyncio.IncompleteReadError:
            pass  # the peer closed the connection
        except wire.WireError as e:
            self._log.warning("rejected a frame from %s: %s; closing the connection", sender, e)
        except OSError as e:
            self._log.info("connection from %s broke: %s", sender, e)
        finally:
            self._serving.pop(writer, None)
            writer.close()

    async def _response(self, handler: Handler, sender: str, message: Any) -> Any:
        try:
            return await handler(sender, message)
        except asyncio.CancelledError:
            raise
        except wire.WireError as e:  # a field the protocol cannot carry: a protocol error, not a bug
            self._log.warning("cannot answer %s from %s: %s", type(message).__name__, sender, e)
            return ErrorResponse(Errors.INVALID_REQUEST, str(e)[:200])
        except Exception as e:  # a handler bug must not take the node down; the caller hears of it
            self._log.exception("handler failed on %s from %s", type(message).__name__, sender)
            return ErrorResponse(UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")

    async def _answer(self, handler: Handler, sender: str, writer: asyncio.StreamWriter,
                      frames: FrameWriter, correlation_id: int, message: Any) -> None:
        response = await self._response(handler, sender, message)
        try:
            frame = wire.encode_frame(correlation_id, response)
        except wire.WireError as e:  # a field the protocol cannot carry: a protocol error, not a bug
            self._log.warning("cannot answer %s from %s: %s", type(message).__name__, sender, e)
            frame = wire.encode_frame(correlation_id, ErrorResponse(Errors.INVALID_REQUEST, str(e)[:200]))
        if writer.is_closing():
            return
        frames.write(frame)
        if frames.backlog() > WRITE_BACKLOG_LIMIT:
            with contextlib.suppress(OSError):  # the reader loop notices a broken connection
                await writer.drain()

    async def close(self) -> None:
        self._handler = None
        if self._server is not None:
            self._server.close()
        for writer in list(self._serving):
            writer.close()
        for task in list(self._handler_tasks):
            if task is not asyncio.current_task():
                task.cancel()
        for connection in list(self._connections.values()):
            connection.close()
        self._connections.clear()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
