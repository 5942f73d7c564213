"""A simulated node's wall clock: virtual time plus a skew that clock faults set.

Real backends move a broker's wall clock with libfaketime, which leaves the monotonic clock
alone (faking it hangs Python's waits); so does the simulation. A node's monotonic clock is
always the loop's virtual time; its wall clock is the virtual epoch plus virtual time plus
the *skew* this clock computes. Three faults set the skew:

* an **offset** (a step, like NTP stepping the clock or ``"+30 x1"`` in libfaketime's
  file): from now on the wall clock reads real time plus the offset;
* a **rate** (``"x2"``): from now on the wall clock advances ``rate`` seconds per real
  second, starting from the reading it had at the change, so it does not jump then. A rate
  of 0 stops it;
* a **reset** (``"+0 x1"``): real time again, at real rate.

The clock belongs to the machine, not to the process: it keeps its skew across restarts, as
the libfaketime file outlives the broker process that reads it.
"""

from __future__ import annotations


class SimClock:
    __slots__ = ("offset", "rate", "since")

    def __init__(self) -> None:
        self.offset = 0.0  # the skew at ``since``
        self.rate = 1.0
        self.since = 0.0  # virtual time of the last change

    def skew(self, now: float) -> float:
        """Seconds the wall clock is ahead of real (virtual) time at virtual time ``now``."""
        if self.rate == 1.0:
            return self.offset
        return self.offset + (self.rate - 1.0) * (now - self.since)

    def set_offset(self, now: float, seconds: float) -> None:
        self.offset, self.rate, self.since = seconds, 1.0, now

    def set_rate(self, now: float, rate: float) -> None:
        if rate < 0:
            raise ValueError(f"a clock rate must not be negative, got {rate}")
        self.offset, self.rate, self.since = self.skew(now), rate, now

    def reset(self, now: float) -> None:
        self.set_offset(now, 0.0)
