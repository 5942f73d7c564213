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
  OffsetsForLeaderEpoch responses, produce responses, broker heartbeats, and ZooKeeper
  replies.

The fault hits messages *to* one broker (the controller, a partition's leader or any, drawn
like the other kinds' targets), each with a drawn probability, for the fault's duration.
Only the simulator applies it.
"""

from __future__ import annotations

import random

from floodmark.harness.faults import ClusterView, MessageAction, MessageFault
from floodmark.nemesis.base import Choice, Nemesis, choose_broker

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
}
ACTIONS: tuple[MessageAction, ...] = ("drop", "delay", "duplicate", "reorder")
PROBABILITIES = (1.0, 0.5, 0.1)
TARGETS = ("controller", "leader", "random")


class MessageNemesis(Nemesis):
    kind = "message"
    shapes = tuple(f"{action}-{message}" for action in ACTIONS for message in MESSAGES)
    simulated_only = True

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[MessageFault, Choice]:
        action, _, message = self.check_shape(shape).partition("-")
        slot, how = choose_broker(rng, view, rng.choice(TARGETS))
        delay = round(rng.uniform(0.1, 2.0) * view.session_timeout, 3) if action == "delay" else 0.0
        plan = MessageFault(MESSAGES[message], action, delay=delay,  # type: ignore[arg-type]
                            probability=rng.choice(PROBABILITIES), destination=slot.name)
        return plan, {"shape": shape, **how}
