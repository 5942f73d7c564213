"""Message rules on the simulated network (floodmark.reference.sim.message_faults): drop,
delay, duplicate and reorder chosen messages, for protocol messages and ZooKeeper traffic."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from floodmark.reference.protocol import messages as m
from floodmark.reference.runtime import ConnectionLossError, WatchEvent
from floodmark.reference.sim import SimRuntime, SimWorld
from floodmark.reference.sim.message_faults import MessageRule

pytestmark = pytest.mark.sim_world(seed=21)

PRODUCE = frozenset({"ProduceRequest"})


class Recorder:
    """A handler that notes the partition of every request it handles, in order."""

    def __init__(self) -> None:
        self.handled: list[tuple[str, int]] = []

    async def __call__(self, sender: str, message: Any) -> Any:
        self.handled.append((sender, message.partition))
        return m.ProduceResponse(None, base_offset=message.partition)


def serving(world: SimWorld, *names: str) -> tuple[list[SimRuntime], Recorder]:
    recorder = Recorder()
    runtimes = [world.add_node(name) for name in names]
    for rt in runtimes:
        world.run(rt.network.serve(recorder))
    return runtimes, recorder


def send(world: SimWorld, rt: SimRuntime, to: str, partitions: list[int], timeout: float = 1.0) -> list[Any]:
    """Send one request per partition at once; each outcome is a response or an exception."""

    async def one(p: int) -> Any:
        try:
            return await rt.network.request(to, m.ProduceRequest("t", p, ()), timeout)
        except (ConnectionError, TimeoutError) as e:
            return e

    async def all_of() -> list[Any]:
        return list(await asyncio.gather(*(one(p) for p in partitions)))

    return world.run(all_of())


def test_drop_loses_only_the_chosen_type_and_counts_it(world: SimWorld) -> None:
    (n1, _), recorder = serving(world, "n1", "n2")
    rule = world.add_message_rule(MessageRule("drop", frozenset({"ProduceResponse"})))
    outcome = send(world, n1, "n2", [0])
    assert isinstance(outcome[0], TimeoutError)
    assert recorder.handled == [("n1", 0)]  # the request got there; its answer did not
    assert rule.evidence() == {"action": "drop", "matched": 1, "dropped": 1}
    assert world.remove_message_rule(rule) and not world.remove_message_rule(rule)
    assert isinstance(send(world, n1, "n2", [1])[0], m.ProduceResponse)
    assert rule.matched == 1  # a removed rule sees nothing more


def test_a_rule_limited_by_count_and_by_link(world: SimWorld) -> None:
    (n1, n2, n3), recorder = serving(world, "n1", "n2", "n3")
    rule = world.add_message_rule(MessageRule("drop", PRODUCE, sources=frozenset({"n1"}),
                                              destinations=frozenset({"n2"}), count=2))
    outcomes = send(world, n1, "n2", [0, 1, 2])
    assert [type(o).__name__ for o in outcomes] == ["TimeoutError", "TimeoutError", "ProduceResponse"]
    assert isinstance(send(world, n1, "n3", [3])[0], m.ProduceResponse)  # another link
    assert isinstance(send(world, n3, "n2", [4])[0], m.ProduceResponse)  # another sender
    assert recorder.handled == [("n1", 2), ("n1", 3), ("n3", 4)]
    assert (rule.matched, rule.acted, rule.exhausted) == (2, 2, True)


def test_probability_is_drawn_from_the_seed(world: SimWorld) -> None:
    def dropped(seed: int) -> list[int]:
        with SimWorld(seed=seed) as w:
            (a, _), recorder = serving(w, "a", "b")
            rule = w.add_message_rule(MessageRule("drop", PRODUCE, probability=0.5))
            send(w, a, "b", list(range(40)))
            handled = {p for _, p in recorder.handled}
            assert rule.acted == 40 - len(handled) and rule.matched == 40
            return [p for p in range(40) if p not in handled]

    first = dropped(7)
    assert 5 < len(first) < 35
    assert dropped(7) == first
    assert dropped(8) != first


def test_delay_lets_later_messages_overtake(world: SimWorld) -> None:
    (n1, _), recorder = serving(world, "n1", "n2")
    rule = world.add_message_rule(MessageRule("delay", PRODUCE, delay=0.5, count=1))
    start = world.now()
    outcomes = send(world, n1, "n2", [0, 1, 2])
    assert all(isinstance(o, m.ProduceResponse) for o in outcomes)
    assert recorder.handled == [("n1", 1), ("n1", 2), ("n1", 0)]
    assert 0.5 < world.now() - start < 0.51
    assert rule.evidence() == {"action": "delay", "matched": 1, "delayed": 1}


def test_duplicate_is_handled_twice_and_answered_once(world: SimWorld) -> None:
    (n1, _), recorder = serving(world, "n1", "n2")
    rule = world.add_message_rule(MessageRule("duplicate", PRODUCE, count=1))
    outcomes = send(world, n1, "n2", [0, 1])
    assert [o.base_offset for o in outcomes] == [0, 1]
    world.run_for(0.1)
    assert recorder.handled == [("n1", 0), ("n1", 0), ("n1", 1)]
    assert rule.evidence() == {"action": "duplicate", "matched": 1, "duplicated": 1}
    assert world.failures == []


def test_reorder_delivers_the_held_message_after_the_next_one(world: SimWorld) -> None:
    (n1, _), recorder = serving(world, "n1", "n2")
    rule = world.add_message_rule(MessageRule("reorder", PRODUCE, count=2))
    send(world, n1, "n2", [0, 1, 2, 3, 4])
    # 0 waits for 1; 2 waits for 3 (a held message's successor goes first, held or not).
    assert recorder.handled == [("n1", 1), ("n1", 0), ("n1", 3), ("n1", 2), ("n1", 4)]
    assert rule.acted == 2


def test_a_held_message_goes_out_when_its_rule_is_removed(world: SimWorld) -> None:
    (n1, _), recorder = serving(world, "n1", "n2")
    rule = world.add_message_rule(MessageRule("reorder", PRODUCE))

    async def lonely() -> Any:
        pending = asyncio.ensure_future(n1.network.request("n2", m.ProduceRequest("t", 9, ()), 5.0))
        await asyncio.sleep(1.0)
        assert recorder.handled == []  # held: no message followed it
        world.remove_message_rule(rule)
        return await pending

    assert world.run(lonely()).base_offset == 9
    assert recorder.handled == [("n1", 9)]


def test_zookeeper_replies_requests_and_watch_events_can_be_ruled(world: SimWorld) -> None:
    n1, n2 = world.add_node("n1"), world.add_node("n2")
    zk = world.run(n1.coordination(6.0))
    other = world.run(n2.coordination(6.0))
    lost_reply = world.add_message_rule(MessageRule("drop", frozenset({"ZkCreateResponse"}), count=1))
    with pytest.raises(ConnectionLossError):
        world.run(zk.create("/applied", b""))
    assert world.zk.exists("/applied") is not None  # applied: only the reply was lost
    assert lost_reply.acted == 1

    twice = world.add_message_rule(MessageRule("duplicate", frozenset({"ZkCreateRequest"}), count=1))
    assert world.run(zk.create("/applied/n-", b"", sequential=True)) == "/applied/n-0000000000"
    assert world.zk.children("/applied") == ["n-0000000000", "n-0000000001"]  # created twice
    assert twice.acted == 1

    events: list[WatchEvent] = []
    world.run(other.get("/applied", watch=events.append))
    lost_event = world.add_message_rule(MessageRule("drop", frozenset({"ZkWatchEvent"}),
                                                    destinations=frozenset({"n2"})))
    world.run(zk.set("/applied", b"1"))
    world.run_for(0.05)
    assert events == [] and lost_event.acted == 1  # the notification was lost on its way
    world.run_for(5.0)
    # ... and fired again when the client re-registered its watches, as ZooKeeper does after
    # a reconnection: late (at the client's next contact, a tenth of the session timeout
    # apart), never not at all.
    assert events == [WatchEvent("CHANGED", "/applied")]
    assert other.state == "CONNECTED"  # message rules do not touch session liveness


def test_rules_check_their_names_and_parameters() -> None:
    with pytest.raises(ValueError, match="unknown message types: FetchReponse"):
        MessageRule("drop", frozenset({"FetchReponse"}))
    with pytest.raises(ValueError, match="positive delay"):
        MessageRule("delay", PRODUCE)
    with pytest.raises(ValueError, match="probability"):
        MessageRule("drop", PRODUCE, probability=1.5)
    with pytest.raises(ValueError, match="unknown message fault action"):
        MessageRule("corrupt", PRODUCE)  # type: ignore[arg-type]


def arrival_times(rule: MessageRule | None) -> list[tuple[float, str, int]]:
    """When each request of a small exchange was handled, with an optional rule in force."""
    with SimWorld(seed=4) as world:
        runtimes = [world.add_node(n) for n in ("a", "b", "c")]
        seen: list[tuple[float, str, int]] = []

        async def handle(sender: str, message: Any) -> Any:
            seen.append((world.now(), sender, message.partition))
            return m.ProduceResponse(None)

        for rt in runtimes:
            world.run(rt.network.serve(handle))
        if rule is not None:
            world.add_message_rule(rule)

        async def chatter(rt: SimRuntime) -> None:
            for i in range(10):
                with contextlib.suppress(TimeoutError):
                    await rt.network.request(rt.random.choice("abc"), m.ProduceRequest("t", i, ()), 0.1)

        async def everyone() -> None:
            await asyncio.gather(*(chatter(rt) for rt in runtimes))

        world.run(everyone())
        return seen


def test_rules_that_do_not_act_change_no_draw_of_the_network() -> None:
    plain = arrival_times(None)
    assert len(plain) > 20
    assert arrival_times(MessageRule("drop", frozenset({"LeaderAndIsrRequest"}), probability=0.5)) == plain
    # Matching every request and drawing for each, but never acting: the draws are the
    # message faults' own, and every message still draws its latency once.
    assert arrival_times(MessageRule("drop", PRODUCE, probability=0.0)) == plain
