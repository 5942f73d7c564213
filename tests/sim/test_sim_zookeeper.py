"""ZooKeeper semantics, checked against the simulated server and (when Java and the ZooKeeper
jar are present) against a real ZooKeeper through the kazoo adapter, with the same tests: the
simulation must behave like the real thing in everything the protocol relies on.

Session loss through faults is simulation-specific here (see test_real_coordination.py for the
real one).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from runtime_fixtures import RealZooKeeperBackend, zookeeper_server_fixture  # noqa: F401

from floodmark.reference.runtime import (
    BadVersionError,
    CheckOp,
    Coordination,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SetDataOp,
    Stat,
    TransactionFailed,
    WatchEvent,
)
from floodmark.reference.sim import SimWorld

T = TypeVar("T")


class SimBackend:
    """Runs the suite on a simulated world; each session comes from its own node."""

    root = "/suite"

    def __init__(self) -> None:
        self.world = SimWorld(seed=3)
        self._names = (f"c{i}" for i in itertools.count())

    def run(self, coro: Awaitable[T]) -> T:
        return self.world.run(coro)

    async def session(self, timeout: float = 6.0) -> Coordination:
        return await self.world.add_node(next(self._names)).coordination(timeout)

    async def settle(self) -> None:
        await asyncio.sleep(0.2)

    def close(self) -> None:
        self.world.close()


@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "sim":
        b: Any = SimBackend()
    else:
        b = RealZooKeeperBackend(request.getfixturevalue("zookeeper_server"))
    try:
        yield b
    finally:
        b.close()


def test_versions_and_conditional_writes(backend: Any) -> None:
    async def scenario() -> None:
        zk = await backend.session()
        path = f"{backend.root}/node"
        created = await zk.create(path, b"v0", makepath=True)
        assert created == path
        data, stat = await zk.get(path)
        assert (data, stat.version, stat.ephemeral_owner) == (b"v0", 0, 0)
        assert stat.czxid == stat.mzxid
        stat1 = await zk.set(path, b"v1", version=0)
        assert stat1.version == 1 and stat1.czxid == stat.czxid and stat1.mzxid > stat.mzxid
        with pytest.raises(BadVersionError):
            await zk.set(path, b"stale", version=0)
        with pytest.raises(BadVersionError):
            await zk.delete(path, version=0)
        assert (await zk.get(path))[0] == b"v1"
        await zk.set(path, b"v2")  # -1: unconditional
        assert (await zk.get(path))[1].version == 2
        await zk.delete(path, version=2)
        assert await zk.exists(path) is None

    backend.run(scenario())


def test_create_errors_and_paths(backend: Any) -> None:
    async def scenario() -> None:
        zk = await backend.session()
        root = backend.root
        with pytest.raises(NoNodeError):
            await zk.create(f"{root}/missing/child", b"")
        await zk.create(f"{root}/a/b", b"x", makepath=True)
        with pytest.raises(NodeExistsError):
            await zk.create(f"{root}/a/b", b"y")
        with pytest.raises(NotEmptyError):
            await zk.delete(f"{root}/a")
        with pytest.raises(NoNodeError):
            await zk.get(f"{root}/nothing")
        with pytest.raises(NoNodeError):
            await zk.set(f"{root}/nothing", b"")
        await zk.ensure_path(f"{root}/p/q/r")
        await zk.ensure_path(f"{root}/p/q/r")  # idempotent
        for name in ("zeta", "alpha", "mid"):
            await zk.create(f"{root}/p/{name}", b"")
        assert await zk.get_children(f"{root}/p") == ["alpha", "mid", "q", "zeta"]
        assert (await zk.get(f"{root}/p"))[1].num_children == 4
        await zk.delete(f"{root}/p", recursive=True)
        assert await zk.exists(f"{root}/p") is None
        with pytest.raises(ValueError):
            await zk.create("relative/path", b"")
        with pytest.raises(TypeError):
            await zk.create(f"{root}/text", "not bytes")  # type: ignore[arg-type]
        assert await zk.exists(f"{root}/text") is None

    backend.run(scenario())


def test_zxids_grow_across_the_whole_tree(backend: Any) -> None:
    async def scenario() -> None:
        zk = await backend.session()
        await zk.ensure_path(backend.root)
        first = await zk.create(f"{backend.root}/first", b"")
        second = await zk.create(f"{backend.root}/second", b"")
        s1, s2 = (await zk.exists(first)), (await zk.exists(second))
        assert s1 is not None and s2 is not None and s2.czxid > s1.czxid
        changed = await zk.set(first, b"later")
        assert changed.mzxid > s2.czxid

    backend.run(scenario())


def test_sequential_nodes_are_numbered_by_children_created(backend: Any) -> None:
    async def scenario() -> None:
        zk = await backend.session()
        parent = f"{backend.root}/events"
        await zk.ensure_path(parent)
        made = [await zk.create(f"{parent}/event_", b"", sequential=True) for _ in range(3)]
        assert made == [f"{parent}/event_{i:010d}" for i in range(3)]
        await zk.delete(made[2])
        await zk.create(f"{parent}/other", b"")
        # Other creates count, deletes do not; cversion counts both.
        assert await zk.create(f"{parent}/event_", b"", sequential=True) == f"{parent}/event_{4:010d}"
        stat = await zk.exists(parent)
        assert stat is not None and stat.cversion == 6

    backend.run(scenario())


def test_ephemerals_belong_to_the_session_and_vanish_when_it_closes(backend: Any) -> None:
    async def scenario() -> None:
        owner = await backend.session()
        observer = await backend.session()
        path = f"{backend.root}/brokers/ids/1"
        await observer.ensure_path(f"{backend.root}/brokers/ids")
        await owner.create(path, b"broker-1", ephemeral=True)
        stat = await observer.exists(path)
        assert stat is not None and stat.ephemeral_owner == owner.session_id != 0
        assert owner.session_id != observer.session_id
        events: list[WatchEvent] = []
        children: list[WatchEvent] = []
        await observer.exists(path, watch=events.append)
        await observer.get_children(f"{backend.root}/brokers/ids", watch=children.append)
        await owner.close()
        await backend.settle()
        assert await observer.exists(path) is None
        assert events == [WatchEvent("DELETED", path)]
        assert children == [WatchEvent("CHILD", f"{backend.root}/brokers/ids")]
        with pytest.raises(SessionExpiredError):
            await owner.get(backend.root)

    backend.run(scenario())


def test_watches_fire_once(backend: Any) -> None:
    async def scenario() -> None:
        writer = await backend.session()
        reader = await backend.session()
        path = f"{backend.root}/w"
        missing = f"{backend.root}/later"
        await writer.create(path, b"0", makepath=True)
        data_events: list[WatchEvent] = []
        child_events: list[WatchEvent] = []
        created_events: list[WatchEvent] = []
        await reader.get(path, watch=data_events.append)
        await reader.get_children(backend.root, watch=child_events.append)
        assert await reader.exists(missing, watch=created_events.append) is None
        await writer.set(path, b"1")
        await writer.set(path, b"2")  # the data watch was used up by the first change
        await writer.create(missing, b"")
        await writer.create(f"{backend.root}/third", b"")  # child watch already used up
        await backend.settle()
        assert data_events == [WatchEvent("CHANGED", path)]
        assert created_events == [WatchEvent("CREATED", missing)]
        assert child_events == [WatchEvent("CHILD", backend.root)]
        # Re-arming works and sees deletion.
        await reader.get(path, watch=data_events.append)
        await writer.delete(path)
        await backend.settle()
        assert data_events[-1] == WatchEvent("DELETED", path)

    backend.run(scenario())


def test_watch_callbacks_run_on_the_loop_thread_once_per_registration(backend: Any) -> None:
    async def scenario() -> None:
        writer = await backend.session()
        reader = await backend.session()
        path = f"{backend.root}/dedup"
        await writer.create(path, b"", makepath=True)
        threads: list[int] = []

        def callback(event: WatchEvent) -> None:
            threads.append(threading.get_ident())

        await reader.get(path, watch=callback)
        await reader.get(path, watch=callback)  # the same function twice: one watch, as in kazoo
        await writer.set(path, b"x")
        await backend.settle()
        assert threads == [threading.get_ident()]  # once, and on the event loop's thread

    backend.run(scenario())


def test_multi_applies_all_or_nothing(backend: Any) -> None:
    async def scenario() -> None:
        zk = await backend.session()
        root = backend.root
        await zk.create(f"{root}/epoch", b"1", makepath=True)
        await zk.create(f"{root}/state", b"a")
        await zk.create(f"{root}/gone", b"")
        epoch_stat = await zk.exists(f"{root}/epoch")
        assert epoch_stat is not None
        results = await zk.multi([
            CheckOp(f"{root}/epoch", epoch_stat.version),
            SetDataOp(f"{root}/state", b"b", version=0),
            CreateOp(f"{root}/new", b"n"),
            DeleteOp(f"{root}/gone"),
        ])
        assert results[0] is True and isinstance(results[1], Stat) and results[1].version == 1
        assert results[2] == f"{root}/new" and results[3] is True
        before = await zk.get(f"{root}/state")
        with pytest.raises(TransactionFailed) as failed:
            await zk.multi([
                SetDataOp(f"{root}/state", b"c"),
                CreateOp(f"{root}/another", b""),
                CheckOp(f"{root}/epoch", epoch_stat.version + 7),  # a newer controller bumped it
            ])
        assert failed.value.index == 2 and isinstance(failed.value.cause, BadVersionError)
        assert await zk.get(f"{root}/state") == before
        assert await zk.exists(f"{root}/another") is None
        with pytest.raises(TransactionFailed) as failed:
            await zk.multi([CreateOp(f"{root}/x", b""), CreateOp(f"{root}/x", b"")])
        assert failed.value.index == 1 and isinstance(failed.value.cause, NodeExistsError)
        assert await zk.exists(f"{root}/x") is None

    backend.run(scenario())


def test_a_multi_of_writes_checks_and_deletes_applies_or_names_the_failed_op(backend: Any) -> None:
    """The shape of a controller's state writes (the real adapter builds these requests
    itself, without kazoo's transaction object): versions move, a stale one fails its op."""
    async def scenario() -> None:
        zk = await backend.session()
        root = backend.root
        await zk.create(f"{root}/epoch", b"1", makepath=True)
        for i in range(3):
            await zk.create(f"{root}/s{i}", b"a")
        results = await zk.multi([CheckOp(f"{root}/epoch", 0), SetDataOp(f"{root}/s0", b"b", 0),
                                  SetDataOp(f"{root}/s1", b"b", 0), DeleteOp(f"{root}/s2", 0)])
        assert results[0] is True and [r.version for r in results[1:3]] == [1, 1] and results[3] is True
        with pytest.raises(TransactionFailed) as failed:
            await zk.multi([SetDataOp(f"{root}/s0", b"c", 1), SetDataOp(f"{root}/s1", b"c", 0)])
        assert failed.value.index == 1 and isinstance(failed.value.cause, BadVersionError)
        assert (await zk.get(f"{root}/s0"))[0] == b"b"  # all or nothing
        with pytest.raises(TransactionFailed) as failed:
            await zk.multi([SetDataOp(f"{root}/s0", b"c", 1), DeleteOp(f"{root}/s2")])
        assert failed.value.index == 1 and isinstance(failed.value.cause, NoNodeError)

    backend.run(scenario())


def test_get_many_reads_every_path_in_order_with_none_for_missing_nodes(backend: Any) -> None:
    async def scenario() -> None:
        zk = await backend.session()
        root = f"{backend.root}/many"
        await zk.create(root, b"", makepath=True)
        count = 1200  # more than one multiRead batch on the real adapter
        for start in range(0, count, 400):
            await zk.multi([CreateOp(f"{root}/{i}", f"v{i}".encode()) for i in range(start, start + 400)])
        await zk.set(f"{root}/7", b"changed")
        paths = [f"{root}/{i}" for i in range(count)] + [f"{root}/absent", f"{root}/3"]
        expected = [(await zk.get(path)) if path != f"{root}/absent" else None for path in paths]
        many = await zk.get_many(paths)
        assert many == expected
        assert many[7] is not None and many[7][0] == b"changed" and many[7][1].version == 1
        assert many[-2] is None and many[-1] is not None and many[-1][0] == b"v3"
        assert await zk.get_many([]) == []
        if hasattr(zk, "_multi_read_supported"):  # the real adapter's fallback for ZooKeeper < 3.6
            zk._multi_read_supported = False
            assert await zk.get_many(paths) == expected

    backend.run(scenario())


def test_multi_fires_watches_only_on_commit(backend: Any) -> None:
    async def scenario() -> None:
        zk = await backend.session()
        watcher = await backend.session()
        path = f"{backend.root}/watched"
        await zk.create(path, b"", makepath=True)
        events: list[WatchEvent] = []
        await watcher.get(path, watch=events.append)
        with pytest.raises(TransactionFailed):
            await zk.multi([SetDataOp(path, b"x"), CheckOp(path, 99)])
        await backend.settle()
        assert events == []
        await zk.multi([SetDataOp(path, b"y"), CheckOp(path, 1)])
        await backend.settle()
        assert events == [WatchEvent("CHANGED", path)]

    backend.run(scenario())


# --------------------------------------------------------------------------- simulation only


def test_partitioned_client_is_suspended_then_lost_and_its_ephemerals_vanish() -> None:
    with SimWorld(seed=1) as world:
        n1, n2 = world.add_node("n1"), world.add_node("n2")

        async def setup() -> tuple[Coordination, Coordination]:
            a = await n1.coordination(6.0)
            b = await n2.coordination(6.0)
            await a.create("/controller", b"1", ephemeral=True)
            return a, b

        a, b = world.run(setup())
        states: list[str] = []
        a.add_session_listener(states.append)
        world.partition({"n1"}, {"zk"})
        world.run_for(4.5)
        assert states == ["SUSPENDED"]  # noticed after the read timeout (2/3 of 6 s)
        assert world.zk.exists("/controller") is not None
        world.run_for(2.5)  # expiry is checked every tenth of the timeout, as ZooKeeper's ticks
        assert world.zk.exists("/controller") is None  # the server expired the session
        assert states == ["SUSPENDED"]  # ... but n1 cannot hear that yet
        world.heal()
        world.run_for(1.0)
        assert states == ["SUSPENDED", "LOST"]
        with pytest.raises(SessionExpiredError):
            world.run(a.exists("/controller"))
        assert world.run(b.exists("/controller")) is None


@pytest.mark.parametrize("heal_after", [1.0, None])
def test_a_session_closed_while_cut_off_expires_after_its_timeout(heal_after: float | None) -> None:
    """(regression, explore seeds 72,649 and 72,721) A client closed while it cannot reach the
    server (a broker restarted by a disk heal while cut off from ZooKeeper) sends no close:
    the server expires the session after its timeout, even when the link comes back before
    then, since a closed client pings no more. Its heartbeat, which keeps the server's clock,
    was cancelled by the close: the session lived for ever, holding /controller, and no
    controller was elected again."""
    with SimWorld(seed=1) as world:
        n1, n2 = world.add_node("n1"), world.add_node("n2")
        a = world.run(n1.coordination(6.0))
        b = world.run(n2.coordination(6.0))
        world.run(a.create("/controller", b"1", ephemeral=True))
        world.partition({"n1"}, {"zk"})
        world.run(a.close())
        if heal_after is not None:
            world.run_for(heal_after)
            world.heal()
        world.run_for(5.0)
        assert world.zk.exists("/controller") is not None  # not yet: the timeout has not passed
        world.run_for(2.0)
        assert world.zk.exists("/controller") is None
        assert world.run(b.exists("/controller")) is None


def test_short_partition_reconnects_with_the_same_session() -> None:
    with SimWorld(seed=1) as world:
        n1 = world.add_node("n1")
        zk = world.run(n1.coordination(6.0))
        world.run(zk.create("/e", b"", ephemeral=True))
        states: list[str] = []
        zk.add_session_listener(states.append)
        world.partition({"n1"}, {"zk"})
        world.run_for(5.0)
        world.heal()
        world.run_for(1.0)
        assert states == ["SUSPENDED", "CONNECTED"]
        stat = world.zk.exists("/e")
        assert stat is not None and stat.ephemeral_owner == zk.session_id


def test_request_during_partition_is_a_connection_loss() -> None:
    from floodmark.reference.runtime import ConnectionLossError

    with SimWorld(seed=1) as world:
        n1 = world.add_node("n1")
        zk = world.run(n1.coordination(6.0))
        world.cut("zk", "n1")  # the request arrives, the reply is lost
        with pytest.raises(ConnectionLossError):
            world.run(zk.create("/applied", b""))
        assert world.zk.exists("/applied") is not None  # applied anyway: the outcome was unknown


def test_paused_client_sees_suspended_then_lost_on_resume() -> None:
    with SimWorld(seed=1) as world:
        n1, n2 = world.add_node("n1"), world.add_node("n2")
        zk = world.run(n1.coordination(6.0))
        world.run(zk.create("/controller", b"1", ephemeral=True))
        other = world.run(n2.coordination(6.0))
        deleted: list[WatchEvent] = []
        world.run(other.exists("/controller", watch=deleted.append))
        states: list[str] = []
        zk.add_session_listener(states.append)
        world.pause("n1")
        world.run_for(8.0)
        assert states == [] and [e.type for e in deleted] == ["DELETED"]
        world.resume("n1")
        world.run_for(1.0)
        assert states == ["SUSPENDED", "LOST"]
        fresh = world.run(n1.coordination(6.0))  # a new session works and sees the world
        assert fresh.session_id != zk.session_id
        assert world.run(fresh.exists("/controller")) is None


def test_watch_notification_lost_in_a_partition_arrives_on_reconnect() -> None:
    with SimWorld(seed=1) as world:
        n1, n2 = world.add_node("n1"), world.add_node("n2")
        reader = world.run(n1.coordination(6.0))
        writer = world.run(n2.coordination(6.0))
        world.run(writer.create("/x", b"0"))
        events: list[WatchEvent] = []
        world.run(reader.get("/x", watch=events.append))
        world.partition({"n1"}, {"zk"})
        world.run(writer.set("/x", b"1"))
        world.run_for(2.0)
        assert events == []
        world.heal()
        world.run_for(1.0)
        assert events == [WatchEvent("CHANGED", "/x")]
