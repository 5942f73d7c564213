"""The simulated ZooKeeper client: one session, its liveness, and requests over the network.

Requests and watch notifications cross the simulated network between the client's node and
the node ``"zk"``, so partitions, cuts, pauses and crashes affect them as they affect a
real ZooKeeper client:

* a request whose request or reply is lost fails with ``ConnectionLossError`` after the
  client's read timeout (two thirds of the session timeout, as kazoo's);
* the server expires a session it has not heard from for longer than the session timeout
  (its ephemerals vanish and other clients' watches fire);
* the client notices it cannot reach the server after the read timeout and tells its
  listeners ``SUSPENDED``; if it gets through again before the session expired it says
  ``CONNECTED``, otherwise the server tells it the session is gone and it says ``LOST``;
  a paused client notices all this only when it resumes;
* a watch notification that cannot be delivered (a cut link, or a message rule that drops
  it) waits until the client is next in touch with the server, as ZooKeeper fires again,
  when a client reconnects and re-registers its watches, those whose znodes changed; an
  expired session's watches are dropped;
* when the server expires a session of a client that is still running
  (``SimWorld.expire_session``), it closes the client's connection: after the replies
  already on their way, the client hears of it and tells its listeners ``SUSPENDED`` then
  ``LOST`` (a paused client when it resumes), as a kazoo client whose connection drops and
  whose reconnection is refused with "session expired"; a request that reaches the server
  before then fails with ``SessionExpiredError``.

A client is bound to one session: after ``LOST`` every request raises
``SessionExpiredError`` and the owner opens a new session with ``runtime.coordination``.
Liveness is checked by a heartbeat task ten times per session timeout; it exchanges no
messages, so message rules (``sim.message_faults``) act on requests, replies and watch
events, named ``Zk<Operation>Request``/``Response`` and ``ZkWatchEvent``, but never expire a
session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from floodmark.reference.runtime import (
    ConnectionLossError,
    NoNodeError,
    SessionExpiredError,
    SessionListeners,
    SessionState,
    Stat,
    TxnOp,
    WatchCallback,
    WatchEvent,
    validate_path,
)
from floodmark.reference.sim.message_faults import ZK_NAMES, ZK_WATCH_EVENT
from floodmark.reference.sim.network import ZK
from floodmark.reference.sim.world_view import WorldView
from floodmark.reference.sim.zookeeper import Session, SimZooKeeper

T = TypeVar("T")
log = logging.getLogger(__name__)


class SimCoordination(SessionListeners):
    """Implements ``runtime.Coordination`` against :class:`SimZooKeeper`."""

    def __init__(self, world: WorldView, node: str, incarnation: int, session: Session) -> None:
        self._world = world
        self._server: SimZooKeeper = world.zk
        self._node = world.node(node)
        self._incarnation = incarnation
        self._session = session
        self._state: SessionState = "CONNECTED"
        self._closed = False
        self._listeners: list[Callable[[SessionState], None]] = []
        self._undelivered: list[tuple[WatchCallback, WatchEvent]] = []
        self._last_contact = world.loop.time()
        session.watch_sink = self._send_watch_event
        session.close_sink = self._send_connection_closed
        self._heartbeat = world.start_background(self._keep_alive(), f"zk session {node}")

    @property
    def session_id(self) -> int:
        return self._session.session_id

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def read_timeout(self) -> float:
        return self._session.timeout * 2 / 3

    # ------------------------------------------------------------------ requests

    async def _call(self, operation: str, apply: Callable[[], T]) -> T:
        """Send ``apply`` to the server, run it there on arrival, bring back its outcome.
        ``operation`` names the request and its reply on the network (``ZK_OPERATIONS``)."""
        await self._node.gate(self._incarnation)
        if self._closed:
            raise SessionExpiredError("the coordination session was closed")
        if self._state == "LOST":
            raise SessionExpiredError(f"session 0x{self.session_id:x} has expired")
        network = self._world.network
        request_kind, reply_kind = ZK_NAMES[operation]
        reply: asyncio.Future[Any] = self._world.loop.create_future()

        def on_server() -> None:
            if not self._session.expired:
                self._session.last_heard = self._world.loop.time()
            try:
                outcome: tuple[bool, Any] = (True, apply())
            except Exception as e:  # ZooKeeper's refusal, or a caller's mistake (bad path, str data)
                outcome = (False, e)
            network.deliver(ZK, self._node.name, lambda: _settle(reply, outcome), kind=reply_kind)

        network.deliver(self._node.name, ZK, on_server, kind=request_kind)
        try:
            ok, value = await asyncio.wait_for(reply, self.read_timeout)
        except TimeoutError:
            await self._node.gate(self._incarnation)
            raise ConnectionLossError("no reply from ZooKeeper within the read timeout") from None
        await self._node.gate(self._incarnation)
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False) -> str:
        validate_path(path)
        return await self._call("Create", lambda: self._server.create(
            self._session, path, data, ephemeral, sequential, makepath))

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        validate_path(path)
        return await self._call("GetData", lambda: self._server.get_data(self._session, path, watch))

    async def get_many(self, paths: list[str]) -> list[tuple[bytes, Stat] | None]:
        for path in paths:
            validate_path(path)
        paths = list(paths)

        def read_all() -> list[tuple[bytes, Stat] | None]:  # one request, as a multiRead is
            results: list[tuple[bytes, Stat] | None] = []
            for path in paths:
                try:
                    results.append(self._server.get_data(self._session, path, None))
                except NoNodeError:
                    results.append(None)
            return results

        return await self._call("GetMany", read_all)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        validate_path(path)
        return await self._call("Exists", lambda: self._server.exists_with_watch(self._session, path, watch))

    async def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        validate_path(path)
        return await self._call("GetChildren", lambda: self._server.get_children(self._session, path, watch))

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        validate_path(path)
        return await self._call("SetData", lambda: self._server.set_data(self._session, path, data, version))

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        validate_path(path)
        await self._call("Delete", lambda: self._server.delete(self._session, path, version, recursive))

    async def ensure_path(self, path: str) -> None:
        validate_path(path)
        if path == "/":
            return

        def make() -> None:
            if path not in self._server.tree:
                self._server.create(self._session, path, b"", False, False, True)

        await self._call("EnsurePath", make)

    async def multi(self, ops: list[TxnOp]) -> list[Any]:
        for op in ops:
            validate_path(op.path)
        ops = list(ops)
        return await self._call("Multi", lambda: self._server.multi(self._session, ops))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._world.zk_reachable(self._node.name, self._incarnation):
            self._heartbeat.cancel()
            self._server.end_session(self._session)
        # Otherwise the server expires the session after its timeout, as it would for real:
        # the heartbeat task, which keeps the server's clock for this session, goes on until
        # then. (Cancelled here, it left the session alive for ever: a broker restarted while
        # cut off from ZooKeeper kept /controller and its registration, so no controller was
        # elected again and its next process never registered: explore seeds 72,649, 72,721.)

    # ------------------------------------------------------------------ liveness

    def _client_alive(self) -> bool:
        return not self._closed and self._node.is_current(self._incarnation)

    async def _keep_alive(self) -> None:
        tick = max(self._session.timeout / 10, 0.001)
        loop = self._world.loop
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            reachable = self._world.zk_reachable(self._node.name, self._incarnation)
            session = self._session
            if not session.expired:
                if reachable and not self._closed:  # (a closed client pings no more)
                    session.last_heard = now
                elif now - session.last_heard > session.timeout:
                    self._server.end_session(session)
            if not self._client_alive():
                if session.expired:
                    return  # a dead client's session is over: nothing left to watch
                continue  # the server still has to expire the session of a crashed node
            if self._node.paused:
                continue  # a paused client notices nothing until it resumes
            if self._state == "LOST":
                return  # the server's closing of the connection told it already
            if reachable:
                if session.expired:
                    if self._state != "SUSPENDED":
                        self._change_state("SUSPENDED")
                    self._change_state("LOST")
                    return
                if self._state == "CONNECTED" and now - self._last_contact > self.read_timeout:
                    self._change_state("SUSPENDED")  # came back from a long pause
                if self._state == "SUSPENDED":
                    self._change_state("CONNECTED")
                self._redeliver()  # what the partition held back arrives, as TCP retransmits
                self._last_contact = now
            elif self._state == "CONNECTED" and now - self._last_contact > self.read_timeout:
                self._change_state("SUSPENDED")

    def _change_state(self, state: SessionState) -> None:
        self._state = state
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception as e:  # a listener bug must not stop the session machinery
                log.exception("%s: session listener failed", self._node.name)
                self._world.record_failure(self._node.name, "session listener", e)

    def _send_connection_closed(self) -> None:
        """The server expired the session and closes the connection. The close travels
        behind the replies already sent; a blocked link loses it, and the heartbeat finds
        the expiry once the server is reachable again."""
        self._world.network.deliver(ZK, self._node.name, self._hear_connection_closed)

    def _hear_connection_closed(self) -> None:
        if not self._client_alive():
            return

        async def lose_session() -> None:  # runs when the node may act: a paused one on resume
            if self._closed or self._state == "LOST":
                return
            if self._state != "SUSPENDED":
                self._change_state("SUSPENDED")  # the connection dropped
            self._change_state("LOST")  # the reconnection is told the session expired

        self._node.start_task(self._world.loop, self._incarnation, lose_session(), "zk session expired")

    # ------------------------------------------------------------------ watch delivery

    def _send_watch_event(self, callback: WatchCallback, event: WatchEvent) -> None:
        self._world.network.deliver(
            ZK, self._node.name,
            on_arrival=lambda: self._run_watch(callback, event),
            on_lost=lambda: self._undelivered.append((callback, event)),
            kind=ZK_WATCH_EVENT,
        )

    def _redeliver(self) -> None:
        pending, self._undelivered = self._undelivered, []
        for callback, event in pending:
            self._run_watch(callback, event)

    def _run_watch(self, callback: WatchCallback, event: WatchEvent) -> None:
        if not self._client_alive() or self._session.expired:
            return

        async def invoke() -> None:
            if self._closed or self._session.expired:
                return
            try:
                callback(event)
            except Exception as e:
                log.exception("%s: watch callback failed for %s", self._node.name, event)
                self._world.record_failure(self._node.name, f"watch on {event.path}", e)

        self._node.start_task(self._world.loop, self._incarnation, invoke(), f"watch {event.path}")


def _settle(reply: asyncio.Future[Any], outcome: Any) -> None:
    if not reply.done():
        reply.set_result(outcome)


async def connect(world: WorldView, node: str, incarnation: int, session_timeout: float) -> SimCoordination:
    """Open a session from ``node``; fails with ConnectionLossError if ZooKeeper is unreachable."""
    sim_node = world.node(node)
    await sim_node.gate(incarnation)
    opened: asyncio.Future[Session] = world.loop.create_future()

    request_kind, reply_kind = ZK_NAMES["Connect"]

    def on_server() -> None:
        session = world.zk.open_session(session_timeout, world.loop.time(), owner=node)
        world.network.deliver(ZK, node, lambda: _settle(opened, session), kind=reply_kind)

    world.network.deliver(node, ZK, on_server, kind=request_kind)
    try:
        session = await asyncio.wait_for(asyncio.shield(opened), session_timeout)
    except TimeoutError:
        await sim_node.gate(incarnation)
        raise ConnectionLossError(f"{node} could not reach ZooKeeper within {session_timeout}s") from None
    await sim_node.gate(incarnation)
    return SimCoordination(world, node, incarnation, session)
