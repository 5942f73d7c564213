"""Replica logs rebuilt from node events: what each replica held, and which broker it is.

The white-box invariants compare what one replica held with what another did. Neither log is
in the run directory; each is rebuilt from its broker's own events, in its own order:
``appended`` puts records at an offset (at the end, nearly always; over older records when
a replica re-fetches after a truncation), ``truncated`` cuts the log back. A record written
over or cut away is remembered, because "did this replica ever hold this value here" is what
StrongIsr asks of a member whose log has changed since.

Offsets come from the events, and a hostile or damaged file may name any offset: a log is
kept from its first offset (a log that starts at 3·10⁸ costs nothing below it), and appends
that would leave gaps of more than :data:`MAX_GAP` offsets in all are refused
(:class:`ImplausibleOffset`) rather than padded; the checker then says it could not judge.

ISRs and leaders name brokers by id, event files by node name. A broker says its id in its
``started`` event; files written before it did are matched by inference (the id a node gave
when it became controller, or the leader the controller elected in every epoch the node
became leader in, or the one id in every ISR it held as leader and never the leader it
followed, or, where several remain, the number ending the node's name). The controller's
elections come first: a leader elected uncleanly is not in the ISR it leads, so the ISRs it
held name other brokers only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from floodmark.contracts.node_events import (
    Appended,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    HwChanged,
    LeaderElected,
    NodeEvent,
    PartitionKey,
    Started,
    Truncated,
)

MAX_GAP = 10_000_000  # offsets a log's appends may skip, in all


class ImplausibleOffset(ValueError):
    """An event puts a record so far past its log's end that no log of a run gets there."""


class Appends:
    """One replica's record of one partition: the log as it stands, from ``base`` (the offset
    of ``log[0]``; ``None`` marks a gap no event filled), and every value it ever held at an
    offset since written over or cut away."""

    __slots__ = ("base", "log", "earlier", "padded")

    def __init__(self) -> None:
        self.base = 0
        self.log: list[str | None] = []
        self.earlier: dict[int, set[str]] = {}
        self.padded = 0  # offsets of gaps no event filled, so far

    @property
    def end(self) -> int:
        """The log end offset."""
        return self.base + len(self.log)

    def value_at(self, offset: int) -> str | None:
        i = offset - self.base
        return self.log[i] if 0 <= i < len(self.log) else None

    def append(self, offset: int, values: tuple[str, ...]) -> bool:
        """Record an append; True if it wrote over records (not at the end)."""
        log = self.log
        if not log:
            self.base = offset  # an empty log starts wherever its first record is
        end = self.base + len(log)
        if offset == end:
            log.extend(values)
            return False
        if offset > end:
            self._pad(offset - end, offset)
            log.extend([None] * (offset - end))
            log.extend(values)
            return False
        if offset < self.base:
            self._pad(self.base - offset, offset)
            log[:0] = [None] * (self.base - offset)
            self.base = offset
        base = self.base
        for i, value in enumerate(values, offset - base):
            if i < len(log):
                self._keep(base + i)
                log[i] = value
            else:
                log.append(value)
        return True

    def _pad(self, count: int, offset: int) -> None:
        self.padded += count
        if self.padded > MAX_GAP:
            raise ImplausibleOffset(f"an append at offset {offset} leaves gaps of {self.padded} offsets in all")

    def truncate(self, offset: int) -> None:
        cut = max(0, offset - self.base)
        for i in range(cut, len(self.log)):
            self._keep(self.base + i)
        del self.log[cut:]

    def _keep(self, offset: int) -> None:
        old = self.log[offset - self.base]
        if old is not None:
            self.earlier.setdefault(offset, set()).add(old)

    def ever_held(self, offset: int, value: str) -> bool:
        return self.value_at(offset) == value or value in self.earlier.get(offset, ())

    def values(self, start: int, stop: int) -> list[str | None]:
        """The log's values at offsets [start, stop), None where it holds nothing."""
        base, log = self.base, self.log
        if start >= stop:
            return []
        if start >= base and stop <= base + len(log):
            return log[start - base:stop - base]
        below = min(max(0, base - start), stop - start)  # offsets before the log's first
        inside = log[max(0, start - base):max(0, stop - base)]
        return [None] * below + inside + [None] * (stop - start - below - len(inside))


Held = dict[PartitionKey, Appends]  # partition -> what the node ever held there

CommitSink = Callable[[PartitionKey, int, Appends, int, int], None]
"""Told of each commit: (partition, leader epoch, the leader's log, first offset, end offset)."""


def record_of(records: Held, key: PartitionKey) -> Appends:
    """The record of partition ``key``, begun on its first event."""
    found = records.get(key)
    if found is None:
        found = records[key] = Appends()
    return found


@dataclass
class FirstPass:
    """What one node ever appended, its broker id (None: it cannot be told), and the id its
    ``started`` events state (None: they state none)."""

    held: Held
    broker: int | None
    stated: int | None = None


Elected = dict[tuple[PartitionKey, int], int]  # (partition, leader epoch) -> the leader the controller chose


def elected_leaders(events: Mapping[str, Sequence[NodeEvent]]) -> Elected:
    """The leader each controller election chose, per partition and leader epoch, where every
    election of that epoch chose the same one (two that disagree tell nothing)."""
    chosen: dict[tuple[PartitionKey, int], int | None] = {}
    for node_events in events.values():
        for event in node_events:
            body = event.body
            if type(body) is LeaderElected and body.leader >= 0:
                slot = ((body.topic, body.partition), body.leader_epoch)
                if chosen.setdefault(slot, body.leader) != body.leader:
                    chosen[slot] = None
    return {slot: leader for slot, leader in chosen.items() if leader is not None}


def first_pass(node: str, events: list[NodeEvent], on_commit: CommitSink | None = None,
               elected: Elected | None = None) -> FirstPass:
    """Every value the node ever appended at each offset, and its broker id (see the module
    docstring for how the id is found); ``on_commit`` hears of every HW advance the node made
    as leader, while its record holds what its log held then (the last value appended at
    each offset: the HW covers only records the log has). ``elected``: the leaders the
    controller chose (see :func:`elected_leaders`), the first word on who a leader is."""
    held: Held = {}
    common: set[int] | None = None
    led_as: set[int] = set()  # the leaders the controller chose in the epochs this node led
    followed: set[int] = set()
    controller: int | None = None
    stated: int | None = None
    # partition -> (the epoch the node leads it in, its HW when it became leader): what lies
    # below that HW was committed before, in an earlier epoch
    leading: dict[PartitionKey, tuple[int, int]] = {}
    # partition -> the offset below which the node told of its commits since its log last
    # changed there: told once, each commit costs its own records, not the log's length
    told: dict[PartitionKey, int] = {}
    for event in events:
        body = event.body
        if type(body) is Appended:
            key = (body.topic, body.partition)
            record = held.get(key) or record_of(held, key)  # no call for the most frequent event
            if record.append(body.offset, body.values) and told.get(key, 0) > body.offset:
                told[key] = body.offset  # re-fetched over older records
        elif type(body) is HwChanged:
            if on_commit is not None and body.role == "leader" and body.high_watermark > body.previous:
                key = (body.topic, body.partition)
                lead = leading.get(key)
                if lead is not None and lead[0] == body.leader_epoch:
                    start = body.previous if body.previous > lead[1] else lead[1]
                    start = max(start, told.get(key, 0))
                    if start < body.high_watermark:
                        on_commit(key, body.leader_epoch, record_of(held, key), start, body.high_watermark)
                        told[key] = body.high_watermark
        elif type(body) is Truncated:
            key = (body.topic, body.partition)
            if told.get(key, 0) > body.to_offset:
                told[key] = body.to_offset
        elif type(body) is BecameLeader:
            common = set(body.isr) if common is None else common & set(body.isr)
            chosen = None if elected is None else elected.get(((body.topic, body.partition), body.leader_epoch))
            if chosen is not None:
                led_as.add(chosen)
            leading[(body.topic, body.partition)] = (body.leader_epoch, body.high_watermark)
        elif type(body) is BecameFollower:
            followed.add(body.leader)
            leading.pop((body.topic, body.partition), None)
        elif type(body) is ControllerElected:
            controller = body.broker
        elif type(body) is Started and body.broker is not None:
            stated = body.broker
    if stated is not None:
        return FirstPass(held, stated, stated)
    if led_as:  # the controller's word; several ids (or one this node followed) say it is none of them
        [chosen] = led_as if len(led_as) == 1 else [None]
        ok = chosen is not None and chosen not in followed and controller in (None, chosen)
        return FirstPass(held, chosen if ok else None)
    if controller is not None and controller not in followed and (common is None or controller in common):
        return FirstPass(held, controller)
    if common is None:
        return FirstPass(held, None)
    common -= followed
    if len(common) == 1:
        return FirstPass(held, next(iter(common)))
    digits = node[len(node.rstrip("0123456789")):]
    return FirstPass(held, int(digits) if digits and int(digits) in common else None)
