"""Message faults: one type of message lost, late, doubled or out of order, for a while.

Replication bugs hide in message timing that real faults cannot produce on demand: a fetch
response lost while leadership moves, a LeaderAndIsr that arrives after a newer one, an
OffsetsForLeaderEpoch answer that never comes, a controller whose ZooKeeper replies stall
although its session lives. The simulator carries every message itself, so it can aim at one
type. A shape is ``<action>-<message>``:

- actions: ``drop`` (lost), ``delay`` (held back by up to two session timeouts, so it lands
  after the world has moved on), ``duplicate`` (delivered twice), ``reorder`` (overtaken by
  the next message on the same link);
- messages: follower fetches and their responses, LeaderAndIsr, UpdateMetadata,
  OffsetsForLeaderEpoch responses, produce responses, broker heartbeats, ISR change requests
  (KIP-343), and ZooKeeper replies.

A shape is offered only for a message the run's brokers send (:func:`messages_sent`, told
by the run what its brokers' inter-broker protocol versions do): no
heartbeats from legacy brokers, ISR change requests only from ``kip-343`` and newer ones, no
OffsetsForLeaderEpoch from ``truncate-on-fetch`` ones. A schedule
that aims at a message the cluster never sends is refused before the run, like any unknown
shape, instead of running a fault that cannot strike; so is one its layout never carries
(:meth:`MessageNemesis.layout_problem`): fetches, their answers and ISR change requests with
one replica a partition, requests to the controller on a single broker (which hosts it).

The fault hits messages *to* one broker (the controller, a partition's leader or any, drawn
like the other kinds' targets), each with a drawn probability, for the fault's duration.
Where no message of the type ever goes to that broker, it hits those the broker *sends*
instead, so that every shape can strike: produce responses (they go to clients, never to a
broker), and heartbeats and ISR change requests aimed at a broker that is not the controller
(only the controller receives them). Only the simulator applies it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from floodmark.harness.faults import ClusterView, MessageAction, MessageFault
from floodmark.nemesis.base import Choice, Layout, Nemesis, choose_broker

# Shape word -> the message type it aims at ("zookeeper-reply": answers from ZooKeeper).
MESSAGES: dict[str, str] = {
    "fetch-request": "ReplicaFetchRequest",
    "fetch-response": "ReplicaFetchResponse",
    "leader-and-isr": "LeaderAndIsrRequest",
    "update-metadata": "UpdateMetadataRequest",
    "epoch-response": "OffsetForLeaderEpochResponse",
    "produce-response": "ProduceResponse",
    "heartbeat": "BrokerHeartbeatRequest",
    "zookeeper-reply": "zookeeper-reply",
    "isr-change-request": "IsrChangeRequest",
}
# Messages no broker receives: a fault aimed at a broker hits those it sends.
SENT_TO_CLIENTS = frozenset({"produce-response"})
# Messages only the controller receives: aimed at another broker, it hits those it sends.
SENT_TO_CONTROLLER = frozenset({"heartbeat", "isr-change-request"})
# Sent only by brokers whose inter-broker protocol has the feature named.
HEARTBEAT = "heartbeat"
ISR_CHANGE_REQUEST = "isr-change-request"
EPOCH_RESPONSE = "epoch-response"
# Sent only because a partition has followers (fetching from its leader, or moving in and out
# of its ISR): never with a single replica a partition.
BETWEEN_REPLICAS = frozenset({"fetch-request", "fetch-response", "epoch-response", "isr-change-request"})
ACTIONS: tuple[MessageAction, ...] = ("drop", "delay", "duplicate", "reorder")
PROBABILITIES = (1.0, 0.5, 0.1)
TARGETS = ("controller", "leader", "random")


def messages_sent(heartbeats: bool = True, isr_change_requests: bool = False,
                  epoch_requests: bool = True) -> dict[str, str]:
    """Shape word -> message type, for the messages a cluster sends (in ``MESSAGES`` order):
    broker heartbeats, ISR change requests and OffsetsForLeaderEpoch (and so its answers)
    only if some broker sends them."""
    absent = {word for word, sent in ((HEARTBEAT, heartbeats), (ISR_CHANGE_REQUEST, isr_change_requests),
                                      (EPOCH_RESPONSE, epoch_requests))
              if not sent}
    return {word: name for word, name in MESSAGES.items() if word not in absent}


class MessageNemesis(Nemesis):
    kind = "message"
    simulated_only = True

    def __init__(self, messages: Mapping[str, str] | None = None) -> None:
        self.messages = dict(messages_sent() if messages is None else messages)
        self.shapes = tuple(f"{action}-{message}" for action in ACTIONS for message in self.messages)

    def layout_problem(self, shape: str, layout: Layout) -> str | None:
        message = shape.partition("-")[2]
        if message in BETWEEN_REPLICAS and layout.replication_factor < 2:
            return (f"with replication factor 1 no partition has a follower to fetch or to move in or out of "
                    f"its ISR, so no {self.messages.get(message, message)} is ever sent")
        if message in SENT_TO_CONTROLLER and layout.brokers < 2:
            # The broker hosting the active controller hands it its own requests directly.
            return (f"a single broker hosts the controller, so no {self.messages.get(message, message)} "
                    "crosses the network")
        return None

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[MessageFault, Choice]:
        action, _, message = self.check_shape(shape).partition("-")
        slot, how = choose_broker(rng, view, rng.choice(TARGETS))
        delay = round(rng.uniform(0.1, 2.0) * view.session_timeout, 3) if action == "delay" else 0.0
        sent = message in SENT_TO_CLIENTS or (message in SENT_TO_CONTROLLER and slot.broker_id != view.controller)
        plan = MessageFault(self.messages[message], action, delay=delay,  # type: ignore[arg-type]
                            probability=rng.choice(PROBABILITIES),
                            source=slot.name if sent else None, destination=None if sent else slot.name)
        return plan, {"shape": shape, **how}
