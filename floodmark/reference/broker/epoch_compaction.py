"""When a broker rewrites its epoch checkpoint files: housekeeping kept off the path to leading.

Becoming leader appends the new leader epoch to one journal per log directory (group
committed, see :mod:`floodmark.reference.log.epoch_journal`); the per-partition checkpoint
files are brought up to date later, a step at a time, from the HW checkpoint loop. That
later work is one file written per partition plus a file-system sync per step: after a
failover of thousands of partitions it is a second or more of work on the broker's one
event loop. Run while a LeaderAndIsr is being applied, it delays the very leaders the
journal exists to make fast (measured: 0.2 s of a 1 s apply at 10,000 partitions).

So compaction waits until no LeaderAndIsr has been applied for ``quiet`` seconds, and a
compaction under way stops as soon as one arrives (the replica manager checks its state
change lock between steps). A broker whose roles change without pause would never compact
and its journal would only grow (replayed at every start): after ``longest_wait`` it
compacts anyway.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CompactionSchedule:
    """Whether the epoch journals may be compacted now (times from the runtime's monotonic clock)."""

    quiet: float = 1.0
    longest_wait: float = 30.0
    last_role_change: float = float("-inf")
    waiting_since: float | None = None

    def role_changes_applied(self, now: float) -> None:
        self.last_role_change = now

    def due(self, now: float) -> bool:
        """Compact now? Yes once roles have been still for ``quiet`` s, or after waiting
        ``longest_wait`` s for that."""
        if now - self.last_role_change >= self.quiet or (
                self.waiting_since is not None and now - self.waiting_since >= self.longest_wait):
            self.waiting_since = None
            return True
        if self.waiting_since is None:
            self.waiting_since = now
        return False
