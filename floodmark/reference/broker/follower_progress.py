"""Follower progress: what a leader knows about each follower, and when it counts as in sync.

A leader learns a follower's log end only from its fetches: a fetch at offset ``o`` says
"I have everything below ``o``". From that the leader derives two things:

* the high watermark, the minimum log end over the ISR (see :mod:`partition`);
* whether the follower is *caught up*. As in Kafka, a follower is caught up at the time of a
  fetch that reached the leader's log end; if it only reached the log end the leader had at
  the follower's *previous* fetch, it was caught up at that previous fetch. A follower whose
  last caught-up time is older than ``replica.lag.time.max`` leaves the ISR.

Times here are the leader's wall clock (Kafka uses wall time), so a clock jump on the leader
can push a healthy follower out of the ISR: clock faults have real effects, as they do in
Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass
class FollowerProgress:
    broker_id: int
    log_end: int = UNKNOWN_OFFSET  # unknown until its first fetch in this leader epoch
    last_caught_up_wall: float = 0.0
    last_fetch_wall: float = 0.0
    leader_log_end_at_last_fetch: int = UNKNOWN_OFFSET
    incarnation: int = 0  # the follower's broker incarnation seen in its fetches

    def record_fetch(self, fetch_offset: int, leader_log_end: int, wall: float) -> None:
        """Update from one fetch at ``fetch_offset`` while the leader's log ends at ``leader_log_end``."""
        if fetch_offset >= leader_log_end:
            self.last_caught_up_wall = max(self.last_caught_up_wall, wall)
        elif fetch_offset >= self.leader_log_end_at_last_fetch >= 0:
            self.last_caught_up_wall = max(self.last_caught_up_wall, self.last_fetch_wall)
        self.log_end = fetch_offset
        self.leader_log_end_at_last_fetch = leader_log_end
        self.last_fetch_wall = wall

    def is_lagging(self, now_wall: float, leader_log_end: int, lag_time_max: float,
                   lag_max_records: int) -> bool:
        """Out of sync: not caught up for too long, or too many records behind."""
        if now_wall - self.last_caught_up_wall > lag_time_max:
            return True
        known_end = max(self.log_end, 0)
        return leader_log_end - known_end > lag_max_records
