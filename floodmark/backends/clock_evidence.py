"""Clock evidence: a clock fault proves itself in the broker's own event times.

Rewriting a broker's libfaketime file proves only that a file was written. Whether the broker
lives by it shows in what the broker itself says: every node event carries the node's wall
clock (``wall``), so an event written while the clock is moved carries the offset.

The harness cannot know when exactly the broker wrote a line, only between which two of its
own reads of the event file the line appeared. So each new event *bounds* the skew:

    wall - (our time at the read that found it)  <=  skew  <=  wall - (our time at the read before)

A fault took effect on a node when one of its events bounds a skew that holds the plan's
expected skew and not zero (so true time cannot explain it). The watch reads the file every
:data:`POLL` seconds for at most :data:`WATCH` seconds and stops as soon as each node has
shown its skew. A rate change starts without a jump, so it is watched when it is healed, after
it had time to drift; every clock fault is watched then, while it is still in force.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from floodmark.harness.cluster import Node
from floodmark.harness.faults import Evidence

POLL = 0.1  # seconds between reads of the event file
WATCH = 3.0  # seconds a node gets to write an event that shows its clock
TOLERANCE = 0.25  # seconds: rounding of ``wall`` and of our own clock reads

ExpectedSkew = Callable[[float], float]
"""The skew a node's clock should show at a given time of ours (time.time())."""


@dataclass(frozen=True)
class SkewBounds:
    """What one event says about its node's clock: the skew lies in [low, high]."""

    wall: float
    low: float
    high: float

    def holds(self, skew: float) -> bool:
        return self.low - TOLERANCE <= skew <= self.high + TOLERANCE

    def shows(self, expected: float, expected_later: float | None = None) -> bool:
        """True time cannot explain this event, and the expected skew can (a drifting clock's
        skew is expected somewhere between its values at the two reads)."""
        low, high = sorted((expected, expected if expected_later is None else expected_later))
        return self.low - TOLERANCE <= high and low <= self.high + TOLERANCE and not self.holds(0.0)


def bounds_of(walls: Sequence[float], read_before: float, read_at: float) -> list[SkewBounds]:
    """Each event's skew bounds, for events found at ``read_at`` and absent at ``read_before``."""
    return [SkewBounds(wall, round(wall - read_at, 3), round(wall - read_before, 3)) for wall in walls]


class EventTail:
    """The lines a node appends to its event file from now on, read through ``Node.exec``."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.path = node.events_path
        self.offset = self._size()

    def _size(self) -> int | None:
        if self.path is None:
            return None
        result = self.node.exec(["stat", "-c", "%s", self.path], timeout=5.0)
        return int(result.stdout.strip()) if result.ok and result.stdout.strip().isdigit() else 0

    def new_walls(self) -> list[float]:
        """The ``wall`` of every whole line appended since the last read."""
        if self.path is None or self.offset is None:
            return []
        result = self.node.exec(["tail", "-c", f"+{self.offset + 1}", self.path], timeout=5.0)
        text = result.stdout if result.ok else ""
        whole = text[:text.rfind("\n") + 1]
        self.offset += len(whole.encode())
        walls = []
        for line in whole.splitlines():
            try:
                wall = json.loads(line).get("wall")
            except (ValueError, AttributeError):
                continue  # not an event line: says nothing about the clock
            if isinstance(wall, int | float) and not isinstance(wall, bool):
                walls.append(float(wall))
        return walls


def watch_clocks(nodes: Sequence[tuple[Node, ExpectedSkew]], watch: float = WATCH,
                 poll: float = POLL, now: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> Evidence:
    """Read each node's new events until each shows its expected skew, or ``watch`` passes.

    The evidence names, per node, the skew expected, whether an event showed it, how many
    events were read, and the bounds of the event that showed it (or of the last one read)."""
    seen: dict[str, dict[str, Any]] = {}
    watched: list[tuple[str, EventTail, ExpectedSkew]] = []
    last_read: dict[str, float] = {}  # our time just before each node's last read began
    for node, expected in nodes:
        last_read[node.name] = now()
        seen[node.name] = {"expected": round(expected(now()), 3), "verified": False, "events": 0}
        if node.events_path is None:
            seen[node.name]["why"] = "the node writes no events"
        else:
            watched.append((node.name, EventTail(node), expected))
    deadline = now() + watch
    while watched and now() < deadline:
        sleep(poll)
        for name, tail, expected in list(watched):
            read_from = now()
            walls = tail.new_walls()
            read_at = now()
            report = seen[name]
            report["expected"] = round(expected(read_at), 3)
            report["events"] += len(walls)
            for bounds in bounds_of(walls, last_read[name], read_at):
                report["skew_between"] = [bounds.low, bounds.high]
                if bounds.shows(expected(last_read[name]), expected(read_at)):
                    report["verified"] = True
                    watched.remove((name, tail, expected))
                    break
            last_read[name] = read_from
    return {"clock_seen": seen}
