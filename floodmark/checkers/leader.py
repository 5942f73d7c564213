"""Leaders: one per partition per leader epoch, epochs only move forward, one controller per epoch.

Leader epochs exist so that every broker and every record can tell which leadership they
belong to. The design promises:

- ``multiple-leaders``: at most one broker acts as leader of a partition in a leader epoch.
  A broker acts as leader when it becomes leader, appends records as leader, advances the
  HW as leader or acknowledges a produce. The controller's own decisions
  (``leader_elected``) must also name a single leader per epoch.
- ``epoch-regression``: each broker's view of a partition's leader epoch never goes
  backwards (in the broker's own event order), nor does each controller's; and the
  partition state in ZooKeeper never goes back to an older epoch: ordered by the znode's
  version, which ZooKeeper itself assigns, the recorded leader epochs never decrease.
- ``multiple-controllers``: one broker per controller epoch; and each broker's view of the
  controller epoch never goes backwards (``controller-epoch-regression``).

Node clocks are skewed under clock faults, so events of different nodes are never ordered
by time: only per-node sequence numbers and ZooKeeper versions order anything here.
"""

from __future__ import annotations

from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.node_events import NodeEvent
from floodmark.results import Anomaly, CheckerResult

Partition = tuple[Any, Any]  # (topic, partition) as the events name them
_LEADER_ACTS = ("became_leader", "appended", "hw_changed", "acked")


class LeaderChecker:
    name = "leader"

    def check(self, run: CheckInput) -> CheckerResult:
        anomalies: list[Anomaly] = []
        acting: dict[tuple[Partition, int], dict[str, tuple[str, int]]] = {}  # -> node -> first (node, seq)
        elected: dict[tuple[Partition, int], dict[Any, tuple[str, int]]] = {}
        controllers: dict[int, dict[Any, tuple[str, int]]] = {}
        zk_states: dict[Partition, list[tuple[int, int, str, int]]] = {}  # (version, epoch, node, seq)
        for node in sorted(run.events):
            anomalies.extend(_scan_node(node, run.events[node], acting, elected, controllers, zk_states))
        for (key, epoch), nodes in sorted(acting.items()):
            if len(nodes) > 1:
                anomalies.append(Anomaly(
                    "multiple-leaders",
                    f"Brokers {', '.join(sorted(nodes))} all acted as leader of {key[0]}/{key[1]} in leader epoch {epoch}.",
                    key[0], key[1], events=tuple(sorted(nodes.values())),
                    details={"leader_epoch": epoch, "leaders": sorted(nodes)}))
        for (key, epoch), leaders in sorted(elected.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            if len(leaders) > 1:
                anomalies.append(Anomaly(
                    "multiple-leaders",
                    f"Controllers elected {len(leaders)} different leaders ({', '.join(map(str, sorted(leaders, key=str)))}) "
                    f"of {key[0]}/{key[1]} for leader epoch {epoch}.",
                    key[0], key[1], events=tuple(sorted(leaders.values())),
                    details={"leader_epoch": epoch, "leaders": sorted(leaders, key=str), "source": "leader_elected"}))
        for epoch, brokers in sorted(controllers.items()):
            if len(brokers) > 1:
                anomalies.append(Anomaly(
                    "multiple-controllers",
                    f"Brokers {', '.join(map(str, sorted(brokers, key=str)))} were all elected controller in controller epoch {epoch}.",
                    events=tuple(sorted(brokers.values())),
                    details={"controller_epoch": epoch, "controllers": sorted(brokers, key=str)}))
        for key, states in sorted(zk_states.items()):
            anomalies.extend(_zookeeper_order(key, states))
        counts: dict[str, int] = {}
        for a in anomalies:
            counts[a.type] = counts.get(a.type, 0) + 1
        stats = {"leader_epochs": len(acting), "controller_epochs": len(controllers),
                 "anomalies": dict(sorted(counts.items()))}
        return CheckerResult(not anomalies, anomalies, stats)


def _key(event: NodeEvent) -> Partition:
    return (event.get("topic"), event.get("partition"))


def _scan_node(node: str, events: list[NodeEvent],
               acting: dict[tuple[Partition, int], dict[str, tuple[str, int]]],
               elected: dict[tuple[Partition, int], dict[Any, tuple[str, int]]],
               controllers: dict[int, dict[Any, tuple[str, int]]],
               zk_states: dict[Partition, list[tuple[int, int, str, int]]]) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    view: dict[Partition, tuple[int, int]] = {}  # the broker's leader epoch per partition, and its event
    role: dict[Partition, str] = {}
    decided: dict[Partition, tuple[int, int]] = {}  # this node's latest leader_elected epoch, as controller
    controller_view: tuple[int, int] | None = None

    def adopt(key: Partition, epoch: int, event: NodeEvent, new_role: str) -> None:
        """The broker took a role in ``epoch``: its view of the leader epoch must not go back."""
        before = view.get(key)
        if before is not None and epoch < before[0]:
            anomalies.append(_regression(node, key, before, epoch, event, "its view of the leader epoch"))
        view[key] = (epoch, event.seq)
        role[key] = new_role

    # Hot loop (every event of every node): fields read straight from the event's dict.
    for event in events:
        kind = event.kind
        fields = event.fields
        if kind in _LEADER_ACTS:
            key = (fields.get("topic"), fields.get("partition"))
            if kind == "became_leader":
                epoch = fields.get("leader_epoch")
                if isinstance(epoch, int):
                    adopt(key, epoch, event, "leader")
            elif kind == "appended":
                epoch = fields.get("epoch") if fields.get("role") == "leader" else None
            elif kind == "hw_changed":
                epoch = fields.get("leader_epoch") if fields.get("role") == "leader" else None
            else:  # acked: the broker acknowledged a produce in its current epoch
                epoch = fields.get("leader_epoch", view.get(key, (None,))[0])
            if isinstance(epoch, int):
                acting.setdefault((key, epoch), {}).setdefault(node, (node, event.seq))
        elif kind == "became_follower":
            key, epoch = (fields.get("topic"), fields.get("partition")), fields.get("leader_epoch")
            if isinstance(epoch, int):
                adopt(key, epoch, event, "follower")
        elif kind == "leader_elected":
            key, epoch = (fields.get("topic"), fields.get("partition")), fields.get("leader_epoch")
            if isinstance(epoch, int):
                elected.setdefault((key, epoch), {}).setdefault(fields.get("leader"), (node, event.seq))
                before = decided.get(key)
                if before is not None and epoch < before[0]:
                    anomalies.append(_regression(node, key, before, epoch, event, "the leader epochs it elected"))
                decided[key] = (epoch, event.seq)
            _zookeeper_state(zk_states, node, event)
        elif kind == "controller_elected":
            epoch = fields.get("controller_epoch")
            if isinstance(epoch, int):
                controllers.setdefault(epoch, {}).setdefault(fields.get("broker", node), (node, event.seq))
                if controller_view is not None and epoch < controller_view[0]:
                    anomalies.append(Anomaly(
                        "controller-epoch-regression",
                        f"Broker {node} saw controller epoch {epoch} after {controller_view[0]}.",
                        events=((node, controller_view[1]), (node, event.seq)),
                        details={"node": node, "controller_epoch": epoch}))
                controller_view = (epoch, event.seq)
        elif kind == "isr_changed":
            _zookeeper_state(zk_states, node, event)
    return anomalies


def _zookeeper_state(zk_states: dict[Partition, list[tuple[int, int, str, int]]], node: str, event: NodeEvent) -> None:
    version, epoch = event.get("zk_version"), event.get("leader_epoch")
    if isinstance(version, int) and isinstance(epoch, int):
        zk_states.setdefault(_key(event), []).append((version, epoch, node, event.seq))


def _regression(node: str, key: Partition, before: tuple[int, int], epoch: int, event: NodeEvent, what: str) -> Anomaly:
    return Anomaly(
        "epoch-regression",
        f"Broker {node} went back from leader epoch {before[0]} to {epoch} of {key[0]}/{key[1]} in {what}.",
        key[0], key[1], events=((node, before[1]), (node, event.seq)),
        details={"node": node, "from_epoch": before[0], "to_epoch": epoch})


def _zookeeper_order(key: Partition, states: list[tuple[int, int, str, int]]) -> list[Anomaly]:
    anomalies = []
    highest: tuple[int, int, str, int] | None = None
    for state in sorted(states):
        if highest is not None and state[1] < highest[1] and state[0] > highest[0]:
            anomalies.append(Anomaly(
                "epoch-regression",
                f"ZooKeeper's state of {key[0]}/{key[1]} went back from leader epoch {highest[1]} "
                f"(version {highest[0]}) to epoch {state[1]} (version {state[0]}).",
                key[0], key[1], events=((highest[2], highest[3]), (state[2], state[3])),
                details={"source": "zookeeper", "from_epoch": highest[1], "to_epoch": state[1],
                         "zk_versions": [highest[0], state[0]]}))
        if highest is None or state[1] >= highest[1]:
            highest = state
    return anomalies
