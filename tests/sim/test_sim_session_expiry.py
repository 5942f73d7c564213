"""Expiring the ZooKeeper session of a running process (SimWorld.expire_session): the server
forgets the session at once, and the client hears of it as a real client would."""

from __future__ import annotations

import pytest
from broker_fixtures import SimCluster

from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.runtime import Coordination, SessionExpiredError, WatchEvent
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=9)


def registered(world: SimWorld) -> tuple[Coordination, Coordination, list[WatchEvent], list[str]]:
    """n1 holds an ephemeral that n2 watches; returns both sessions, n2's events, n1's states."""
    n1, n2 = world.add_node("n1"), world.add_node("n2")
    owner = world.run(n1.coordination(6.0))
    world.run(owner.create("/brokers/1", b"n1", ephemeral=True, makepath=True))
    watcher = world.run(n2.coordination(6.0))
    events: list[WatchEvent] = []
    world.run(watcher.exists("/brokers/1", watch=events.append))
    states: list[str] = []
    owner.add_session_listener(states.append)
    return owner, watcher, events, states


def test_expiry_deletes_ephemerals_fires_watches_and_the_client_loses_its_session(world: SimWorld) -> None:
    owner, watcher, events, states = registered(world)
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            await world.runtime("n1").sleep(0.5)
            ticks.append(world.now())

    world.runtime("n1").spawn(tick(), "ticker")
    expiry = world.expire_session("n1")
    assert expiry.session_ids == (owner.session_id,)
    assert expiry.ephemerals_deleted == ("/brokers/1",)
    assert world.zk.exists("/brokers/1") is None  # at once, on the server
    world.run_for(0.01)
    assert [e.type for e in events] == ["DELETED"]
    assert states == ["SUSPENDED", "LOST"]  # the connection closed; reconnecting was refused
    with pytest.raises(SessionExpiredError):
        world.run(owner.exists("/brokers/1"))
    world.run_for(2.0)
    assert len(ticks) == 4 and world.node("n1").alive  # the process kept running
    assert states == ["SUSPENDED", "LOST"]  # told once
    fresh = world.run(world.runtime("n1").coordination(6.0))
    assert world.run(fresh.create("/brokers/1", b"n1", ephemeral=True)) == "/brokers/1"
    assert world.run(watcher.exists("/brokers/1")) is not None
    assert world.failures == []


def test_a_request_that_reaches_the_server_after_the_expiry_fails_as_expired(world: SimWorld) -> None:
    owner, _, _, states = registered(world)

    async def race() -> object:
        world.expire_session("n1")  # the close is still on its way when the request leaves
        try:
            return await owner.create("/late", b"")
        except SessionExpiredError as e:
            return e

    assert isinstance(world.run(race()), SessionExpiredError)
    assert world.zk.exists("/late") is None


def test_a_paused_client_hears_of_the_expiry_when_it_resumes(world: SimWorld) -> None:
    _, _, events, states = registered(world)
    world.pause("n1")
    world.expire_session("n1")
    world.run_for(3.0)
    assert [e.type for e in events] == ["DELETED"] and states == []
    world.resume("n1")
    world.run_for(0.01)
    assert states == ["SUSPENDED", "LOST"]


def test_a_client_cut_off_from_the_server_hears_of_it_once_reconnected(world: SimWorld) -> None:
    _, _, _, states = registered(world)
    cut = world.cut("zk", "n1")
    world.expire_session("n1")
    world.run_for(5.0)
    assert states == ["SUSPENDED"]  # the read timeout (4 s) passed without word from the server
    world.restore(cut)
    world.run_for(1.0)
    assert states == ["SUSPENDED", "LOST"]


def test_a_node_without_sessions_has_nothing_to_expire(world: SimWorld) -> None:
    world.add_node("n1")
    expiry = world.expire_session("n1")
    assert expiry.session_ids == () and expiry.ephemerals_deleted == ()
    with pytest.raises(KeyError):
        world.expire_session("nobody")


def test_a_broker_whose_session_expired_registers_again_with_a_new_one() -> None:
    cluster = SimCluster(seed=2, nodes=3)
    try:
        _, before = cluster.world.zk.get(zk.broker_path(1))
        expiry = cluster.world.expire_session("n1")
        assert zk.broker_path(1) in expiry.ephemerals_deleted
        assert before.ephemeral_owner in expiry.session_ids

        def registered_again() -> bool:
            stat = cluster.world.zk.exists(zk.broker_path(1))
            return stat is not None and stat.ephemeral_owner not in expiry.session_ids

        assert cluster.world.run_until(registered_again, timeout=20.0)
        assert cluster.world.failures == []
    finally:
        cluster.close()
