"""Coordination on a real ZooKeeper: kazoo, with its thread tamed for the event loop.

kazoo runs its own connection and callback threads. Protocol code runs on one asyncio loop
and expects watch callbacks and session listeners to run there too, so this adapter turns
every kazoo asynchronous result into an asyncio future and hands every callback to the loop
with ``call_soon_threadsafe``. kazoo's exceptions become the runtime's own
(``NoNodeError``, ``BadVersionError``, ``ConnectionLossError``, ...); a failed
``transaction().commit()``, which in kazoo *returns* exception objects instead of raising,
becomes ``TransactionFailed(index, cause)`` naming the operation that failed.

Two differences between kazoo and the ``Coordination`` contract are bridged here:

* **One session per object.** After ``LOST`` kazoo quietly opens a new session; the
  adapter instead stays expired (every call raises ``SessionExpiredError``) and stops the
  client, because ephemerals and watches of the old session are gone and the owner must
  notice and start again with ``runtime.coordination``.
* **Requests never hang.** kazoo queues a request made while disconnected until it
  reconnects; the adapter gives up after two thirds of the session timeout (kazoo's read
  timeout) with ``ConnectionLossError``: the outcome is unknown, as the contract says.
* **Watches survive reconnection.** kazoo drops every watch when the connection is lost
  (it does not re-register them as the Java client does). The adapter remembers what each
  watch saw (the node's ``mzxid``, or its children's ``pzxid``) and, once reconnected to the
  same session, reads again: if something changed meanwhile it fires the watch, otherwise
  it re-arms it. This is ZooKeeper's own guarantee, and what the simulated client does.
* **Batched reads.** ``get_many`` sends ZooKeeper's ``multiRead`` request (opcode 22,
  ZooKeeper 3.6+), which kazoo lacks: hundreds of reads per round trip instead of one each,
  so a new controller re-reads 10,000 partition states in a few dozen packets. Against an
  older server it falls back to many concurrent ``get`` calls settled as one batch.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat

from floodmark.reference.real.kazoo_multi_read import MULTI_READ_PATHS, MultiRead, plain_transaction
from floodmark.reference.runtime import (
    BadVersionError,
    CheckOp,
    ConnectionLossError,
    CoordinationError,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SessionListeners,
    SessionState,
    SetDataOp,
    Stat,
    TransactionFailed,
    TxnOp,
    WatchCallback,
    WatchEvent,
    WatchEventType,
    validate_path,
)

log = logging.getLogger(__name__)

_ERRORS: tuple[tuple[type[Exception], type[CoordinationError]], ...] = (
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.SessionExpiredError, SessionExpiredError),
    (kz.ConnectionClosedError, SessionExpiredError),
    (kz.ConnectionLoss, ConnectionLossError),
    (kz.OperationTimeoutError, ConnectionLossError),
    (kz.NoChildrenForEphemeralsError, NoNodeError),
)


def translate(error: BaseException, path: str = "") -> BaseException:
    """The runtime's exception for a kazoo exception (others pass through unchanged)."""
    where = f"{path}: " if path else ""
    for kazoo_type, ours in _ERRORS:
        if isinstance(error, kazoo_type):
            return ours(f"{where}{str(error) or kazoo_type.__name__}")
    if isinstance(error, kz.KazooException):
        return CoordinationError(f"{where}{type(error).__name__}: {error}")
    return error


def to_stat(stat: ZnodeStat) -> Stat:
    return Stat(stat.version, stat.czxid, stat.mzxid, stat.cversion, stat.ephemeralOwner,
                stat.numChildren)


WatchKind = Literal["data", "exists", "children"]


@dataclass
class _Watch:
    """A watch as the adapter tracks it, to re-arm it after a reconnection."""

    kind: WatchKind
    path: str
    callback: WatchCallback
    seen: int | None  # mzxid (data/exists; None: node absent) or pzxid (children)


class KazooCoordination(SessionListeners):
    """``runtime.Coordination`` over one kazoo session."""

    def __init__(self, client: KazooClient, loop: asyncio.AbstractEventLoop,
                 session_timeout: float) -> None:
        self._client = client
        self._loop = loop
        self._request_timeout = session_timeout * 2 / 3  # kazoo's own read timeout
        self._session_id = int(client.client_id[0])
        self._multi_read_supported = True
        self._expired = False
        self._closed = False
        self._suspended = False
        self._listeners: list[Callable[[SessionState], None]] = []
        self._armed: dict[tuple[WatchKind, str, WatchCallback], _Watch] = {}
        self._wrappers: dict[tuple[WatchKind, str, WatchCallback], Callable[[WatchedEvent], None]] = {}
        client.add_listener(self._on_kazoo_state)

    @classmethod
    async def connect(cls, hosts: str, session_timeout: float,
                      connect_timeout: float | None = None) -> KazooCoordination:
        """Open a session; raises ConnectionLossError if ZooKeeper cannot be reached in time."""
        loop = asyncio.get_running_loop()
        client = KazooClient(hosts=hosts, timeout=session_timeout,
                             connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0})
        timeout = connect_timeout if connect_timeout is not None else max(session_timeout, 5.0)
        try:
            await loop.run_in_executor(None, client.start, timeout)
        except Exception as e:
            await loop.run_in_executor(None, _stop_quietly, client)
            raise ConnectionLossError(f"could not connect to ZooKeeper at {hosts}: {e}") from None
        return cls(client, loop, session_timeout)

    @property
    def session_id(self) -> int:
        return self._session_id

    # ------------------------------------------------------------------ calls

    async def _call(self, path: str, start: Callable[[], Any]) -> Any:
        """Run a kazoo ``*_async`` call on ``path`` and await its result on the loop."""
        validate_path(path)
        self._check_session()
        future: asyncio.Future[Any] = self._loop.create_future()

        def done(result: Any) -> None:  # on a kazoo thread
            try:
                outcome: tuple[bool, Any] = (True, result.get_nowait())
            except Exception as e:
                outcome = (False, e)
            self._post(_settle, future, outcome)

        try:
            start().rawlink(done)
        except Exception as e:
            raise translate(e, path) from None
        try:
            # kazoo holds requests made while disconnected until it reconnects, however long
            # that takes; the contract is ConnectionLossError (outcome unknown) instead.
            ok, value = await asyncio.wait_for(future, self._request_timeout)
        except TimeoutError:
            raise ConnectionLossError(
                f"{path}: no reply from ZooKeeper within {self._request_timeout:.1f}s") from None
        if not ok:
            raise translate(value, path) from None
        self._check_session()  # kazoo may have answered on a newer session
        return value

    def _check_session(self) -> None:
        client_id = self._client.client_id  # None while kazoo is between connections
        if self._expired or (client_id is not None and client_id[0] != self._session_id):
            self._expired = True
            raise SessionExpiredError(f"session 0x{self._session_id:x} has expired")
        if self._closed:
            raise SessionExpiredError("the coordination session was closed")

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False) -> str:
        created = await self._call(path, lambda: self._client.create_async(
            path, data, ephemeral=ephemeral, sequence=sequential, makepath=makepath))
        return str(created)

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        kazoo_watch = self._wrapper("data", path, watch)
        try:
            data, stat = await self._call(path, lambda: self._client.get_async(path, watch=kazoo_watch))
        except BaseException:
            self._disarm("data", path, watch)  # no node, no watch (or an unknown outcome: retried)
            raise
        self._armed_now("data", path, watch, stat.mzxid)
        return bytes(data), to_stat(stat)

    async def get_many(self, paths: list[str]) -> list[tuple[bytes, Stat] | None]:
        for path in paths:
            validate_path(path)
        results: list[tuple[bytes, Stat] | None] = []
        chunks = [list(paths[start:start + MULTI_READ_PATHS]) for start in range(0, len(paths), MULTI_READ_PATHS)]
        # Every batch in flight at once (a new controller reads 10,000 state nodes): ZooKeeper
        # answers the next while this process decodes the last, as the writes are pipelined.
        for chunk, replies in zip(chunks, await asyncio.gather(*(self._read_batch(c) for c in chunks))):
            for path, reply in zip(chunk, replies):
                if isinstance(reply, kz.NoNodeError):
                    results.append(None)
                elif isinstance(reply, Exception):
                    raise translate(reply, path)
                else:
                    data, stat = reply
                    results.append((bytes(data), to_stat(stat)))
        return results

    async def _read_batch(self, paths: list[str]) -> list[Any]:
        """Per path (data, ZnodeStat) or the kazoo exception of that read."""
        if self._multi_read_supported:
            request = MultiRead(self._rooted(paths))
            try:
                return list(await self._call(paths[0], lambda: self._submit(request)))
            except CoordinationError as e:
                if "Unimplemented" not in str(e):
                    raise
                self._multi_read_supported = False  # ZooKeeper before 3.6
        return await self._get_concurrently(paths)

    def _rooted(self, paths: list[str]) -> list[str]:
        root = self._client.chroot or ""
        return [root + path if path != "/" or not root else root for path in paths]

    def _submit(self, request: Any) -> Any:
        """Queue a request kazoo has no method for (kazoo's own ``*_async`` calls do this)."""
        result = self._client.handler.async_result()
        self._client._call(request, result)
        return result

    async def _get_concurrently(self, paths: list[str]) -> list[Any]:
        """Every ``get`` in flight at once; the batch settles on the loop once, when the last lands."""
        self._check_session()
        future: asyncio.Future[list[Any]] = self._loop.create_future()
        replies: list[Any] = [None] * len(paths)
        remaining = [len(paths)]
        lock = threading.Lock()

        def landed(index: int, result: Any) -> None:  # on a kazoo thread
            try:
                replies[index] = result.get_nowait()
            except Exception as e:
                replies[index] = e
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self._post(_settle, future, replies)

        for index, path in enumerate(paths):
            self._client.get_async(path).rawlink(functools.partial(landed, index))
        try:
            return await asyncio.wait_for(future, self._request_timeout)
        except TimeoutError:
            raise ConnectionLossError(
                f"{paths[0]}: no reply from ZooKeeper within {self._request_timeout:.1f}s") from None

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        kazoo_watch = self._wrapper("exists", path, watch)
        stat = await self._call(path, lambda: self._client.exists_async(path, watch=kazoo_watch))
        self._armed_now("exists", path, watch, stat.mzxid if stat else None)
        return to_stat(stat) if stat else None

    async def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        kazoo_watch = self._wrapper("children", path, watch)
        try:
            children, stat = await self._call(path, lambda: self._client.get_children_async(
                path, watch=kazoo_watch, include_data=True))
        except BaseException:
            self._disarm("children", path, watch)
            raise
        self._armed_now("children", path, watch, stat.pzxid)
        return sorted(children)

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        return to_stat(await self._call(path, lambda: self._client.set_async(path, data, version)))

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        if recursive:  # children first, deepest first, siblings concurrently (not atomic, as in kazoo)
            await asyncio.gather(*(self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
                                   for child in await self.get_children(path)))
        await self._call(path, lambda: self._client.delete_async(path, version))

    async def ensure_path(self, path: str) -> None:
        await self._call(path, lambda: self._client.ensure_path_async(path))

    async def multi(self, ops: list[TxnOp]) -> list[Any]:
        for op in ops:
            validate_path(op.path)

        def start() -> Any:
            plain = plain_transaction(ops, self._client.chroot)
            if plain is not None:  # a controller's state writes: thousands of operations
                return self._submit(plain)
            transaction = self._client.transaction()
            for op in ops:
                if isinstance(op, CreateOp):
                    transaction.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
                elif isinstance(op, SetDataOp):
                    transaction.set_data(op.path, op.data, op.version)
                elif isinstance(op, DeleteOp):
                    transaction.delete(op.path, op.version)
                elif isinstance(op, CheckOp):
                    transaction.check(op.path, op.version)
                else:
                    raise TypeError(f"not a transaction op: {op!r}")
            return transaction.commit_async()

        results = await self._call(ops[0].path if ops else "/", start)
        # kazoo reports a rejected transaction by returning exceptions, one per op: the op
        # that failed carries the real error, the others RolledBackError.
        for index, result in enumerate(results):
            if isinstance(result, Exception) and not isinstance(
                    result, kz.RolledBackError | kz.RuntimeInconsistency):
                cause = translate(result)
                if not isinstance(cause, CoordinationError):
                    cause = CoordinationError(str(cause))
                raise TransactionFailed(index, cause)
        if any(isinstance(r, Exception) for r in results):
            raise TransactionFailed(0, CoordinationError("transaction rolled back"))
        return [to_stat(r) if isinstance(r, ZnodeStat) else r for r in results]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._client.remove_listener(self._on_kazoo_state)
        await self._loop.run_in_executor(None, _stop_quietly, self._client)

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        """From a kazoo thread: run ``callback`` on the event loop (dropped once it is closed)."""
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            log.debug("event loop closed; dropped a ZooKeeper callback")

    # ------------------------------------------------------------------ session states

    def _on_kazoo_state(self, state: str) -> None:  # on a kazoo thread
        if state == KazooState.LOST:
            self._expired = True  # at once, so no call slips through on a newer session
        self._post(self._state_changed, str(state))

    def _state_changed(self, state: str) -> None:
        if self._closed:
            return
        if state == KazooState.LOST:
            if not self._suspended:
                self._notify("SUSPENDED")
            self._notify("LOST")
            self._armed.clear()
            self._closed = True  # the session is over: stop kazoo from opening another
            self._loop.run_in_executor(None, _stop_quietly, self._client)
        elif state == KazooState.SUSPENDED:
            self._suspended = True
            self._notify("SUSPENDED")
        elif state == KazooState.CONNECTED and self._suspended:
            self._suspended = False
            if self._client.client_id and self._client.client_id[0] != self._session_id:
                self._expired = True
                self._notify("LOST")
                return
            self._notify("CONNECTED")
            self._loop.create_task(self._rearm_watches(), name="re-arm ZooKeeper watches")

    def _notify(self, state: SessionState) -> None:
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("ZooKeeper session listener failed on %s", state)

    # ------------------------------------------------------------------ watches

    def _wrapper(self, kind: WatchKind, path: str, callback: WatchCallback | None
                 ) -> Callable[[WatchedEvent], None] | None:
        """The function given to kazoo: one per (kind, path, callback), so kazoo deduplicates."""
        if callback is None:
            return None
        key = (kind, path, callback)
        wrapper = self._wrappers.get(key)
        if wrapper is None:
            def wrapper(event: WatchedEvent) -> None:  # on a kazoo thread
                if event.type != EventType.NONE:  # NONE: connection lost, handled by re-arming
                    self._post(self._fire, key, WatchEvent(event.type, path))

            self._wrappers[key] = wrapper
        # Armed before the request goes out: ZooKeeper may fire the watch before the reply has
        # woken the awaiting coroutine, and an event for an unarmed key would be dropped.
        self._armed[key] = _Watch(kind, path, callback, None)
        return wrapper

    def _armed_now(self, kind: WatchKind, path: str, callback: WatchCallback | None, seen: int | None) -> None:
        """Note what the watch saw, unless it has already fired."""
        watch = self._armed.get((kind, path, callback)) if callback is not None else None
        if watch is not None:
            watch.seen = seen

    def _disarm(self, kind: WatchKind, path: str, callback: WatchCallback | None) -> None:
        if callback is not None:
            self._armed.pop((kind, path, callback), None)

    def _fire(self, key: tuple[WatchKind, str, WatchCallback], event: WatchEvent) -> None:
        if self._closed or self._expired or self._armed.pop(key, None) is None:
            return
        try:
            key[2](event)
        except Exception:
            log.exception("ZooKeeper watch callback failed for %s", event)

    async def _rearm_watches(self) -> None:
        """After a reconnection: fire the watches whose node changed, re-arm the others."""
        for key, watch in list(self._armed.items()):
            try:
                event = await self._rearm(watch)
            except CoordinationError:
                return  # disconnected again: the next CONNECTED re-arms what is left
            if event is not None:
                self._fire(key, event)

    async def _rearm(self, watch: _Watch) -> WatchEvent | None:
        """Register the watch again; the event it missed while disconnected, if any."""
        path, callback, seen = watch.path, watch.callback, watch.seen
        try:
            if watch.kind == "data":
                _, stat = await self.get(path, callback)
                return WatchEvent("CHANGED", path) if stat.mzxid != seen else None
            if watch.kind == "children":
                await self.get_children(path, callback)
                return WatchEvent("CHILD", path) if self._armed_seen(watch) != seen else None
            exists = await self.exists(path, callback)
            now = exists.mzxid if exists else None
            if now == seen:
                return None
            kind: WatchEventType = "CREATED" if seen is None else "DELETED" if now is None else "CHANGED"
            return WatchEvent(kind, path)
        except NoNodeError:
            return WatchEvent("DELETED", path)

    def _armed_seen(self, watch: _Watch) -> int | None:
        armed = self._armed.get((watch.kind, watch.path, watch.callback))
        return armed.seen if armed else None


def _settle(future: asyncio.Future[Any], outcome: Any) -> None:
    if not future.done():
        future.set_result(outcome)


def _stop_quietly(client: KazooClient) -> None:
    try:
        client.stop()
        client.close()
    except Exception:
        log.debug("error while stopping kazoo", exc_info=True)
