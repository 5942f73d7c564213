"""Clock faults: the broker's wall clock moves by exactly the offset recorded, and back."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_fixtures import BACKENDS, FakeCluster, FakeView, ask, standin_cluster

from floodmark.backends.faketime import NO_SKEW, broker_environment, clock_spec, libfaketime_library
from floodmark.nemesis.base import NemesisContext
from floodmark.nemesis.clock import MAX_BUMP, ClockNemesis

CTX = NemesisContext(view=FakeView())


def skew(node) -> float:  # type: ignore[no-untyped-def]
    """The node's wall clock minus ours (the answer's transit time is well under 50 ms)."""
    answer = ask(node.address)
    assert answer is not None, f"{node.name} did not answer"
    return answer[0] - time.time()


def test_spec_format_is_what_libfaketime_reads() -> None:
    assert clock_spec(12.5) == "+12.500 x1"
    assert clock_spec(-3, 2.0) == "-3.000 x2"
    assert NO_SKEW == "+0 x1"


def test_bumps_write_the_recorded_offsets_and_stop_resets_them() -> None:
    cluster = FakeCluster(5)
    nemesis = ClockNemesis()
    action = nemesis.start(random.Random(8), cluster, CTX, "bump-backward")
    assert action["nodes"]
    for name, clock in action["clocks"].items():
        assert -MAX_BUMP <= clock["offset"] <= -1.0
        assert cluster.node(name).files["/etc/floodmark/faketime"] == clock["spec"] + "\n"
    untouched = [b for b in cluster.brokers if b.name not in action["nodes"]]
    assert all(not b.files for b in untouched)
    reset = nemesis.stop(cluster, CTX)
    assert set(reset["reset"]) == set(action["nodes"])
    assert all(cluster.node(n).files["/etc/floodmark/faketime"] == "+0.000 x1\n" for n in action["nodes"])


def test_a_process_under_libfaketime_follows_the_timestamp_file(tmp_path: Path) -> None:
    clock_file = tmp_path / "faketime"
    clock_file.write_text(NO_SKEW + "\n")
    script = ("import sys, time\n"
              "for line in sys.stdin:\n"
              "    print(time.time(), flush=True)\n")
    env = broker_environment(str(clock_file), libfaketime_library())
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdin and child.stdout

    def child_skew() -> float:
        child.stdin.write("\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        return float(child.stdout.readline()) - time.time()  # type: ignore[union-attr]

    try:
        assert abs(child_skew()) < 0.5
        clock_file.write_text(clock_spec(-120.0) + "\n")
        assert abs(child_skew() + 120.0) < 0.5
        clock_file.write_text(clock_spec(0.0) + "\n")
        assert abs(child_skew()) < 0.5
    finally:
        child.kill()
        child.wait()


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request):  # type: ignore[no-untyped-def]
    with standin_cluster(request.param) as running:
        yield running


def test_bump_moves_each_chosen_broker_by_its_recorded_offset(cluster) -> None:  # type: ignore[no-untyped-def]
    nemesis = ClockNemesis()
    action = nemesis.start(random.Random(5), cluster, CTX, "bump-forward")
    try:
        for broker in cluster.brokers:
            expected = action["clocks"].get(broker.name, {"offset": 0.0})["offset"]
            assert abs(skew(broker) - expected) < 0.5, f"{broker.name}: expected {expected}"
    finally:
        nemesis.stop(cluster, CTX)
    for broker in cluster.brokers:
        assert abs(skew(broker)) < 0.5


def test_rate_change_is_continuous_and_runs_at_the_new_rate(cluster) -> None:  # type: ignore[no-untyped-def]
    nemesis = ClockNemesis()
    action = nemesis.start(random.Random(1), cluster, CTX, "rate")
    try:
        name, clock = next(iter(action["clocks"].items()))
        node = cluster.node(name)
        first, t0 = ask(node.address), time.time()
        assert first is not None and abs(first[0] - t0) < 0.5, "the clock jumped at the change"
        time.sleep(2.0)
        second, t1 = ask(node.address), time.time()
        assert second is not None
        rate = (second[0] - first[0]) / (t1 - t0)
        assert abs(rate - clock["rate"]) < 0.15 * clock["rate"] + 0.05, (rate, clock)
    finally:
        nemesis.stop(cluster, CTX)
    assert abs(skew(node)) < 0.5


def test_strobe_flips_between_the_two_recorded_offsets(cluster) -> None:  # type: ignore[no-untyped-def]
    nemesis = ClockNemesis(strobe_period=(0.1, 0.1))
    action = nemesis.start(random.Random(3), cluster, CTX, "strobe")
    name, clock = next(iter(action["clocks"].items()))
    try:
        seen = []
        for _ in range(30):
            seen.append(skew(cluster.node(name)))
            time.sleep(0.04)
    finally:
        nemesis.stop(cluster, CTX)
    delta = clock["strobe"][1]
    assert any(abs(s) < 0.5 for s in seen) and any(abs(s - delta) < 0.5 for s in seen), seen
    assert abs(skew(cluster.node(name))) < 0.5
