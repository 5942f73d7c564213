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

The commits come from the leaders' own events (``hw_changed`` as leader, over their own
rebuilt logs), the leaderships from ``became_leader`` with the new leader's log as it stood
then. A log changes below that point only when its broker later truncates or re-fetches as a
follower, so it is copied only then; a leader's log is otherwise read at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.checkers.permitted import LossPermissions
from floodmark.checkers.replica_logs import Appends
from floodmark.node_events import PartitionKey
from floodmark.results import Anomaly


@dataclass
class Commit:
    """Records one leader committed in one epoch, offsets ``start`` on (HW advances of the
    same leader in the same epoch are contiguous, so they join into one)."""

    node: str
    epoch: int
    start: int
    values: list[str | None]
    witness: tuple[str, int]  # the first hw_changed event of it

    @property
    def stop(self) -> int:
        return self.start + len(self.values)


@dataclass
class Leadership:
    """A broker became leader of a partition in an epoch, with this log."""

    node: str
    key: PartitionKey
    epoch: int
    length: int  # its log end offset then
    witness: tuple[str, int]
    log: Appends  # its log; only [.., length) counts, and only until ``frozen`` is set
    frozen: tuple[int, list[str | None]] | None = None  # (base, values) copied before the log changed

    def values(self, start: int, stop: int) -> list[str | None]:
        """What the leader held at offsets [start, stop) when it became leader."""
        stop = min(stop, self.length)
        if start >= stop:
            return []
        if self.frozen is None:
            return self.log.values(start, stop)
        base, values = self.frozen
        return [values[o - base] if 0 <= o - base < len(values) else None for o in range(start, stop)]


class CommittedPrefix:
    """Commits and leaderships gathered while each node's events are replayed, judged once
    every node's are in (see the module docstring)."""

    def __init__(self) -> None:
        self.commits: dict[PartitionKey, list[Commit]] = {}
        self.leaderships: list[Leadership] = []
        self._open: dict[tuple[str, PartitionKey], list[Leadership]] = {}  # whose logs still count

    def commit(self, node: str, key: PartitionKey, epoch: int, log: Appends, start: int, stop: int,
               witness: tuple[str, int]) -> None:
        """``node``, leading ``key`` in ``epoch``, moved its HW from ``start`` to ``stop``."""
        if stop <= start:
            return
        commits = self.commits.setdefault(key, [])
        last = commits[-1] if commits else None
        if last is not None and (last.node, last.epoch, last.stop) == (node, epoch, start):
            last.values.extend(log.values(start, stop))
        else:
            commits.append(Commit(node, epoch, start, log.values(start, stop), witness))

    def lead(self, node: str, key: PartitionKey, epoch: int, log: Appends, witness: tuple[str, int]) -> None:
        leadership = Leadership(node, key, epoch, log.end, witness, log)
        self.leaderships.append(leadership)
        self._open.setdefault((node, key), []).append(leadership)

    def before_change(self, node: str, key: PartitionKey, log: Appends, offset: int) -> None:
        """``node``'s log of ``key`` is about to change from ``offset`` on: keep what its
        leaderships held."""
        open_ones = self._open.get((node, key))
        if not open_ones:
            return
        keep = []
        for leadership in open_ones:
            if leadership.length > offset:
                leadership.frozen = (log.base, log.log[:leadership.length - log.base])
            else:
                keep.append(leadership)
        self._open[(node, key)] = keep

    def anomalies(self, permissions: LossPermissions) -> list[Anomaly]:
        found = []
        for leadership in self.leaderships:
            missing: list[int] = []
            sources: list[Commit] = []
            for commit in self.commits.get(leadership.key, ()):
                if commit.epoch >= leadership.epoch:
                    continue
                held = leadership.values(commit.start, commit.stop)
                if held == commit.values:
                    continue
                lacking = [commit.start + i for i, value in enumerate(commit.values)
                           if value is not None and (i >= len(held) or held[i] != value)]
                if lacking:
                    missing.extend(lacking)
                    sources.append(commit)
            if missing:
                found.append(_lacks(leadership, sorted(set(missing)), sources, permissions))
        return found


def _lacks(leadership: Leadership, missing: list[int], sources: list[Commit],
           permissions: LossPermissions) -> Anomaly:
    topic, partition = leadership.key
    shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
    first = sources[0]
    return Anomaly(
        "leader-lacks-committed",
        f"{leadership.node} became leader of {topic}/{partition} in leader epoch {leadership.epoch} without "
        f"{len(missing)} record(s) committed in earlier epochs (offsets {shown}; {first.node} committed "
        f"them in epoch {first.epoch}).",
        topic, partition, tuple(missing[:100]),
        events=tuple(sorted({leadership.witness, *(c.witness for c in sources)})),
        details={"node": leadership.node, "leader_epoch": leadership.epoch, "log_end": leadership.length,
                 "committed_in": sorted({c.epoch for c in sources}),
                 **permissions.details(topic, partition, committed=True)})
