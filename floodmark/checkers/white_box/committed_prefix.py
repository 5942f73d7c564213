"""The committed prefix is a prefix of every later leader's log.

A leader that moves its HW past an offset commits the record it holds there: the whole ISR
has it, and the partition promises it for ever. Leader epochs are decided one after another,
so a leader of a later epoch comes after that commit in the partition's history, whatever the
nodes' clocks say, and must hold every record committed in an earlier epoch, at the same
offset, with the same value, from the moment it becomes leader: it is where every follower
truncates to and fetches from. One that does not (a follower that truncated committed records
away and was elected, KIP-101's story; a replica emptied by a power loss and elected over one
that kept them) has un-committed them, whether or not any client saw them yet. The black-box
checkers see such a loss only if a client read the record before; this sees the exercise
itself.

``leader-lacks-committed`` names the new leader, the epoch, and the committed offsets its log
did not hold (or held with another value) when it became leader. What the configuration
permits (see :mod:`.permitted`) is marked ``permitted_by``.

How, in time linear in the events: a first pass over every node notes, per partition and
offset, the value first committed there and the epoch it was committed in (a leader's
``hw_changed`` over the value its log held there then: the last one appended at that offset,
since the HW only covers records the log has). A second pass replays each node's log in its
own order; when the node becomes leader in epoch *E*, the offsets committed before *E* form a
prefix (offsets are committed in epoch order, up to a deposed leader still committing for a
moment, which is handled apart), and only what the node's log has not been found to match
since it last changed is compared.

``replica-diverges-below-hw`` holds every replica to the same facts from its own side: a
replica's HW says which of its records are committed (a follower's is its leader's, capped at
its own log end), so whenever a node's ``hw_changed`` says its HW is *h*, every record its
log holds below *h* must be the record committed at that offset. A follower that truncated
to the wrong point on a diverging-epoch answer (or an epoch lookup, or a restart's recovery),
kept a divergent record and fetched on past it holds, below its HW, a record that was never
committed there. StrongIsr, which asks whether a member *ever* held the committed record
when its leader commits, sees that too while the follower is in the ISR (the mutation runs
of 2026-11-27 found it always did); only this check sees a follower that held the committed
record and later holds another. Compared are the node's own log, replayed in its
own order, and the commits, which need no order: nothing of two nodes is ordered by time.
A restart's HW checkpoint (behind, or lost) is no statement: the HW is stated by the next
``hw_changed``, and the log is then what the restart recovered (see the invariants
checker's replay). A ``became_leader``'s HW is the committed prefix's concern. What the
configuration permits is marked ``permitted_by`` as for ``leader-lacks-committed``.
"""

from __future__ import annotations

import bisect
import itertools

from floodmark.checkers.permitted import LossPermissions
from floodmark.checkers.white_box.replica_logs import MAX_GAP, Appends, ImplausibleOffset
from floodmark.contracts.node_events import HwChanged, NodeEvent, PartitionKey
from floodmark.contracts.results import Anomaly


class Committed:
    """What was committed at each offset of one partition, first: its value and epoch. Kept
    from the first offset committed (offsets come from events: a log that starts high costs
    nothing below it)."""

    __slots__ = ("base", "values", "epochs", "_reach", "_late", "_padded")

    def __init__(self) -> None:
        self._padded = 0  # offsets never committed between ones that were, so far
        self.base = 0
        self.values: list[str | None] = []  # None: never committed (or not known)
        self.epochs: list[int] = []
        self._reach: list[int] = []  # the greatest epoch committed at or below each offset
        self._late: list[tuple[int, int]] = []  # (offset, epoch) committed in an epoch below its reach

    def note(self, start: int, values: list[str | None], epoch: int) -> None:
        """``values`` were committed at offsets ``start``.. in ``epoch`` (each kept where it is
        the first commit there)."""
        if not self.values:
            self.base = start
        elif start < self.base:  # below the first offset seen: grow downwards (rare)
            pad = self.base - start
            self._pad(pad)
            self.values[:0] = [None] * pad
            self.epochs[:0] = [0] * pad
            self.base = start
        mine, epochs = self.values, self.epochs
        i = start - self.base
        overlap = max(0, min(len(mine) - i, len(values)))
        # Nearly always every offset of the overlap holds an earlier epoch's commit already.
        if overlap and (None in mine[i:i + overlap] or max(epochs[i:i + overlap]) > epoch):
            self._keep_first(i, values, overlap, epoch)
        if overlap < len(values):  # beyond what is known: appended as a whole
            gap = i + overlap - len(mine)
            if gap > 0:
                self._pad(gap)
                mine.extend(itertools.repeat(None, gap))
                epochs.extend(itertools.repeat(0, gap))
            mine.extend(values[overlap:])
            epochs.extend(itertools.repeat(epoch, len(values) - overlap))

    def _pad(self, count: int) -> None:
        self._padded += count
        if self._padded > MAX_GAP:
            raise ImplausibleOffset(f"commits leave gaps of {self._padded} offsets in all")

    def _keep_first(self, i: int, values: list[str | None], count: int, epoch: int) -> None:
        mine, epochs = self.values, self.epochs
        for j in range(count):
            value = values[j]
            if value is not None and (mine[i + j] is None or epoch < epochs[i + j]):
                mine[i + j] = value
                epochs[i + j] = epoch

    def value_at(self, offset: int) -> str | None:
        i = offset - self.base
        return self.values[i] if 0 <= i < len(self.values) else None

    def seal(self) -> None:
        """Every commit is in: work out the prefix committed before each epoch."""
        reach, late, top = [], [], -1
        for i, (value, epoch) in enumerate(zip(self.values, self.epochs)):
            if value is not None:
                if epoch < top:
                    late.append((self.base + i, epoch))
                top = max(top, epoch)
            reach.append(top)
        self._reach, self._late = reach, late

    def before(self, epoch: int) -> tuple[int, list[int]]:
        """The offsets committed before ``epoch``: every committed one below the returned
        bound, and the listed ones above it (a deposed leader's late commits)."""
        bound = self.base + bisect.bisect_left(self._reach, epoch)
        return bound, [o for o, e in self._late if o >= bound and e < epoch]

    def values_between(self, start: int, stop: int) -> list[str | None]:
        """The committed values at offsets [start, stop), None where none was."""
        base = self.base
        if start >= base:
            return self.values[start - base:stop - base]
        return [None] * min(base - start, stop - start) + self.values[:max(0, stop - base)]


class Commits:
    """Every partition's :class:`Committed`, filled by the first pass (a ``CommitSink``)."""

    def __init__(self) -> None:
        self.partitions: dict[PartitionKey, Committed] = {}

    def __call__(self, key: PartitionKey, epoch: int, log: Appends, start: int, stop: int) -> None:
        base = log.base
        end = base + len(log.log)
        if start < base:
            start = base
        if stop > end:
            stop = end  # the HW covers what the log has
        if start >= stop:
            return
        committed = self.partitions.get(key)
        if committed is None:
            committed = self.partitions[key] = Committed()
        committed.note(start, log.log[start - base:stop - base], epoch)

    def seal(self) -> None:
        for committed in self.partitions.values():
            committed.seal()


class LeaderCheck:
    """The check of one node's leaderships against what was committed before each."""

    def __init__(self, node: str, committed: dict[PartitionKey, Committed]) -> None:
        self.node = node
        self.committed = committed
        self._matched: dict[PartitionKey, int] = {}  # the log matches every commit below this

    def changed(self, key: PartitionKey, offset: int) -> None:
        """The node's log of ``key`` changes from ``offset`` on."""
        if self._matched.get(key, 0) > offset:
            self._matched[key] = offset

    def lead(self, key: PartitionKey, epoch: int, log: Appends, witness: tuple[str, int],
             permissions: LossPermissions) -> Anomaly | None:
        """The node became leader of ``key`` in ``epoch`` with ``log``: does it hold every
        record committed in an earlier epoch?"""
        committed = self.committed.get(key)
        if committed is None:
            return None
        bound, late = committed.before(epoch)
        start = max(self._matched.get(key, 0), committed.base)  # nothing was committed below its base
        missing: list[int] = []
        if start < bound:
            held, wanted = log.values(start, bound), committed.values_between(start, bound)
            if held != wanted:
                missing = [o for o, h, w in zip(itertools.count(start), held, wanted) if w is not None and h != w]
        missing.extend(o for o in late if log.value_at(o) != committed.value_at(o))
        self._matched[key] = missing[0] if missing else max(start, bound)
        if not missing:
            return None
        return _lacks(self.node, key, epoch, log.end, witness, missing, committed, permissions)


class BelowHwCheck:
    """The check of one node's logs below each HW its own events state (see the module
    docstring): below its HW a replica holds only committed records, so every record its log
    holds there is the one committed at that offset."""

    def __init__(self, node: str, committed: dict[PartitionKey, Committed], permissions: LossPermissions) -> None:
        self.node = node
        self.committed = committed
        self.permissions = permissions
        self.checked = 0  # offsets compared, for the stats
        # partition -> the log holds the committed record (or none) at every offset below this
        self._matched: dict[PartitionKey, int] = {}

    def changed(self, key: PartitionKey, offset: int) -> None:
        """The node's log of ``key`` changes from ``offset`` on."""
        if self._matched.get(key, 0) > offset:
            self._matched[key] = offset

    def high_watermark(self, event: NodeEvent, stated: HwChanged, log: Appends) -> Anomaly | None:
        """The node's ``event`` says its HW is ``stated.high_watermark`` while its log of the
        partition is ``log``: does the log hold, below it, a record other than the one
        committed there? Only offsets where both the log and the commits hold a record are
        compared: a log may lack records below a HW it restarted with (a power loss), and
        offsets whose commit no leader's events record cannot be judged."""
        key, hw = (stated.topic, stated.partition), stated.high_watermark
        matched = self._matched.get(key, 0)
        # Offsets the log gains later come by appends at its end, which no ``changed`` tells
        # of: what is found matched stops at the log end (commits are all known already).
        stop = hw if hw < log.end else log.end
        committed = self.committed.get(key)
        if committed is None or stop <= matched:
            return None
        self._matched[key] = stop
        start = max(matched, log.base, committed.base)
        stop = min(stop, committed.base + len(committed.values))
        if start >= stop:
            return None
        self.checked += stop - start
        held = log.log[start - log.base:stop - log.base]
        wanted = committed.values[start - committed.base:stop - committed.base]
        if held == wanted:
            return None  # nearly always: the records it fetched are the ones committed
        differ = [o for o, h, w in zip(itertools.count(start), held, wanted) if h is not None and w is not None and h != w]
        if not differ:
            return None
        return _diverges(self.node, event, stated, differ, log, committed, self.permissions)


def _diverges(node: str, event: NodeEvent, stated: HwChanged, differ: list[int], log: Appends, committed: Committed,
              permissions: LossPermissions) -> Anomaly:
    topic, partition, hw = stated.topic, stated.partition, stated.high_watermark
    shown = ", ".join(f"{o} ({log.value_at(o)!r}, not {committed.value_at(o)!r})" for o in differ[:5])
    epochs = sorted({committed.epochs[o - committed.base] for o in differ})
    return Anomaly(
        "replica-diverges-below-hw",
        f"{node} says its HW of {topic}/{partition} is {hw}, but its log holds {len(differ)} record(s) below it "
        f"other than the ones committed there (offset (held, not committed): {shown}"
        f"{' ...' if len(differ) > 5 else ''}; committed in epoch{'s' if len(epochs) > 1 else ''} "
        f"{', '.join(map(str, epochs))}).",
        topic, partition, tuple(differ[:100]), events=((event.node, event.seq),),
        details={"node": node, "high_watermark": hw, "role": stated.role, "leader_epoch": stated.leader_epoch,
                 "committed_in": epochs,
                 "holds": {str(o): log.value_at(o) for o in differ[:100]},
                 "committed": {str(o): committed.value_at(o) for o in differ[:100]},
                 **permissions.details(topic, partition, committed=True)})


def _lacks(node: str, key: PartitionKey, epoch: int, log_end: int, witness: tuple[str, int], missing: list[int],
           committed: Committed, permissions: LossPermissions) -> Anomaly:
    topic, partition = key
    missing.sort()
    shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
    epochs = sorted({committed.epochs[o - committed.base] for o in missing})
    return Anomaly(
        "leader-lacks-committed",
        f"{node} became leader of {topic}/{partition} in leader epoch {epoch} without {len(missing)} record(s) "
        f"committed in earlier epochs (offsets {shown}; committed in epoch{'s' if len(epochs) > 1 else ''} "
        f"{', '.join(map(str, epochs))}).",
        topic, partition, tuple(missing[:100]), events=(witness,),
        details={"node": node, "leader_epoch": epoch, "log_end": log_end, "committed_in": epochs,
                 **permissions.details(topic, partition, committed=True)})
