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

- ``leader-lacks-committed``: the committed prefix is a prefix of every later leader's log
  (see :mod:`.committed_prefix`).
- ``replica-diverges-below-hw``: whenever a broker's own ``hw_changed`` says its HW is *h*
  (a follower's or a leader's), every record its log holds below *h* is the record the
  leaders committed at that offset (see :mod:`.committed_prefix`). StrongIsr accepts any
  value a member *ever* held and looks only when a leader commits or admits: a follower that
  truncated to the wrong point (a diverging-epoch answer, an epoch lookup, a restart's
  recovery), kept a divergent record and fetched on past it ends with a log that differs
  from the committed one below its own HW. StrongIsr sees it too when the follower never held
  the committed record; only this sees one that held it and later holds another.
- ``isr-admitted-behind-hw``: a leader's HW waits for the follower it is admitting (see
  :mod:`.admission_progress`).
- ``isr-admitted-lacking-committed``, ``stale-controller-write`` and
  ``isr-written-for-another-epoch``: StrongIsr when a follower joins the ISR, the
  controller-epoch fencing of ZooKeeper writes, and KIP-343's "only the current leader changes
  its ISR"; they order events of several nodes by leader epochs and ZooKeeper zxids (see
  :mod:`.epoch_invariants`).

Brokers are named by id in ISRs and by node name in event files; each broker says its id
when it starts (see :mod:`.replica_logs` for files that do not). An ISR member that no event
file speaks for cannot be held to anything: it is counted toward min.insync.replicas as the
leader counted it, but a run with nothing else wrong is then unknown, never valid, as is a
run whose events do not cover every broker it had (:mod:`.event_coverage`). So is a member
two files claim to be where nothing tells which is it (both state it, or both are inferred
and neither states it): a file that states its id wins over one whose id is inferred, and
the verdict never depends on how the files are named. ISR members are counted once each,
however often an ISR names them.

Only one node's own events are ever compared with each other: node clocks are skewed under
clock faults, so nothing here orders events of different nodes. What the run promised is
read from its configuration (its acks and min.insync.replicas), never from the
implementation: a run that states no configuration cannot be judged, and a run whose
producers asked for acks=all, with acknowledged sends but no acks=all acknowledgement in any
node's events, is unknown, never valid, as is one with an acknowledgement recorded with other
acks than all, or in a leader epoch its node's events hold no view of (each held to no ISR:
a leader alone in its ISR acknowledging as acks=1 was VALID), one with a ``hw_changed`` of
another epoch or role than its node's last ``became_*`` (its commit, held to no ISR, hid a
member's lack), and a run whose clients saw records of a partition committed that no
leader's events record committing (its appends, its leadership or its HW moves are not all
there).
"""

from __future__ import annotations

from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.checkers.event_coverage import exposed_beyond_recorded
from floodmark.checkers.permitted import LossPermissions
from floodmark.checkers.white_box.admission_progress import admitted_behind_hw
from floodmark.checkers.white_box.committed_prefix import BelowHwCheck, Commits, LeaderCheck
from floodmark.checkers.white_box.epoch_invariants import (
    admissions_lacking_committed,
    gather,
    isr_writes_for_another_epoch,
    stale_controller_writes,
)
from floodmark.checkers.white_box.hw import client_exposure
from floodmark.checkers.white_box.replica_logs import (
    FirstPass,
    Held,
    ImplausibleOffset,
    elected_leaders,
    first_pass,
    record_of,
)
from floodmark.checkers.white_box.story_ends import set_aside_unproven, unproven_reason
from floodmark.checkers.white_box.strong_isr import LeaderView, StrongIsr
from floodmark.contracts.node_event_kinds import ACKS_ALL
from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    HwChanged,
    IsrChanged,
    NodeEvent,
    PartitionKey,
    Started,
    Truncated,
)
from floodmark.contracts.results import Anomaly, CheckerResult, Validity, anomaly_counts


class InvariantsChecker:
    name = "invariants"

    def check(self, run: CheckInput) -> CheckerResult:
        stats: dict[str, Any] = {"acks_judged": 0, "acks_unjudged": 0, "committed_checked": 0,
                                 "below_hw_checked": 0}
        if run.config is None:
            stats["unjudged_because"] = "the run states no configuration (no min.insync.replicas to hold acks to)"
            return CheckerResult("unknown", [], stats)
        try:
            anomalies, unjudged = _judge(run, stats)
        except ImplausibleOffset as e:
            stats["unjudged_because"] = f"the node events cannot be replayed: {e}"
            return CheckerResult("unknown", [], stats)
        anomalies, unproven = set_aside_unproven(anomalies, run.cut_short,
                                                 None if run.files_recorded else run.events)
        reasons = []
        if run.missing_lines and anomalies:
            # Each finding rests on what a node's story lacks or on the view it held; a line
            # missing from the middle of a file (an append, an ISR change) makes any of them
            # no proof: a valid run with one line taken out read INVALID.
            stats["unproven_missing_lines"] = anomaly_counts(anomalies)
            reasons.append(f"findings ({', '.join(f'{n} {t}' for t, n in anomaly_counts(anomalies).items())}) are "
                           f"no proof: the event files of {', '.join(sorted(run.missing_lines))} miss lines, which "
                           "may have held what the findings say is not there")
            anomalies = []
        stats["anomalies"] = anomaly_counts(anomalies)
        valid: Validity = not anomalies
        if unproven:
            stats["unproven"] = unproven
            reasons.append(unproven_reason(unproven))
        if unjudged:
            stats["isr_members_unjudged"] = sorted(unjudged)
            claimed = stats.get("brokers_ambiguous", {})
            unclaimed = sorted(member for member in unjudged if str(member) not in claimed)
            if unclaimed:
                reasons.append(f"ISR members {unclaimed} are no broker whose events the run holds")
            reasons.extend(f"ISR member {member} is claimed by the events of {' and '.join(claimed[str(member)])}, "
                           "and nothing tells which is it" for member in sorted(unjudged) if str(member) in claimed)
        missing = run.coverage_problem
        if missing is not None:
            reasons.append(missing)
        if run.config.acks_all and stats["acks_judged"] == 0 and _acknowledged_sends(run):
            reasons.append("acknowledged sends, but no node event records an acks=all acknowledgement")
        elif run.config.acks_all and stats.get("acks_not_all"):
            reasons.append(f"{stats['acks_not_all']} acknowledgements record acks other than all, which the run's "
                           "producers asked for: they are held to no ISR")
        if stats.get("hw_roles_contradicted") and missing is None:
            reasons.append(f"{stats['hw_roles_contradicted']} hw_changed events state another leader epoch or role "
                           "than the node's own became_leader or became_follower put it in: what they commit "
                           "cannot be placed")
        if stats["acks_unjudged"] and missing is None:  # (lines missing explain it, and are said)
            reasons.append(f"{stats['acks_unjudged']} acks=all acknowledgements are of a leader epoch the node's "
                           "events hold no leader view of: they are held to no ISR")
        uncommitted = stats.get("exposed_beyond_commits")
        if uncommitted:
            where, (top, end) = next(iter(uncommitted.items()))
            recorded = f"its leaders' events record commits only up to HW {end}" if end else "its leaders' events record no commit of it"
            reasons.append(exposed_beyond_recorded(where, top, recorded, len(uncommitted),
                                                   "the events the commits are judged by"))
        if valid and reasons:
            valid = "unknown"
            stats["unjudged_because"] = "; ".join(reasons)
        return CheckerResult(valid, anomalies, stats)


def _judge(run: CheckInput, stats: dict[str, Any]) -> tuple[list[Anomaly], set[int]]:
    """Every anomaly, and the ISR members that could not be judged (no node is that broker)."""
    assert run.config is not None
    # Two passes: what every node ever appended (and who it is) first, because a leader's
    # commit is held against its followers' whole record; then each node's own story.
    commits = Commits()
    elected = elected_leaders(run.events)
    firsts = {node: first_pass(node, events, commits, elected) for node, events in sorted(run.events.items())}
    commits.seal()
    beyond = _exposed_beyond_commits(run, commits)
    if beyond:
        stats["exposed_beyond_commits"] = beyond
    held = {node: first.held for node, first in firsts.items()}
    node_of, ambiguous = _brokers(firsts)
    if ambiguous:
        stats["brokers_ambiguous"] = {str(broker): nodes for broker, nodes in sorted(ambiguous.items())}
    unjudged: set[int] = set()
    anomalies: list[Anomaly] = []
    for node in sorted(run.events):
        leaders = LeaderCheck(node, commits.partitions)
        below_hw = BelowHwCheck(node, commits.partitions, run.loss_permissions)
        anomalies.extend(_replay(node, run.events[node], held, node_of, run.config.min_insync_replicas, stats,
                                 leaders, below_hw, run.loss_permissions, unjudged))
        stats["below_hw_checked"] += below_hw.checked
    # Invariants across nodes, ordered by epochs and ZooKeeper zxids (see epoch_invariants).
    facts = gather(run.events)
    anomalies.extend(admissions_lacking_committed(facts))
    anomalies.extend(admitted_behind_hw(run.events))  # each node's own order (see admission_progress)
    anomalies.extend(stale_controller_writes(facts))
    anomalies.extend(isr_writes_for_another_epoch(facts))
    return anomalies, unjudged


def _exposed_beyond_commits(run: CheckInput, commits: Commits) -> dict[str, list[int]]:
    """Partitions whose offsets clients saw committed beyond every commit the events record
    ("topic/partition" -> [the committed offset clients saw, where the recorded commits
    end]). A leader commits only records its log holds (its appends) as it moves its HW as
    leader of an epoch it became leader in, and says each; a client sees only what was
    committed. So the events that StrongIsr and the committed prefix judge are not all there
    (a writer that leaves out a kind, a file cut by hand): what they lack was never judged."""
    found: dict[str, list[int]] = {}
    for (topic, number), top in sorted(client_exposure(run)[0].items()):
        committed = commits.partitions.get((topic, number))
        end = 0 if committed is None else committed.base + len(committed.values)
        if top > end:
            found[f"{topic}/{number}"] = [top, end]
    return found


def _brokers(firsts: dict[str, FirstPass]) -> tuple[dict[int, str], dict[int, list[str]]]:
    """Which node is each broker, and the brokers several files claim with no way to tell
    which is it. A file that states its id is that broker, whatever others guess; a broker
    two files state, or two files guess with none stating it, is nobody's, so its ISR
    memberships cannot be judged (never the file whose name sorts last)."""
    claims: dict[int, list[str]] = {}
    for node, first in sorted(firsts.items()):
        if first.broker is not None:
            claims.setdefault(first.broker, []).append(node)
    node_of: dict[int, str] = {}
    ambiguous: dict[int, list[str]] = {}
    for broker, nodes in claims.items():
        stating = [node for node in nodes if firsts[node].stated == broker]
        if len(nodes) == 1 or len(stating) == 1:
            node_of[broker] = stating[0] if stating else nodes[0]
        else:
            ambiguous[broker] = nodes
    return node_of, ambiguous


def _judge_ack(event: NodeEvent, ack: Acked, view: LeaderView, min_isr: int) -> list[Anomaly]:
    if ack.high_watermark > ack.offset and view.members >= min_isr:
        return []  # the common case, decided before anything is built for a report
    where = f"{ack.topic}/{ack.partition}"
    first = ack.first_offset if ack.first_offset is not None else ack.offset
    offsets = tuple(range(max(first, ack.offset - 99), ack.offset + 1))  # the last hundred at most
    witness = ((event.node, event.seq),)
    found = []
    if view.members < min_isr:
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


def _replay(node: str, events: list[NodeEvent], held: dict[str, Held], node_of: dict[int, str],
            min_isr: int, stats: dict[str, Any], leaders: LeaderCheck, below_hw: BelowHwCheck,
            permissions: LossPermissions, unjudged: set[int]) -> list[Anomaly]:
    """The node's own story: its log, its leader views, its acks, its commits and its HWs."""
    me = next((b for b, n in node_of.items() if n == node), None)
    strong = StrongIsr(node, me, held, node_of, stats, unjudged)
    logs: Held = {}  # this node's own log, as its events built it
    views: dict[PartitionKey, LeaderView] = {}
    hws: dict[PartitionKey, int] = {}  # this node's HW of each partition, as its events say
    # Partitions the node took a role in, or appended to, since it last started: the log of
    # any other is what the restart recovered, which its first role states (_cut_to_stated_end).
    roled: set[PartitionKey] = set()
    in_role: dict[PartitionKey, tuple[bool, int]] = {}  # (leads?, epoch) its last became_* put it in
    anomalies: list[Anomaly] = []
    for event in events:
        body = event.body
        if type(body) is Appended:
            key = (body.topic, body.partition)
            log = logs.get(key) or record_of(logs, key)  # no call for the most frequent event
            if log.append(body.offset, body.values):  # written over, not at the end
                leaders.changed(key, body.offset)
                below_hw.changed(key, body.offset)
                strong.forget_from(key, body.offset)
            if key not in roled and body.role != "recovery":
                roled.add(key)  # the log goes on from what the process recovered
        elif type(body) is Acked:
            if body.acks != ACKS_ALL:
                stats["acks_not_all"] = stats.get("acks_not_all", 0) + 1
                continue
            view = views.get((body.topic, body.partition))
            if view is None or (body.leader_epoch is not None and body.leader_epoch != view.leader_epoch):
                stats["acks_unjudged"] += 1  # the leader's view of this epoch is not in its events
                continue
            stats["acks_judged"] += 1
            anomalies.extend(_judge_ack(event, body, view, min_isr))
        elif type(body) is HwChanged:
            key = (body.topic, body.partition)
            hws[key] = body.high_watermark
            said = (body.role == "leader", body.leader_epoch)
            if in_role.get(key, said) != said:
                stats["hw_roles_contradicted"] = stats.get("hw_roles_contradicted", 0) + 1
            diverged = below_hw.high_watermark(event, body, logs.get(key) or record_of(logs, key))
            if diverged is not None:
                anomalies.append(diverged)
            view = views.get(key)
            if body.role == "leader" and view is not None and view.leader_epoch == body.leader_epoch:
                anomalies.extend(strong.commit(event, body, view, record_of(logs, key)))
        elif type(body) is BecameLeader or type(body) is IsrChanged:
            key = (body.topic, body.partition)
            before = views.get(key)
            view = views[key] = LeaderView(body.leader_epoch, tuple(body.isr))
            if type(body) is BecameLeader:
                in_role[key] = (True, body.leader_epoch)
                hws[key] = body.high_watermark
                if key not in roled:
                    roled.add(key)
                    _cut_to_stated_end(logs, key, body.log_end, leaders, below_hw, strong)
                lacking = leaders.lead(key, body.leader_epoch, record_of(logs, key), (node, event.seq), permissions)
                if lacking is not None:
                    anomalies.append(lacking)
            joined = [m for m in view.isr
                      if before is None or before.leader_epoch != view.leader_epoch or m not in before.isr]
            anomalies.extend(strong.admitted(event, key, view, joined, hws.get(key, 0), record_of(logs, key)))
        elif type(body) is BecameFollower:
            key = (body.topic, body.partition)
            views.pop(key, None)
            in_role[key] = (False, body.leader_epoch)
            if key not in roled:
                roled.add(key)
                _cut_to_stated_end(logs, key, body.log_end, leaders, below_hw, strong)
        elif type(body) is Started:
            roled.clear()
            in_role.clear()
        elif type(body) is Truncated:
            key = (body.topic, body.partition)
            leaders.changed(key, body.to_offset)
            below_hw.changed(key, body.to_offset)
            record_of(logs, key).truncate(body.to_offset)
            strong.forget_from(key, body.to_offset)
    return anomalies


def _cut_to_stated_end(logs: Held, key: PartitionKey, log_end: int, leaders: LeaderCheck, below_hw: BelowHwCheck,
                       strong: StrongIsr) -> None:
    """A restarted broker's first role in a partition says where the log it recovered ends
    (``log_end``); a log rebuilt from its events that goes further lost its tail in the
    restart without a ``truncated`` event: a power loss that took a replica's whole log (its
    files never synced, its HW checkpoint with them) leaves the broker nothing to recover
    and so nothing to say. The log is what the broker says it is, so a leader's log is
    judged as it stands, not as it stood before the loss. (Within one process every change
    of the log is an ``appended`` or ``truncated`` event.)"""
    log = logs.get(key)
    if log is not None and log.end > log_end:
        leaders.changed(key, log_end)
        below_hw.changed(key, log_end)
        log.truncate(log_end)
        strong.forget_from(key, log_end)


def _acknowledged_sends(run: CheckInput) -> bool:
    return any(op.f == "send" and op.type == "ok" for op in run.history)
