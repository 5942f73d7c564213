"""Leaders: one per partition per leader epoch, epochs only move forward, one controller per epoch.

Leader epochs exist so that every broker and every record can tell which leadership they
belong to. The design promises:

- ``multiple-leaders``: at most one broker acts as leader of a partition in a leader epoch.
  A broker acts as leader when it becomes leader, appends records as leader, advances the
  HW as leader, changes the partition's ISR (only its leader does) or acknowledges a
  produce. The controller's own decisions (``leader_elected``) must also name a single
  leader per epoch.
- ``epoch-regression``: each broker's view of a partition's leader epoch never goes
  backwards (in the broker's own event order), nor does each controller's: below the highest
  it had, one finding per step to an older epoch (3, 1, 2 is two, 3, 1, 1 one); and the
  partition state in ZooKeeper never goes back to an older epoch: ordered by the znode's
  version, which ZooKeeper itself assigns (and, between two states recorded at one version,
  which only one write can have made, by their transaction ids), the recorded leader
  epochs never decrease.
- ``multiple-controllers``: one broker per controller epoch; and each broker's view of the
  controller epoch never goes backwards below the highest it saw (``controller-epoch-regression``).
- ``unclean-election``: a controller elected a leader from outside the ISR although the
  run's configuration disables unclean leader election, and not as the balanced recovery
  that KIP-966 makes when every in-sync replica recovered from an unclean shutdown (which
  the election says it is).

Node clocks are skewed under clock faults, so events of different nodes are never ordered
by time: only per-node sequence numbers and ZooKeeper versions order anything here.

What a broker did not record cannot be judged: if the events do not cover every broker the
run had, a run with nothing wrong in them is unknown (see :mod:`.event_coverage`).
"""

from __future__ import annotations

from floodmark.checkers.api import CheckInput
from floodmark.checkers.event_coverage import verdict
from floodmark.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    HwChanged,
    IsrChanged,
    LeaderElected,
    NodeEvent,
    PartitionKey,
)
from floodmark.results import Anomaly, CheckerResult

_Acting = dict[tuple[PartitionKey, int], dict[str, tuple[str, int]]]  # (partition, epoch) -> node -> first (node, seq)
_Elected = dict[tuple[PartitionKey, int], dict[int, tuple[str, int]]]  # (partition, epoch) -> leader -> first event
_Controllers = dict[int, dict[int, tuple[str, int]]]  # controller epoch -> broker -> first event
# partition -> (version, zxid or -1, epoch, node, seq)
_ZkStates = dict[PartitionKey, list[tuple[int, int, int, str, int]]]


class LeaderChecker:
    name = "leader"

    def check(self, run: CheckInput) -> CheckerResult:
        anomalies: list[Anomaly] = []
        acting: _Acting = {}
        elected: _Elected = {}
        controllers: _Controllers = {}
        zk_states: _ZkStates = {}
        forbid_unclean = run.config is not None and not run.config.unclean_leader_election
        for node in sorted(run.events):
            anomalies.extend(_scan_node(node, run.events[node], acting, elected, controllers, zk_states,
                                        forbid_unclean))
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
                    f"Controllers elected {len(leaders)} different leaders ({', '.join(map(str, sorted(leaders)))}) "
                    f"of {key[0]}/{key[1]} for leader epoch {epoch}.",
                    key[0], key[1], events=tuple(sorted(leaders.values())),
                    details={"leader_epoch": epoch, "leaders": sorted(leaders), "source": "leader_elected"}))
        for epoch, brokers in sorted(controllers.items()):
            if len(brokers) > 1:
                anomalies.append(Anomaly(
                    "multiple-controllers",
                    f"Brokers {', '.join(map(str, sorted(brokers)))} were all elected controller in controller epoch {epoch}.",
                    events=tuple(sorted(brokers.values())),
                    details={"controller_epoch": epoch, "controllers": sorted(brokers)}))
        for key, states in sorted(zk_states.items()):
            anomalies.extend(_zookeeper_order(key, states))
        counts: dict[str, int] = {}
        for a in anomalies:
            counts[a.type] = counts.get(a.type, 0) + 1
        stats: dict[str, object] = {"leader_epochs": len(acting), "controller_epochs": len(controllers),
                                    "anomalies": dict(sorted(counts.items()))}
        return CheckerResult(verdict(anomalies, run.coverage_problem, stats), anomalies, stats)


def _scan_node(node: str, events: list[NodeEvent], acting: _Acting, elected: _Elected,
               controllers: _Controllers, zk_states: _ZkStates, forbid_unclean: bool) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    # Per partition: the broker's highest leader epoch and its event, and its current epoch.
    # A step back is judged against the highest, so 3, 1, 2 is two steps back, not one.
    view: dict[PartitionKey, tuple[int, int]] = {}
    current: dict[PartitionKey, int] = {}
    decided: dict[PartitionKey, tuple[int, int]] = {}  # this node's highest leader_elected epoch, as controller
    last_decided: dict[PartitionKey, int] = {}
    controller_view: tuple[int, int] | None = None  # the highest controller epoch this node saw
    last_controller: int | None = None

    def adopt(key: PartitionKey, epoch: int, seq: int) -> None:
        """The broker took a role in ``epoch``: its view of the leader epoch must not go back."""
        before = view.get(key)
        if before is not None and epoch < before[0]:
            if current.get(key) != epoch:
                anomalies.append(_regression(node, key, before, epoch, seq, "its view of the leader epoch"))
        else:
            view[key] = (epoch, seq)
        current[key] = epoch

    # Hot loop (every event of every node): the most frequent kinds first.
    for event in events:
        body = event.body
        if isinstance(body, Appended):
            if body.role == "leader":
                acting.setdefault(((body.topic, body.partition), body.epoch), {}).setdefault(node, (node, event.seq))
        elif isinstance(body, HwChanged):
            if body.role == "leader":
                acting.setdefault(((body.topic, body.partition), body.leader_epoch), {}).setdefault(
                    node, (node, event.seq))
        elif isinstance(body, Acked):  # the broker acknowledged a produce in its current epoch
            key = (body.topic, body.partition)
            epoch = body.leader_epoch if body.leader_epoch is not None else view.get(key, (None,))[0]
            if epoch is not None:
                acting.setdefault((key, epoch), {}).setdefault(node, (node, event.seq))
        elif isinstance(body, BecameLeader):
            key = (body.topic, body.partition)
            adopt(key, body.leader_epoch, event.seq)
            acting.setdefault((key, body.leader_epoch), {}).setdefault(node, (node, event.seq))
        elif isinstance(body, BecameFollower):
            adopt((body.topic, body.partition), body.leader_epoch, event.seq)
        elif isinstance(body, LeaderElected):
            key, epoch = (body.topic, body.partition), body.leader_epoch
            elected.setdefault((key, epoch), {}).setdefault(body.leader, (node, event.seq))
            before = decided.get(key)
            if before is not None and epoch < before[0]:
                if last_decided.get(key) != epoch:
                    anomalies.append(_regression(node, key, before, epoch, event.seq, "the leader epochs it elected"))
            else:
                decided[key] = (epoch, event.seq)
            last_decided[key] = epoch
            zk_states.setdefault(key, []).append((body.zk_version, _zxid(body.zxid), epoch, node, event.seq))
            if forbid_unclean and body.unclean and body.recovery is not True:
                anomalies.append(Anomaly(
                    "unclean-election",
                    f"Controller {node} elected broker {body.leader}, which was not in the ISR, as leader of "
                    f"{key[0]}/{key[1]} in leader epoch {epoch}, though unclean leader election is disabled.",
                    key[0], key[1], events=((node, event.seq),),
                    details={"leader": body.leader, "leader_epoch": epoch}))
        elif isinstance(body, ControllerElected):
            epoch = body.controller_epoch
            controllers.setdefault(epoch, {}).setdefault(body.broker, (node, event.seq))
            if controller_view is not None and epoch < controller_view[0]:
                if last_controller != epoch:
                    anomalies.append(Anomaly(
                        "controller-epoch-regression",
                        f"Broker {node} saw controller epoch {epoch} after {controller_view[0]}.",
                        events=((node, controller_view[1]), (node, event.seq)),
                        details={"node": node, "controller_epoch": epoch}))
            else:
                controller_view = (epoch, event.seq)
            last_controller = epoch
        elif isinstance(body, IsrChanged):  # only a partition's leader changes its ISR
            key = (body.topic, body.partition)
            acting.setdefault((key, body.leader_epoch), {}).setdefault(node, (node, event.seq))
            zk_states.setdefault(key, []).append(
                (body.zk_version, _zxid(body.zxid), body.leader_epoch, node, event.seq))
    return anomalies


def _regression(node: str, key: PartitionKey, before: tuple[int, int], epoch: int, seq: int, what: str) -> Anomaly:
    return Anomaly(
        "epoch-regression",
        f"Broker {node} went back from leader epoch {before[0]} to {epoch} of {key[0]}/{key[1]} in {what}.",
        key[0], key[1], events=((node, before[1]), (node, seq)),
        details={"node": node, "from_epoch": before[0], "to_epoch": epoch})


def _zxid(zxid: int | None) -> int:
    return -1 if zxid is None else zxid


def _zookeeper_order(key: PartitionKey, states: list[tuple[int, int, int, str, int]]) -> list[Anomaly]:
    """Each state is (version, zxid, epoch, node, seq). A state written after another (a
    greater version, or the same version and a greater transaction id, both known) must not
    hold an older epoch."""
    anomalies = []
    highest: tuple[int, int, int, str, int] | None = None
    for state in sorted(states):
        version, zxid, epoch = state[0], state[1], state[2]
        if highest is not None and epoch < highest[2] and (
                version > highest[0] or (zxid > highest[1] >= 0 and version == highest[0])):
            anomalies.append(Anomaly(
                "epoch-regression",
                f"ZooKeeper's state of {key[0]}/{key[1]} went back from leader epoch {highest[2]} "
                f"(version {highest[0]}) to epoch {epoch} (version {version}).",
                key[0], key[1], events=((highest[3], highest[4]), (state[3], state[4])),
                details={"source": "zookeeper", "from_epoch": highest[2], "to_epoch": epoch,
                         "zk_versions": [highest[0], version]}))
        if highest is None or epoch >= highest[2]:
            highest = state
    return anomalies
