"""StrongIsr: every member of a leader's ISR holds what that leader commits.

When a leader moves its HW past an offset, every member of the ISR it held then must have
appended the record there; when a follower joins the ISR, it must hold everything the
leader has committed. A member no node's events speak for cannot be judged, and is counted
as such. A member that never held such a record is ``isr-member-lacks-committed``:
the acknowledged record was not where Kafka's contract says it is. The leader's view of its
partition (:class:`LeaderView`, its epoch and ISR) is what each commit is held to. Run by
:mod:`.invariants`, which replays each node's story and calls this at each commit and
admission.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from floodmark.checkers.white_box.replica_logs import Appends, Held
from floodmark.contracts.node_events import HwChanged, NodeEvent, PartitionKey
from floodmark.contracts.results import Anomaly


@dataclass(frozen=True)
class LeaderView:
    """What a leader believed about its partition: its epoch and ISR."""

    leader_epoch: int
    isr: tuple[int, ...]
    members: int = field(init=False, compare=False)  # each member counted once, however often the ISR names it

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", len(set(self.isr)))


class StrongIsr:
    """StrongIsr for one leader node: every member of its ISR holds what it commits."""

    def __init__(self, node: str, me: int | None, held: dict[str, Held], node_of: dict[int, str],
                 stats: dict[str, Any], unjudged: set[int]) -> None:
        self.node = node
        self.me = me
        self.held = held
        self.node_of = node_of
        self.stats = stats
        self.unjudged = unjudged
        # Offsets below this were already held against the member (what a member ever appended
        # only grows, so a check passed stays passed until this node's own log changes there).
        self.checked: dict[tuple[PartitionKey, str], int] = {}
        self._members_of: dict[LeaderView, tuple[list[str], list[int]]] = {}

    def _resolve(self, members: tuple[int, ...] | list[int]) -> tuple[list[str], list[int]]:
        """The nodes that are ``members`` (each once, the leader itself left out), and the
        members no node is (they cannot be judged)."""
        others, unjudged = [], []
        for member in dict.fromkeys(members):
            if member != self.me:
                other = self.node_of.get(member)
                if other is None:
                    unjudged.append(member)
                else:
                    others.append(other)
        return others, unjudged

    def commit(self, event: NodeEvent, hw: HwChanged, view: LeaderView, log: Appends) -> list[Anomaly]:
        """One HW advance: every other ISR member appended each newly committed record."""
        if hw.high_watermark <= hw.previous:
            return []
        key = (hw.topic, hw.partition)
        found = []
        for other in self._others(view):
            missing = self._unheld(key, log, other, hw.previous, hw.high_watermark)
            if missing:
                found.append(_lacks(event, key, hw.high_watermark, view, other, missing, log,
                                    self.held[other].get(key),
                                    f"moved the HW of {key[0]}/{key[1]} to {hw.high_watermark} in leader epoch "
                                    f"{view.leader_epoch} counting ISR member {other}"))
        return found

    def _others(self, view: LeaderView) -> list[str]:
        """The nodes that are the view's other ISR members (see ``_resolve``), noting the
        unjudged ones. Asked at every HW advance, so worked out once per view."""
        known = self._members_of.get(view)
        if known is None:
            known = self._members_of[view] = self._resolve(view.isr)
        if known[1]:
            self.unjudged.update(known[1])
        return known[0]

    def admitted(self, event: NodeEvent, key: PartitionKey, view: LeaderView, joined: list[int], hw: int,
                 log: Appends) -> list[Anomaly]:
        """Members entering a leader's ISR (its election's ISR, or an expansion): each must
        hold every record already below the leader's HW, not only those committed later (a
        follower that kept a divergent record below the HW, and is admitted past it, would
        never be held to that offset by the HW advances that follow)."""
        found: list[Anomaly] = []
        if hw <= log.base or not log.log:
            return found  # nothing below the HW to hold them to
        others, unjudged = self._resolve(joined)
        self.unjudged.update(unjudged)
        for other in others:
            missing = self._unheld(key, log, other, 0, hw)
            if missing:
                found.append(_lacks(event, key, hw, view, other, missing, log, self.held[other].get(key),
                                    f"holds {other} in the ISR of {key[0]}/{key[1]} in leader epoch "
                                    f"{view.leader_epoch} from below its HW {hw}"))
        return found

    def _unheld(self, key: PartitionKey, log: Appends, member: str, first: int, upto: int) -> list[int]:
        """Offsets in [first, upto) of this node's log whose record ``member`` never appended
        (from where it was last found to hold all: see ``checked``)."""
        checked = self.checked
        pair = (key, member)
        done = checked.get(pair, 0)
        if done > first:
            first = done
        if upto > first:
            self.stats["committed_checked"] += upto - first
            checked[pair] = upto
        else:
            checked[pair] = first
        base = log.base
        start = first if first > base else base  # conditionals, not max and min: a hot path
        stop = min(upto, base + len(log.log))
        if start >= stop:
            return []
        values = log.log[start - base:stop - base]
        theirs = self.held[member].get(key) or Appends()
        # Nearly always the member's latest values there are these very ones: one slice where
        # its log starts early enough (Appends.values without its call: a hot path).
        i = start - theirs.base
        if (theirs.log[i:i + len(values)] if i >= 0 else theirs.values(start, stop)) == values:
            return []
        return [o for o, value in enumerate(values, start) if value is not None and not theirs.ever_held(o, value)]

    def forget_from(self, key: PartitionKey, offset: int) -> None:
        """This node's log changed from ``offset`` on: what was checked there must be again."""
        checked = self.checked
        for (k, member), upto in checked.items():
            if k == key and upto > offset:
                checked[(k, member)] = offset


def _lacks(event: NodeEvent, key: PartitionKey, hw: int, view: LeaderView, member: str, missing: list[int],
           log: Appends, theirs: Appends | None, what: str) -> Anomaly:
    """The anomaly, saying whether the member's log lacks the records or diverges there: a
    member holding other records at those offsets points at the leader's log as much as at
    the member's (KAFKA-7128's shape), and the reader should see both values."""
    shown = ", ".join(f"{o} ({log.value_at(o)!r})" for o in missing[:5]) + (" ..." if len(missing) > 5 else "")
    instead = {} if theirs is None else {o: v for o in missing[:100] if (v := theirs.value_at(o)) is not None}
    details: dict[str, object] = {"member": member, "isr": list(view.isr), "leader_epoch": view.leader_epoch,
                                  "high_watermark": hw}
    diverged = ""
    if instead:
        listed = [o for o in missing[:5] if o in instead]
        diverged = (f" The two logs diverge there: {member} holds " + ", ".join(f"{o} ({instead[o]!r})" for o in listed)
                    + (" ..." if len(instead) > len(listed) else "") + " instead.")
        details["member_holds_instead"] = {str(o): v for o, v in instead.items()}
    return Anomaly(
        "isr-member-lacks-committed",
        f"{event.node} {what}, but {member} never held offsets {shown}.{diverged}",
        key[0], key[1], tuple(missing[:100]), events=((event.node, event.seq),), details=details)
