"""Tests for floodmark.run.assemble: which parts a configuration asks for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.backends.local import LocalCluster
from floodmark.backends.real import RealBackend
from floodmark.backends.sim import SimBackend
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import ALL_KINDS, TestConfig
from floodmark.harness.schedule import Fault, Schedule
from floodmark.nemesis.compose import Composite
from floodmark.run.assemble import broker_args, make_backend, refusals


def test_broker_args_carry_the_durability_and_session_settings() -> None:
    args = broker_args(TestConfig(min_insync_replicas=1, replication_factor=2, zk_session_timeout=4.5))
    assert args == ("--zk-session-timeout", "4.5", "--min-insync-replicas", "1",
                    "--inter-broker-protocol", "heartbeats")


def test_broker_args_carry_the_run_s_id_once_it_has_one() -> None:
    """Docker and local brokers learn their run from the command line (``--run-id``), the
    simulator's from their configuration; a test's own has none until the runner gives it."""
    args = broker_args(TestConfig(run_id="0eb44760cb914ca5"))
    assert args[-2:] == ("--run-id", "0eb44760cb914ca5")
    assert "--run-id" not in broker_args(TestConfig())
    sim = make_backend(TestConfig(cluster="sim", run_id="0eb44760cb914ca5"), ClusterSpec(brokers=3))
    assert isinstance(sim, SimBackend)
    assert {node.config.run_id for node in sim.cluster.broker_nodes} == {"0eb44760cb914ca5"}
    sim.force_cleanup()


def test_backend_by_name() -> None:
    spec = ClusterSpec(brokers=3, run_id="abc123")
    local = make_backend(TestConfig(cluster="local"), spec)
    assert isinstance(local, RealBackend) and isinstance(local.cluster, LocalCluster)
    sim = make_backend(TestConfig(cluster="sim"), spec)
    assert isinstance(sim, SimBackend) and [n.name for n in sim.cluster.nodes] == ["zk", "n1", "n2", "n3"]
    sim.force_cleanup()
    with pytest.raises(ValueError, match="unknown cluster backend"):
        make_backend(TestConfig().replace(cluster="k8s"), spec)


def test_a_backend_refuses_faults_it_cannot_apply_naming_fault_and_backend() -> None:
    schedule = Schedule((Fault(0, "kill", "leader", 1.0, 2.0, 1), Fault(1, "power", "random", 4.0, 2.0, 2),
                         Fault(2, "partition", "moat", 7.0, 2.0, 3)), 10.0)
    nemeses = Composite(ALL_KINDS)
    problems = refusals("docker", schedule, nemeses)
    assert len(problems) == 2
    assert problems[0].startswith("fault 1 (power:random): the docker backend refuses it")
    assert "unknown shape" in problems[1]
    assert refusals("sim", schedule, nemeses) == [problems[1]]
    assert "has no kill nemesis" in refusals("sim", schedule, Composite(["power", "partition"]))[0]


def test_a_pause_must_last_what_its_shape_says_against_the_session_timeout() -> None:
    schedule = Schedule((Fault(0, "pause", "leader-long", 1.0, 6.0, 1), Fault(1, "pause", "random-short", 8.0, 6.0, 2),
                         Fault(2, "pause", "controller-long", 15.0, 6.5, 3),
                         Fault(3, "pause", "leader-short", 25.0, 5.9, 4)), 40.0)
    nemeses = Composite(["pause"])
    assert refusals("sim", schedule, nemeses, 3, 6.0) == [
        "fault 0 (pause:leader-long): a long pause must outlast the 6 s ZooKeeper session timeout; it lasts 6 s "
        "(use a -short shape)",
        "fault 1 (pause:random-short): a short pause must end within the 6 s ZooKeeper session timeout; it lasts "
        "6 s (use a -long shape)"]
    assert [problem.partition(":")[0] for problem in refusals("sim", schedule, nemeses, 3, 5.0)] == [
        "fault 1 (pause", "fault 3 (pause"]
    assert refusals("sim", schedule, nemeses, 3) == []  # no session timeout given: any length


def test_a_pause_the_time_limit_cuts_short_must_still_be_what_its_shape_says() -> None:
    """The final heal-all ends every fault at the time limit: a long pause written to last
    7 s from 1 s into a 3 s test lasted 2 s, the session outlived it, and the run went on to
    a verdict with only the fault coverage saying the pause was not what it claimed."""
    schedule = Schedule((Fault(0, "pause", "leader-long", 1.0, 7.0, 1), Fault(1, "pause", "random-short", 1.0, 2.0, 2),
                         Fault(2, "pause", "controller-long", 2.0, 7.0, 3)), 10.0)
    nemeses = Composite(["pause"])
    assert refusals("sim", schedule, nemeses, 3, 6.0, 3.0) == [
        "fault 0 (pause:leader-long): the test's time limit of 3 s ends it 2 s after it starts: a long pause must "
        "outlast the 6 s ZooKeeper session timeout; it lasts 2 s (use a -short shape)",
        "fault 2 (pause:controller-long): the test's time limit of 3 s ends it 1 s after it starts: a long pause "
        "must outlast the 6 s ZooKeeper session timeout; it lasts 1 s (use a -short shape)"]
    assert refusals("sim", schedule, nemeses, 3, 6.0, 8.5) == []  # cut to 7.5 s and 6.5 s: still long
    assert refusals("sim", schedule, nemeses, 3, 6.0) == []  # no time limit given: as written


def test_a_real_backend_refuses_clock_faults_that_overlap_and_the_simulator_stacks_them() -> None:
    """A real node's clock file holds one skew: the first of two overlapping clock faults to
    heal set the clock back to true time while the other was still in force, with its
    account saying it ran as written."""
    schedule = Schedule((Fault(0, "clock", "bump-forward", 1.0, 5.0, 1), Fault(1, "clock", "strobe", 3.0, 2.0, 2),
                         Fault(2, "clock", "bump-forward", 6.0, 2.0, 3)), 10.0)
    nemeses = Composite(["clock"])
    assert refusals("docker", schedule, nemeses) == [
        "fault 1 (clock:strobe): the docker backend refuses it: it starts while clock fault 0 is still in force, "
        "and a real node's clock holds one fault at a time (only --cluster sim stacks them)"]
    assert refusals("local", schedule, nemeses)[0].startswith("fault 1 (clock:strobe): the local backend refuses it")
    assert refusals("sim", schedule, nemeses) == []


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 6)), max_size=12))
def test_a_clock_fault_is_refused_exactly_when_an_earlier_one_is_still_in_force(drawn: list[tuple[int, int]]) -> None:
    """The one-sweep check agrees with the definition: fault f is refused when some clock
    fault before it (by start, then number) ends after f starts."""
    faults = tuple(Fault(n, "clock", "strobe", float(start), float(duration), n)
                   for n, (start, duration) in enumerate(drawn))
    refused = {int(line.split()[1]) for line in refusals("docker", Schedule(faults, 30.0), Composite(["clock"]))
               if "is still in force" in line}  # (one of 0 s is refused for that: it does nothing)
    assert refused == {f.number for f in faults if f.duration > 0
                       and any((e.start, e.number) < (f.start, f.number) and e.end > f.start for e in faults)}


def test_many_clock_faults_are_checked_in_no_time() -> None:
    """Each clock fault was compared with every other: 8,000 took 18 s, and the 100,000 a
    schedule may hold most of an hour, before a docker run even started."""
    import time

    faults = tuple(Fault(n, "clock", "strobe", n * 0.01, 0.005, n) for n in range(20_000))
    started = time.process_time()
    assert refusals("docker", Schedule(faults, 300.0), Composite(["clock"])) == []
    assert time.process_time() - started < 5.0
