"""White-box invariants: what the brokers say they did, held against the replication contract.

The black-box checkers (durability, queue) see a flaw only when a run's faults turned it into
lost or reordered data. A flaw can be exercised without that: a leader that acknowledges
acks=all records while its ISR is itself alone loses nothing if it then survives. The
invariants of the protocol's TLA+ specification catch the exercise itself, from the node
events each broker records:

- ``acked-below-min-isr``: every acks=all acknowledgement was covered by at least
  min.insync.replicas members of the ISR the leader held at that moment (its view from
  ``became_leader`` and ``isr_changed``, in its own event order, in the same leader epoch).
- ``acked-above-hw``: an acks=all acknowledgement covers only records below the leader's HW
  at that moment: the whole ISR had them.
- ``isr-member-lacks-committed`` (StrongIsr): when a leader moves its HW past an offset, every
  member of the ISR it holds in that epoch has that offset with the same value. Events of
  different nodes cannot be ordered, so the check is the one that needs no order: the member
  must have appended that value at that offset at some point of the run (value ids are unique
  per send, so the same value at the same offset is the same record). A member that never
  did was counted toward a commit it did not hold (KAFKA-7128's ISR admission, divergent
  logs after a lost epoch fence). The same holds when a member *enters* a leader's ISR (the
  ISR it was elected with, or an expansion): it must have held every record already below
  that leader's HW, which no later HW advance looks at again (a follower that kept a
  divergent record below the HW after a lookup for an epoch its leader never had, KAFKA-6361).

- ``isr-admitted-lacking-committed``, ``stale-controller-write`` and
  ``isr-written-for-another-epoch``: StrongIsr when a follower joins the ISR, the
  controller-epoch fencing of ZooKeeper writes, and KIP-343's "only the current leader changes
  its ISR"; they order events of several nodes by leader epochs and ZooKeeper zxids (see
  :mod:`.epoch_invariants`).

Brokers are named by id in ISRs and by node name in event files; a node's id is the one it
gave as controller, or the one broker id present in every ISR it held as leader (see
:func:`_first_pass`).

Only one node's own events are ever compared with each other: node clocks are skewed under
clock faults, so nothing here orders events of different nodes. What the run promised is
read from its configuration (its min.insync.replicas), never from the implementation: a run
that states no configuration cannot be judged, and a run with acknowledged sends but no
acknowledgement in any node's events is unknown, never valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.checkers.epoch_invariants import (
    admissions_lacking_committed,
    isr_writes_for_another_epoch,
    stale_controller_writes,
)
from floodmark.node_event_kinds import ACKS_ALL
from floodmark.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    HwChanged,
    IsrChanged,
    NodeEvent,
    PartitionKey,
    Truncated,
)
from floodmark.results import Anomaly, CheckerResult, Validity, anomaly_counts


@dataclass(frozen=True)
class LeaderView:
    """What a leader believed about its partition: its epoch and ISR."""

    leader_epoch: int
    isr: tuple[int, ...]


class InvariantsChecker:
    name = "invariants"

    def check(self, run: CheckInput) -> CheckerResult:
        stats: dict[str, Any] = {"acks_judged": 0, "acks_unjudged": 0, "committed_checked": 0}
        if run.config is None:
            stats["unjudged_because"] = "the run states no configuration (no min.insync.replicas to hold acks to)"
            return CheckerResult("unknown", [], stats)
        # Two passes: what every node ever appended (and who it is) first, because a leader's
        # commit is held against its followers' whole record; then each node's own story.
        firsts = {node: _first_pass(node, events) for node, events in sorted(run.events.items())}
        held = {node: first.held for node, first in firsts.items()}
        node_of = {first.broker: node for node, first in firsts.items() if first.broker is not None}
        anomalies: list[Anomaly] = []
        for node in sorted(run.events):
            anomalies.extend(_replay(node, run.events[node], held, node_of, run.config.min_insync_replicas, stats))
        # Invariants across nodes, ordered by epochs and ZooKeeper zxids (see epoch_invariants).
        anomalies.extend(admissions_lacking_committed(run.events))
        anomalies.extend(stale_controller_writes(run.events))
        anomalies.extend(isr_writes_for_another_epoch(run.events))
        stats["anomalies"] = anomaly_counts(anomalies)
        valid: Validity = not anomalies
        if valid and stats["acks_judged"] == 0 and _acknowledged_sends(run):
            valid = "unknown"
            stats["unjudged_because"] = "acknowledged sends, but no node event records an acks=all acknowledgement"
        return CheckerResult(valid, anomalies, stats)


def _judge_ack(event: NodeEvent, ack: Acked, view: LeaderView, min_isr: int) -> list[Anomaly]:
    where = f"{ack.topic}/{ack.partition}"
    first = ack.first_offset if ack.first_offset is not None else ack.offset
    offsets = tuple(range(first, ack.offset + 1))
    witness = ((event.node, event.seq),)
    found = []
    if len(view.isr) < min_isr:
        found.append(Anomaly(
            "acked-below-min-isr",
            f"{event.node} acknowledged offsets {first}..{ack.offset} of {where} with acks=all in leader "
            f"epoch {view.leader_epoch} while its ISR was {list(view.isr)}, fewer than "
            f"min.insync.replicas={min_isr}.",
            ack.topic, ack.partition, offsets, events=witness,
            details={"isr": list(view.isr), "min_insync_replicas": min_isr, "leader_epoch": view.leader_epoch}))
    if ack.high_watermark <= ack.offset:
        found.append(Anomaly(
            "acked-above-hw",
            f"{event.node} acknowledged offsets {first}..{ack.offset} of {where} with acks=all while its "
            f"HW was {ack.high_watermark}: the ISR did not have them all yet.",
            ack.topic, ack.partition, offsets, events=witness,
            details={"high_watermark": ack.high_watermark, "leader_epoch": view.leader_epoch}))
    return found


# ----------------------------------------------------------------------------- the two passes

class Appends:
    """One replica's record of one partition, as its ``appended`` and ``truncated`` events
    built it: the log as it stands (a list: appends come at the end almost always) and every
    value it ever held at an offset since written over or cut away."""

    __slots__ = ("log", "earlier")

    def __init__(self) -> None:
        self.log: list[str | None] = []  # None: a gap no event filled
        self.earlier: dict[int, set[str]] = {}

    def append(self, offset: int, values: tuple[str, ...]) -> bool:
        """Record an append; True if it wrote over records (not at the end)."""
        log = self.log
        if offset == len(log):
            log.extend(values)
            return False
        if offset > len(log):
            log.extend([None] * (offset - len(log)))
            log.extend(values)
            return False
        for i, value in enumerate(values, offset):
            if i < len(log):
                self._keep(i)
                log[i] = value
            else:
                log.append(value)
        return True

    def truncate(self, offset: int) -> None:
        for i in range(offset, len(self.log)):
            self._keep(i)
        del self.log[offset:]

    def _keep(self, offset: int) -> None:
        old = self.log[offset]
        if old is not None:
            self.earlier.setdefault(offset, set()).add(old)

    def ever_held(self, offset: int, value: str) -> bool:
        log = self.log
        return (offset < len(log) and log[offset] == value) or value in self.earlier.get(offset, ())


Held = dict[PartitionKey, Appends]  # partition -> what the node ever held there


def _record(records: Held, appended: Appended) -> Appends:
    """The record of the partition ``appended`` went to, begun on its first append."""
    key = (appended.topic, appended.partition)
    found = records.get(key)
    if found is None:
        found = records[key] = Appends()
    return found


@dataclass
class FirstPass:
    """What one node ever appended, and its broker id (see :func:`_first_pass`)."""

    held: Held
    broker: int | None


def _first_pass(node: str, events: list[NodeEvent]) -> FirstPass:
    """Every value the node ever appended at each offset; its broker id: the id it gave when it
    became controller (the controller runs inside a broker and names itself), else the one id
    in every ISR it held as leader and never the leader it followed. Where that leaves several
    (every ISR full), the number that ends the node's name (``n3``), if it is one of them;
    else None, and the node is not held to commits."""
    held: Held = {}
    common: set[int] | None = None
    followed: set[int] = set()
    controller: int | None = None
    for event in events:
        body = event.body
        if type(body) is Appended:
            _record(held, body).append(body.offset, body.values)
        elif type(body) is BecameLeader:
            common = set(body.isr) if common is None else common & set(body.isr)
        elif type(body) is BecameFollower:
            followed.add(body.leader)
        elif type(body) is ControllerElected:
            controller = body.broker
    if controller is not None and controller not in followed and (common is None or controller in common):
        return FirstPass(held, controller)
    if common is None:
        return FirstPass(held, None)
    common -= followed
    if len(common) == 1:
        return FirstPass(held, next(iter(common)))
    digits = node[len(node.rstrip("0123456789")):]
    return FirstPass(held, int(digits) if digits and int(digits) in common else None)


def _replay(node: str, events: list[NodeEvent], held: dict[str, Held], node_of: dict[int, str],
            min_isr: int, stats: dict[str, Any]) -> list[Anomaly]:
    """The node's own story: its log, its leader views, its acks and its commits."""
    me = next((b for b, n in node_of.items() if n == node), None)
    logs: Held = {}  # this node's own log, as its events built it
    # Offsets below this were already held against the member (what a member ever appended
    # only grows, so a check passed stays passed until this node's own log changes there).
    checked: dict[tuple[PartitionKey, str], int] = {}
    views: dict[PartitionKey, LeaderView] = {}
    hws: dict[PartitionKey, int] = {}  # this node's HW of each partition, as its events say
    anomalies: list[Anomaly] = []
    for event in events:
        body = event.body
        if type(body) is Appended:
            if _record(logs, body).append(body.offset, body.values):  # written over, not at the end
                _forget_from(checked, (body.topic, body.partition), body.offset)
        elif type(body) is Acked:
            if body.acks != ACKS_ALL:
                continue
            view = views.get((body.topic, body.partition))
            if view is None or (body.leader_epoch is not None and body.leader_epoch != view.leader_epoch):
                stats["acks_unjudged"] += 1  # the leader's view of this epoch is not in its events
                continue
            stats["acks_judged"] += 1
            anomalies.extend(_judge_ack(event, body, view, min_isr))
        elif type(body) is HwChanged:
            hws[(body.topic, body.partition)] = body.high_watermark
            if body.role == "leader":
                anomalies.extend(_check_commit(event, body, views, logs, held, node_of, me, checked, stats))
        elif type(body) is BecameLeader or type(body) is IsrChanged:
            key = (body.topic, body.partition)
            before = views.get(key)
            view = views[key] = LeaderView(body.leader_epoch, tuple(body.isr))
            if type(body) is BecameLeader:
                hws[key] = body.high_watermark
            joined = [m for m in view.isr
                      if before is None or before.leader_epoch != view.leader_epoch or m not in before.isr]
            anomalies.extend(_check_admitted(event, key, view, joined, hws.get(key, 0), logs, held, node_of,
                                             me, checked, stats))
        elif type(body) is BecameFollower:
            views.pop((body.topic, body.partition), None)
        elif type(body) is Truncated:
            key = (body.topic, body.partition)
            logs.setdefault(key, Appends()).truncate(body.to_offset)
            _forget_from(checked, key, body.to_offset)
    return anomalies


def _check_commit(event: NodeEvent, hw: HwChanged, views: dict[PartitionKey, LeaderView],
                  logs: Held, held: dict[str, Held], node_of: dict[int, str],
                  me: int | None, checked: dict[tuple[PartitionKey, str], int],
                  stats: dict[str, Any]) -> list[Anomaly]:
    """StrongIsr for one HW advance: every other ISR member appended each newly committed record."""
    key = (hw.topic, hw.partition)
    view = views.get(key)
    if view is None or view.leader_epoch != hw.leader_epoch:
        return []
    own = logs.get(key)
    log = own.log if own is not None else []
    found = []
    for member in view.isr:
        other = node_of.get(member)
        if member == me or other is None:
            continue
        missing = _unheld(key, log, other, max(hw.previous, checked.get((key, other), 0)), hw.high_watermark,
                          held, checked, stats)
        if missing:
            found.append(_lacks(event, key, hw.high_watermark, view, other, missing, log,
                                f"moved the HW of {key[0]}/{key[1]} to {hw.high_watermark} in leader epoch "
                                f"{view.leader_epoch} counting ISR member {other}"))
    return found


def _check_admitted(event: NodeEvent, key: PartitionKey, view: LeaderView, joined: list[int], hw: int,
                    logs: Held, held: dict[str, Held], node_of: dict[int, str], me: int | None,
                    checked: dict[tuple[PartitionKey, str], int], stats: dict[str, Any]) -> list[Anomaly]:
    """StrongIsr for members entering a leader's ISR (its election's ISR, or an expansion): each
    must hold every record already below the leader's HW, not only those committed later (a
    follower that kept a divergent record below the HW, and is admitted past it, would never be
    held to that offset by the HW advances that follow)."""
    own = logs.get(key)
    log = own.log if own is not None else []
    found = []
    for member in joined:
        other = node_of.get(member)
        if member == me or other is None:
            continue
        missing = _unheld(key, log, other, checked.get((key, other), 0), hw, held, checked, stats)
        if missing:
            found.append(_lacks(event, key, hw, view, other, missing, log,
                                f"holds {other} in the ISR of {key[0]}/{key[1]} in leader epoch "
                                f"{view.leader_epoch} from below its HW {hw}"))
    return found


def _unheld(key: PartitionKey, log: list[str | None], member: str, first: int, upto: int,
            held: dict[str, Held], checked: dict[tuple[PartitionKey, str], int],
            stats: dict[str, Any]) -> list[int]:
    """Offsets in [first, upto) of this node's log whose record ``member`` never appended."""
    theirs = held[member].get(key) or Appends()
    missing = [o for o in range(first, min(upto, len(log)))
               if (value := log[o]) is not None and not theirs.ever_held(o, value)]
    stats["committed_checked"] += max(0, upto - first)
    checked[(key, member)] = max(first, upto, checked.get((key, member), 0))
    return missing


def _forget_from(checked: dict[tuple[PartitionKey, str], int], key: PartitionKey, offset: int) -> None:
    """This node's log changed from ``offset`` on: what was checked there must be again."""
    for (k, member), upto in checked.items():
        if k == key and upto > offset:
            checked[(k, member)] = offset


def _lacks(event: NodeEvent, key: PartitionKey, hw: int, view: LeaderView, member: str, missing: list[int],
           log: list[str | None], what: str) -> Anomaly:
    shown = ", ".join(f"{o} ({log[o]!r})" for o in missing[:5]) + (" ..." if len(missing) > 5 else "")
    return Anomaly(
        "isr-member-lacks-committed",
        f"{event.node} {what}, but {member} never held offsets {shown}.",
        key[0], key[1], tuple(missing), events=((event.node, event.seq),),
        details={"member": member, "isr": list(view.isr), "leader_epoch": view.leader_epoch, "high_watermark": hw})


def _acknowledged_sends(run: CheckInput) -> bool:
    return any(op.f == "send" and op.type == "ok" for op in run.history)
