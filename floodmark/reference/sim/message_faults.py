"""Message faults: rules that drop, delay, duplicate or reorder chosen messages.

Link faults (partitions, cuts) lose everything on a link, as a real network does. A
simulator can do what no real network lets a nemesis do reliably: act on one kind of
message and leave the rest alone. Lose only the ``FetchResponse`` that would have advanced a
follower; deliver a ``LeaderAndIsrRequest`` late, after the next one; hand a broker the same
``ReplicaFetchResponse`` twice; hold a ZooKeeper reply back. Such faults reach protocol paths
(stale requests, duplicate handling, replies that arrive out of order) that whole-link
faults reach rarely or never.

A :class:`MessageRule` names message types (the class names of
``reference.protocol.messages``, and for ZooKeeper the names below), optionally the sending
and receiving nodes, and one action:

* **drop**: the message vanishes (a request's sender times out); a sender that learns of
  losses learns of this one as of a cut link's (a dropped watch event is as a ZooKeeper
  connection that broke and came back: the client re-registers its watches, ZooKeeper
  fires the ones whose znodes changed, and the event arrives late, never not at all);
* **delay**: it arrives ``delay`` seconds later than it would have, overtaken by the
  messages sent after it on its link;
* **duplicate**: it arrives twice in a row, and the receiver handles it twice (a duplicate
  request runs the handler twice; the sender keeps the first response);
* **reorder**: it is held and delivered right after the next message on the same link
  (whatever that message is); a message still held when its rule is removed is sent then.

A rule acts on at most ``count`` messages (None: no limit), each with ``probability``, drawn
from a generator seeded from the world's seed that serves only message faults; every message
draws its latency from the network's own generator once, whatever happens to it, so a rule
changes no draw by itself: only the consequences of what it did to a message can. The first
rule in force that matches a message and fires decides its fate; later rules do not see it.

ZooKeeper traffic has names too: each client operation is a request and a response
(``ZkCreateRequest``, ``ZkCreateResponse``, ...) and each fired watch is a ``ZkWatchEvent``.
Session liveness is not a message in the simulation (see ``sim.coordination``): a rule that
drops every ZooKeeper request fails the client's calls but does not expire its session; cut
the link for that.

:class:`ActiveRule` is the handle a rule is added and removed by; it counts the messages the
rule saw and those it acted on, which is the evidence that the fault took effect.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from floodmark.reference.protocol import messages

MessageAction = Literal["drop", "delay", "duplicate", "reorder"]
ACTIONS: tuple[MessageAction, ...] = ("drop", "delay", "duplicate", "reorder")
_PAST_TENSE = {"drop": "dropped", "delay": "delayed", "duplicate": "duplicated", "reorder": "reordered"}

# ZooKeeper client operations, each a request and a response on the network.
ZK_OPERATIONS = ("Connect", "Create", "GetData", "GetMany", "Exists", "GetChildren", "SetData",
                 "Delete", "EnsurePath", "Multi")
ZK_NAMES: dict[str, tuple[str, str]] = {op: (f"Zk{op}Request", f"Zk{op}Response") for op in ZK_OPERATIONS}
ZK_REQUESTS = frozenset(request for request, _ in ZK_NAMES.values())
ZK_RESPONSES = frozenset(response for _, response in ZK_NAMES.values())
ZK_WATCH_EVENT = "ZkWatchEvent"
ZK_MESSAGES = ZK_REQUESTS | ZK_RESPONSES | {ZK_WATCH_EVENT}


def known_message_types() -> frozenset[str]:
    """Every name a rule may use: the protocol's message classes and ZooKeeper's traffic."""
    return frozenset(messages.message_types()) | ZK_MESSAGES


@dataclass(frozen=True)
class MessageRule:
    action: MessageAction
    types: frozenset[str]
    sources: frozenset[str] | None = None  # None: from any node
    destinations: frozenset[str] | None = None  # None: to any node
    delay: float = 0.0  # seconds, for "delay"
    count: int | None = None  # act on at most this many messages (None: no limit)
    probability: float = 1.0  # act on each matching message with this probability

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown message fault action {self.action!r}; choose one of {', '.join(ACTIONS)}")
        if not self.types:
            raise ValueError("a message rule needs at least one message type")
        unknown = sorted(self.types - known_message_types())
        if unknown:
            raise ValueError(f"unknown message types: {', '.join(unknown)}")
        if (self.action == "delay") != (self.delay > 0):
            raise ValueError("a delay rule needs a positive delay, and only a delay rule takes one")
        if self.count is not None and self.count < 0:
            raise ValueError(f"count must not be negative, got {self.count}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be between 0 and 1, got {self.probability}")

    def matches(self, message_type: str, source: str, destination: str) -> bool:
        return (message_type in self.types
                and (self.sources is None or source in self.sources)
                and (self.destinations is None or destination in self.destinations))


class ActiveRule:
    """A rule in force: the handle to remove it by, and what it has done so far."""

    def __init__(self, rule: MessageRule) -> None:
        self.rule = rule
        self.matched = 0  # messages of its types on its links, while it could still act
        self.acted = 0  # of those, the ones it dropped, delayed, duplicated or reordered
        self.active = True

    @property
    def exhausted(self) -> bool:
        return self.rule.count is not None and self.acted >= self.rule.count

    def evidence(self) -> dict[str, int | str]:
        """What the rule did, e.g. ``{"action": "drop", "matched": 7, "dropped": 3}``."""
        return {"action": self.rule.action, "matched": self.matched, _PAST_TENSE[self.rule.action]: self.acted}

    def __repr__(self) -> str:
        return f"ActiveRule({self.rule!r}, matched={self.matched}, acted={self.acted})"


class MessageFaults:
    """The rules in force on a network, in the order they were added."""

    def __init__(self, rng: random.Random) -> None:
        self.random = rng
        self.rules: list[ActiveRule] = []

    def add(self, rule: MessageRule) -> ActiveRule:
        active = ActiveRule(rule)
        self.rules.append(active)
        return active

    def remove(self, active: ActiveRule) -> bool:
        """Take a rule out of force; False if it was not in force."""
        if active not in self.rules:
            return False
        self.rules.remove(active)
        active.active = False
        return True

    def decide(self, message_type: str, source: str, destination: str) -> ActiveRule | None:
        """The rule that acts on this message, if any (and count it)."""
        for active in self.rules:
            rule = active.rule
            if active.exhausted or not rule.matches(message_type, source, destination):
                continue
            active.matched += 1
            if rule.probability < 1.0 and self.random.random() >= rule.probability:
                continue
            active.acted += 1
            return active
        return None
