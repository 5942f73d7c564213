"""Leaders: one per partition per leader epoch, epochs only move forward, one controller per epoch.

Leader epochs exist so that every broker and every record can tell which leadership they
belong to. The design promises:

- ``multiple-leaders``: at most one broker acts as leader of a partition in a leader epoch.
  A broker acts as leader when it becomes leader, appends records as leader, advances the
  HW as leader, changes the partition's ISR (only its leader does) or acknowledges a
  produce. A broker acts as leader only in an epoch it became leader of, in the same process
  (``self-promoted-leader``, :mod:`.self_promoted`: its own record, which is there even
  when the controller's election is not). The controller's own decisions (``leader_elected``) must also name a single
  leader per epoch, and a broker that acts as leader in an epoch must be the one the
  controller elected for it (a broker that states its id, when one election was recorded).
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
  An election that says it was clean is also held to the ISR and ELR of the state it replaced,
  as ZooKeeper's versions recorded it (:func:`elections_from_outside`): a controller whose
  rule is wrong (a preferred election that skips the in-sync check) flags nothing itself.

Node clocks are skewed under clock faults, so events of different nodes are never ordered
by time: only per-node sequence numbers and ZooKeeper versions order anything here.

What a broker did not record cannot be judged: if the events do not cover every broker the
run had, a run with nothing wrong in them is unknown (see :mod:`.event_coverage`).
"""

from __future__ import annotations

from collections.abc import Mapping

from floodmark.checkers.api import CheckInput
from floodmark.checkers.event_coverage import verdict
from floodmark.checkers.white_box.self_promoted import acts_without_leadership
from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    HwChanged,
    IsrChanged,
    IsrWritten,
    LeaderElected,
    NodeEvent,
    PartitionKey,
    Started,
)
from floodmark.contracts.results import Anomaly, CheckerResult

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
        anomalies.extend(_acting_not_elected(acting, elected, _stated_ids(run.events)))
        # Parts of files (Spark's by-partition groups) are judged only when no file misses a
        # line; otherwise the coverage makes the verdict unknown, with the gap as the reason.
        if not run.whole_file_gap:
            anomalies.extend(acts_without_leadership(run.events, whole_files=run.whole_file_gap is None))
        for epoch, brokers in sorted(controllers.items()):
            if len(brokers) > 1:
                anomalies.append(Anomaly(
                    "multiple-controllers",
                    f"Brokers {', '.join(map(str, sorted(brokers)))} were all elected controller in controller epoch {epoch}.",
                    events=tuple(sorted(brokers.values())),
                    details={"controller_epoch": epoch, "controllers": sorted(brokers)}))
        for key, states in sorted(zk_states.items()):
            anomalies.extend(_zookeeper_order(key, states))
        if forbid_unclean and run.config is not None:
            anomalies.extend(elections_from_outside(run.events, run.config.min_insync_replicas))
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


def _stated_ids(events: Mapping[str, list[NodeEvent]]) -> dict[str, int]:
    """node -> the broker id its ``started`` events state, for nodes that state one and only one
    (a file written before brokers stated ids is matched by inference elsewhere, partly from
    the elections themselves, so it cannot be held to them here)."""
    ids: dict[str, int] = {}
    for node, node_events in events.items():
        stated = {e.body.broker for e in node_events if type(e.body) is Started and e.body.broker is not None}
        if len(stated) == 1:
            ids[node] = stated.pop()
    return ids


def _acting_not_elected(acting: _Acting, elected: _Elected, ids: Mapping[str, int]) -> list[Anomaly]:
    """A broker that acted as leader in a leader epoch for which the controller elected another
    broker (or no leader at all): two leaders of one epoch, the controller's and the acting
    one, although the one elected may never have acted (it was down, or never heard). Only an
    epoch with a single recorded election is judged (two are a finding of their own)."""
    anomalies = []
    for (key, epoch), nodes in sorted(acting.items()):
        leaders = elected.get((key, epoch))
        if leaders is None or len(leaders) != 1:
            continue
        ((leader, election),) = leaders.items()
        for node, first in sorted(nodes.items()):
            broker = ids.get(node)
            if broker is None or broker == leader:
                continue
            chosen = "no leader" if leader < 0 else f"broker {leader}"
            anomalies.append(Anomaly(
                "multiple-leaders",
                f"Broker {node} (id {broker}) acted as leader of {key[0]}/{key[1]} in leader epoch {epoch}, "
                f"for which controller {election[0]} elected {chosen}.",
                key[0], key[1], events=(election, first),
                details={"leader_epoch": epoch, "leaders": sorted({leader, broker}), "source": "not_elected"}))
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


# ---------------------------------------------------------- clean elections, judged
# An election's ``unclean`` flag is the controller's own opinion of what it did: a wrong rule
# (a preferred election that skips the in-sync check, an ELR that keeps a replica it should
# have dropped) elects from outside the ISR and flags nothing. Found by mutation analysis.

# partition -> version -> the ISRs recorded at it (as sorted tuples)
_Isrs = dict[PartitionKey, dict[int, set[tuple[int, ...]]]]


def elections_from_outside(events: Mapping[str, list[NodeEvent]], min_insync: int) -> list[Anomaly]:
    """Elections that say they were clean but chose a leader outside the ISR and ELR they replaced.

    The events record each partition state ZooKeeper held, at its version (``leader_elected``
    and ``isr_written`` for the controller's writes, ``isr_changed`` for a leader's). An
    election written at version ``v`` replaced the state at ``v - 1``, and a clean leader is a
    member of that state's ISR or of its ELR (KIP-966: replicas that left an ISR below
    min.insync.replicas). The ELR is not recorded, so it is over-approximated by every member
    of every ISR since the partition last had min.insync.replicas in sync: a leader outside
    that was elected from outside both. A state replaced that no event recorded, or that was
    recorded with different ISRs (a recreated topic starts its versions again), is not judged:
    what is not known is never called clean or unclean. Flagged unclean elections are judged
    against the configuration by the checker itself; an offline decision (leader -1) elects
    nobody."""
    isrs: _Isrs = {}
    clean: list[tuple[str, NodeEvent, LeaderElected]] = []
    for node in sorted(events):
        for event in events[node]:
            body = event.body
            if type(body) is LeaderElected:
                _record(isrs, body.topic, body.partition, body.zk_version, body.isr)
                if not body.unclean and body.leader >= 0 and body.zk_version > 0:
                    clean.append((node, event, body))
            elif type(body) is IsrChanged or type(body) is IsrWritten:
                _record(isrs, body.topic, body.partition, body.zk_version, body.isr)
    anomalies = []
    for node, event, body in clean:
        allowed = _may_lead(isrs.get((body.topic, body.partition), {}), body.zk_version - 1, min_insync)
        if allowed is None or body.leader in allowed:
            continue
        anomalies.append(Anomaly(
            "unclean-election",
            f"Controller {node} elected broker {body.leader} leader of {body.topic}/{body.partition} in leader "
            f"epoch {body.leader_epoch} (ZooKeeper version {body.zk_version}) as a clean election, but it was "
            f"in neither the ISR nor the ELR it replaced (could lead: {sorted(allowed)}).",
            body.topic, body.partition, events=((node, event.seq),),
            details={"leader": body.leader, "leader_epoch": body.leader_epoch, "zk_version": body.zk_version,
                     "could_lead": sorted(allowed), "flagged_unclean": False}))
    return anomalies


def _record(isrs: _Isrs, topic: str, partition: int, version: int, isr: tuple[int, ...]) -> None:
    isrs.setdefault((topic, partition), {}).setdefault(version, set()).add(tuple(sorted(isr)))


def _may_lead(states: dict[int, set[tuple[int, ...]]], version: int, min_insync: int) -> set[int] | None:
    """Who could lead cleanly from the state at ``version``: its ISR and (over-approximated)
    ELR; None when a state that decides it was not recorded, or recorded ambiguously."""
    allowed: set[int] = set()
    while True:
        recorded = states.get(version)
        if recorded is None or len(recorded) != 1:
            return None
        (isr,) = recorded
        allowed.update(isr)
        # At min.insync.replicas the ELR is empty: nothing from before this state can lead.
        if len(isr) >= min_insync or version == 0:
            return allowed
        version -= 1
