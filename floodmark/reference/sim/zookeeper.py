"""The simulated ZooKeeper server: a tree of versioned nodes, sessions and one-shot watches.

It keeps the parts of ZooKeeper's data model that replication protocols lean on:

* every write gets the next **zxid** from a global counter; a node records the zxid that
  created it (``czxid``, a broker's incarnation id) and last modified it (``mzxid``);
* a node's data **version** counts its writes and makes ``set``/``delete`` conditional;
  ``cversion`` counts child creations and deletions; **sequential** children are numbered
  by the count of children ever created under the parent (``name0000000007``; as measured
  on ZooKeeper 3.8, deletions do not advance the sequence);
* **ephemeral** nodes belong to a session and vanish when it expires or closes; a test or
  a nemesis can expire a live client's session at once (:meth:`SimZooKeeper.expire`);
* **watches** are one-shot and per session: a data watch (``get``, or ``exists`` on a node
  that exists) fires on change or deletion, an exists watch on a missing node fires on
  creation, a child watch on a change of the children or the node's deletion;
* **multi** applies a list of operations atomically under one zxid, or none of them
  (``TransactionFailed`` names the first operation that failed), and fires watches only
  after it commits.

The server applies a request the moment it arrives over the simulated network (see
``sim.coordination`` for the client side and session liveness). Tests inspect the tree
directly with :meth:`SimZooKeeper.get`, :meth:`children` and :meth:`exists`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from floodmark.reference.runtime import (
    BadVersionError,
    CheckOp,
    CoordinationError,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SetDataOp,
    Stat,
    TransactionFailed,
    TxnOp,
    WatchCallback,
    WatchEvent,
    WatchEventType,
    validate_path,
)

Undo = list[Callable[[], None]]


@dataclass
class ZNode:
    data: bytes
    czxid: int
    mzxid: int
    version: int = 0
    cversion: int = 0
    ephemeral_owner: int = 0
    children_created: int = 0  # numbers sequential children: deletes do not count
    children: dict[str, None] = field(default_factory=dict)

    def stat(self) -> Stat:
        return Stat(self.version, self.czxid, self.mzxid, self.cversion, self.ephemeral_owner,
                    len(self.children))


class Session:
    """Server-side session state; ``watch_sink`` carries fired watches to the client and
    ``close_sink`` tells it the server closed its connection (see :meth:`SimZooKeeper.expire`)."""

    def __init__(self, session_id: int, timeout: float, now: float, owner: str = "") -> None:
        self.session_id = session_id
        self.timeout = timeout
        self.owner = owner  # the node that opened it
        self.last_heard = now
        self.expired = False
        self.ephemerals: dict[str, None] = {}
        self.watch_sink: Callable[[WatchCallback, WatchEvent], None] = lambda cb, ev: None
        self.close_sink: Callable[[], None] = lambda: None


Watches = dict[str, list[tuple[Session, WatchCallback]]]


def parent_of(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


def _join(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


class SimZooKeeper:
    def __init__(self) -> None:
        self.zxid = 0
        self.tree: dict[str, ZNode] = {"/": ZNode(b"", 0, 0)}
        self.sessions: dict[int, Session] = {}
        self._next_session_id = 0x0100_0000_0000_0001
        self._data_watches: Watches = {}
        self._exist_watches: Watches = {}
        self._child_watches: Watches = {}
        self._create(None, "/zookeeper", b"", False, False, False, self._next_zxid(), [], [])

    # ------------------------------------------------------------------ inspection (tests)

    def get(self, path: str) -> tuple[bytes, Stat]:
        node = self._node(path)
        return node.data, node.stat()

    def exists(self, path: str) -> Stat | None:
        node = self.tree.get(path)
        return node.stat() if node else None

    def children(self, path: str) -> list[str]:
        return sorted(self._node(path).children)

    def read(self, path: str) -> tuple[bytes, int] | None:
        """A node's data and version, or None when absent (the harness's view of ZooKeeper)."""
        node = self.tree.get(path)
        return None if node is None else (node.data, node.stat().version)

    # ------------------------------------------------------------------ sessions

    def open_session(self, timeout: float, now: float, owner: str = "") -> Session:
        session = Session(self._next_session_id, timeout, now, owner)
        self._next_session_id += 1
        self.sessions[session.session_id] = session
        return session

    def sessions_of(self, owner: str) -> list[Session]:
        """The live sessions ``owner`` opened, oldest first."""
        return [s for s in self.sessions.values() if s.owner == owner]

    def expire(self, session: Session) -> list[str]:
        """Expire a session now, as the server's session tracker does when a client has been
        silent too long, and close its connection; returns the ephemerals that went."""
        if session.expired:
            return []
        ephemerals = sorted(session.ephemerals)
        self.end_session(session)
        session.close_sink()
        return ephemerals

    def end_session(self, session: Session) -> None:
        """Expiry or close: the session's ephemerals go, in one transaction, and its watches."""
        if session.expired:
            return
        session.expired = True
        self.sessions.pop(session.session_id, None)
        for watches in (self._data_watches, self._exist_watches, self._child_watches):
            for path in list(watches):
                watches[path] = [(s, cb) for s, cb in watches[path] if s is not session]
                if not watches[path]:
                    del watches[path]
        if session.ephemerals:
            zxid = self._next_zxid()
            fired: list[tuple[str, WatchEventType]] = []
            for path in sorted(session.ephemerals, key=lambda p: (-p.count("/"), p)):
                if path in self.tree:
                    self._delete(None, path, -1, zxid, [], fired)
            self._fire(fired)

    def _live(self, session: Session) -> None:
        if session.expired:
            raise SessionExpiredError(f"session 0x{session.session_id:x} has expired")

    # ------------------------------------------------------------------ requests

    def create(self, session: Session, path: str, data: bytes, ephemeral: bool, sequential: bool,
               makepath: bool) -> str:
        self._live(session)
        fired: list[tuple[str, WatchEventType]] = []
        zxid = self._next_zxid()
        if makepath:
            self._make_parents(parent_of(path), zxid, fired)
        created = self._create(session, path, data, ephemeral, sequential, makepath, zxid, [], fired)
        self._fire(fired)
        return created

    def get_data(self, session: Session, path: str, watch: WatchCallback | None) -> tuple[bytes, Stat]:
        self._live(session)
        node = self._node(path)
        if watch is not None:
            self._add_watch(self._data_watches, path, session, watch)
        return node.data, node.stat()

    def exists_with_watch(self, session: Session, path: str, watch: WatchCallback | None) -> Stat | None:
        self._live(session)
        node = self.tree.get(path)
        if watch is not None:
            watches = self._data_watches if node else self._exist_watches
            self._add_watch(watches, path, session, watch)
        return node.stat() if node else None

    def get_children(self, session: Session, path: str, watch: WatchCallback | None) -> list[str]:
        self._live(session)
        node = self._node(path)
        if watch is not None:
            self._add_watch(self._child_watches, path, session, watch)
        return sorted(node.children)

    def set_data(self, session: Session, path: str, data: bytes, version: int) -> Stat:
        self._live(session)
        fired: list[tuple[str, WatchEventType]] = []
        stat = self._set(path, data, version, self._next_zxid(), [], fired)
        self._fire(fired)
        return stat

    def delete(self, session: Session, path: str, version: int, recursive: bool) -> None:
        self._live(session)
        fired: list[tuple[str, WatchEventType]] = []
        zxid = self._next_zxid()
        if recursive:
            node = self._node(path)
            if version != -1 and version != node.version:
                raise BadVersionError(path)
            for descendant in sorted(self._descendants(path), key=lambda p: (-p.count("/"), p)):
                self._delete(session, descendant, -1, zxid, [], fired)
        self._delete(session, path, version, zxid, [], fired)
        self._fire(fired)

    def multi(self, session: Session, ops: list[TxnOp]) -> list[Any]:
        """All or nothing: on the first failing op, undo the earlier ones and raise."""
        self._live(session)
        zxid = self._next_zxid()
        undo: Undo = []
        fired: list[tuple[str, WatchEventType]] = []
        results: list[Any] = []
        for index, op in enumerate(ops):
            try:
                results.append(self._apply(session, op, zxid, undo, fired))
            except CoordinationError as cause:
                for step in reversed(undo):
                    step()
                raise TransactionFailed(index, cause) from None
        self._fire(fired)
        return results

    def _apply(self, session: Session, op: TxnOp, zxid: int, undo: Undo,
               fired: list[tuple[str, WatchEventType]]) -> Any:
        if isinstance(op, CreateOp):
            return self._create(session, op.path, op.data, op.ephemeral, op.sequential, False,
                                zxid, undo, fired)
        if isinstance(op, SetDataOp):
            return self._set(op.path, op.data, op.version, zxid, undo, fired)
        if isinstance(op, DeleteOp):
            self._delete(session, op.path, op.version, zxid, undo, fired)
            return True
        if isinstance(op, CheckOp):
            node = self._node(op.path)
            if op.version != -1 and node.version != op.version:
                raise BadVersionError(f"{op.path}: version {node.version}, expected {op.version}")
            return True
        raise TypeError(f"not a transaction op: {op!r}")

    # ------------------------------------------------------------------ tree mutations

    def _next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid

    def _node(self, path: str) -> ZNode:
        validate_path(path)
        node = self.tree.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def _make_parents(self, path: str, zxid: int, fired: list[tuple[str, WatchEventType]]) -> None:
        missing = []
        while path not in self.tree:
            missing.append(path)
            path = parent_of(path)
        for p in reversed(missing):
            self._create(None, p, b"", False, False, False, zxid, [], fired)

    def _create(self, session: Session | None, path: str, data: bytes, ephemeral: bool,
                sequential: bool, makepath: bool, zxid: int, undo: Undo,
                fired: list[tuple[str, WatchEventType]]) -> str:
        validate_path(path)
        parent_path = parent_of(path)
        parent = self.tree.get(parent_path)
        if parent is None:
            raise NoNodeError(f"{parent_path} (parent of {path})")
        if parent.ephemeral_owner:
            raise NoNodeError(f"{parent_path} is ephemeral and cannot have children")
        if sequential:
            path = f"{path}{parent.children_created:010d}"
        if path in self.tree:
            raise NodeExistsError(path)
        owner = session.session_id if (ephemeral and session) else 0
        node = ZNode(bytes(data), zxid, zxid, ephemeral_owner=owner)
        name = path.rsplit("/", 1)[1]
        self.tree[path] = node
        parent.children[name] = None
        parent.cversion += 1
        parent.children_created += 1
        if ephemeral and session:
            session.ephemerals[path] = None

        def revert() -> None:
            del self.tree[path]
            del parent.children[name]
            parent.cversion -= 1
            parent.children_created -= 1
            if ephemeral and session:
                session.ephemerals.pop(path, None)

        undo.append(revert)
        fired.append((path, "CREATED"))
        fired.append((parent_path, "CHILD"))
        return path

    def _set(self, path: str, data: bytes, version: int, zxid: int, undo: Undo,
             fired: list[tuple[str, WatchEventType]]) -> Stat:
        node = self._node(path)
        if version != -1 and node.version != version:
            raise BadVersionError(f"{path}: version {node.version}, expected {version}")
        before = (node.data, node.version, node.mzxid)
        node.data, node.version, node.mzxid = bytes(data), node.version + 1, zxid

        def revert() -> None:
            node.data, node.version, node.mzxid = before

        undo.append(revert)
        fired.append((path, "CHANGED"))
        return node.stat()

    def _delete(self, session: Session | None, path: str, version: int, zxid: int, undo: Undo,
                fired: list[tuple[str, WatchEventType]]) -> None:
        node = self._node(path)
        if path == "/":
            raise BadVersionError("the root cannot be deleted")
        if version != -1 and node.version != version:
            raise BadVersionError(f"{path}: version {node.version}, expected {version}")
        if node.children:
            raise NotEmptyError(path)
        parent_path = parent_of(path)
        parent = self.tree[parent_path]
        name = path.rsplit("/", 1)[1]
        owner = self.sessions.get(node.ephemeral_owner) if node.ephemeral_owner else None
        del self.tree[path]
        del parent.children[name]
        parent.cversion += 1
        if owner is not None:
            owner.ephemerals.pop(path, None)

        def revert() -> None:
            self.tree[path] = node
            parent.children[name] = None
            parent.cversion -= 1
            if owner is not None:
                owner.ephemerals[path] = None

        undo.append(revert)
        fired.append((path, "DELETED"))
        fired.append((parent_path, "CHILD"))

    def _descendants(self, path: str) -> list[str]:
        found = []
        stack = [path]
        while stack:
            current = stack.pop()
            for name in self.tree[current].children:
                child = _join(current, name)
                found.append(child)
                stack.append(child)
        return found

    # ------------------------------------------------------------------ watches

    def _add_watch(self, watches: Watches, path: str, session: Session, callback: WatchCallback) -> None:
        registered = watches.setdefault(path, [])
        # As in kazoo, the same function registered twice on a path is called once.
        if not any(s is session and cb == callback for s, cb in registered):
            registered.append((session, callback))

    def _fire(self, fired: list[tuple[str, WatchEventType]]) -> None:
        for path, kind in fired:
            if kind == "CHILD":
                triggered = self._child_watches.pop(path, [])
            else:
                triggered = self._data_watches.pop(path, []) + self._exist_watches.pop(path, [])
                if kind == "DELETED":
                    triggered += self._child_watches.pop(path, [])
            for session, callback in triggered:
                session.watch_sink(callback, WatchEvent(kind, path))
