"""A clock fault proves itself in the broker's own event times (``backends.clock_evidence``).

The watch reads a node's event file through ``Node.exec`` (``stat`` for its size, ``tail -c``
for what was appended), so these tests give it a node whose file grows on a fake clock.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from floodmark.backends.clock_evidence import SkewBounds, bounds_of, watch_clocks
from floodmark.backends.node_faults import drifted_skew
from floodmark.harness.cluster import ExecResult


class FakeTime:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class GrowingEventsNode:
    """A broker whose event file gains one line per read, stamped ``skew`` seconds off."""

    def __init__(self, name: str, clock: FakeTime, skew: float, writes: bool = True,
                 events_path: str | None = "/events.jsonl", junk: str = "") -> None:
        self.name, self.clock, self.skew, self.writes, self.junk = name, clock, skew, writes, junk
        self.events_path = events_path
        self.content = '{"node": "n1", "seq": 0, "wall": 1.0, "kind": "started"}\n'

    def exec(self, argv, user=None, timeout=30.0):  # type: ignore[no-untyped-def]
        if argv[0] == "stat":
            return ExecResult(0, f"{len(self.content.encode())}\n", "")
        assert argv[:2] == ["tail", "-c"], argv
        start = int(argv[2].lstrip("+")) - 1
        if self.writes:  # written just now, half a line still being written
            line = json.dumps({"node": self.name, "seq": 1, "wall": self.clock.now + self.skew, "kind": "x"})
            self.content += self.junk + line + "\n" + '{"node": "n1", "se'
        text = self.content.encode()[start:].decode()
        self.content = self.content[:self.content.rfind("\n") + 1]  # the half line completes later
        return ExecResult(0, text, "")


def watch(*nodes: tuple[GrowingEventsNode, float], clock: FakeTime) -> dict:  # type: ignore[type-arg]
    evidence = watch_clocks([(node, lambda _now, s=expected: s) for node, expected in nodes],
                            watch=1.0, poll=0.1, now=clock.time, sleep=clock.sleep)
    return evidence["clock_seen"]  # type: ignore[no-any-return]


def test_an_event_stamped_with_the_moved_clock_verifies_the_fault() -> None:
    clock = FakeTime()
    seen = watch((GrowingEventsNode("n1", clock, 42.0), 42.0), clock=clock)
    assert seen["n1"]["verified"] is True
    low, high = seen["n1"]["skew_between"]
    assert low <= 42.0 <= high
    assert seen["n1"]["events"] == 1, "the watch stops once the node has shown its skew"


def test_events_at_true_time_do_not_verify_a_skew() -> None:
    clock = FakeTime()
    seen = watch((GrowingEventsNode("n1", clock, 0.0), 30.0), clock=clock)
    assert seen["n1"]["verified"] is False
    assert seen["n1"]["events"] >= 5, "it kept reading for the whole watch"
    assert clock.now >= 1_000_001.0


def test_a_node_that_writes_nothing_is_not_verified() -> None:
    clock = FakeTime()
    seen = watch((GrowingEventsNode("n1", clock, 30.0, writes=False), 30.0), clock=clock)
    assert seen["n1"] == {"expected": 30.0, "verified": False, "events": 0}


def test_a_node_without_events_says_so() -> None:
    clock = FakeTime()
    seen = watch((GrowingEventsNode("zk", clock, 30.0, events_path=None), 30.0), clock=clock)
    assert seen["zk"]["verified"] is False and "no events" in seen["zk"]["why"]


def test_each_node_is_judged_on_its_own_events() -> None:
    clock = FakeTime()
    seen = watch((GrowingEventsNode("n1", clock, -12.0), -12.0),
                 (GrowingEventsNode("n2", clock, 0.0), 7.0), clock=clock)
    assert seen["n1"]["verified"] is True and seen["n2"]["verified"] is False


def test_lines_that_are_not_events_are_skipped() -> None:
    clock = FakeTime()
    node = GrowingEventsNode("n1", clock, 5.0, junk='not json\n[1, 2]\n{"wall": true}\n')
    seen = watch((node, 5.0), clock=clock)
    assert seen["n1"]["verified"] is True and seen["n1"]["events"] == 1


def test_a_rate_change_is_expected_to_have_drifted_by_heal_time() -> None:
    assert drifted_skew(0.0, 2.0, 100.0, 110.0) == 10.0
    assert drifted_skew(0.0, 0.25, 100.0, 104.0) == -3.0
    assert drifted_skew(-5.0, 1.0, 100.0, 200.0) == -5.0


@given(skew=st.floats(-300, 300), written_after=st.floats(0, 1), window=st.floats(0.001, 1))
def test_bounds_always_hold_the_true_skew(skew: float, written_after: float, window: float) -> None:
    """Whenever in the window between two reads the line was written, its bounds hold the skew."""
    read_before = 5000.0
    read_at = read_before + window
    written = read_before + written_after * window
    (bounds,) = bounds_of([written + skew], read_before, read_at)
    assert bounds.holds(skew)


def test_a_skew_within_the_tolerance_of_zero_shows_nothing() -> None:
    assert not SkewBounds(0.0, -0.1, 0.1).shows(0.1)
    assert SkewBounds(0.0, 1.9, 2.05).shows(2.0)


def test_a_drifting_clock_is_expected_anywhere_between_its_values_at_the_two_reads() -> None:
    # Written early in a long window, the event shows less drift than the second read expects.
    assert SkewBounds(0.0, 4.0, 4.6).shows(4.5, 6.0)
    assert not SkewBounds(0.0, 4.0, 4.6).shows(6.0)
    assert not SkewBounds(0.0, -0.2, 0.3).shows(-1.0, 1.0), "zero explains it"
