"""Assembling a run's parts from its configuration: the backend and the nemeses.

The runner knows the steps of a run; this module knows which concrete parts a configuration
asks for: the cluster backend (``docker`` containers, ``local`` network namespaces, or the
``sim`` simulator) and one nemesis per fault kind, the schedule a seed draws for them, and
whether the backend can apply every fault of a schedule and the cluster's layout give it
something to do (asked before the run starts, so a run never silently skips a fault, nor
runs one that cuts, stops or strikes nothing: a bridge on two brokers, a follower's fetches
with one replica, a partition that lasts no time).
"""

from __future__ import annotations

import random

from floodmark.backends import node_faults
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import ALL_KINDS, SIMULATED_KINDS, TestConfig
from floodmark.harness.faults import UPGRADE_TARGET
from floodmark.harness.schedule import Fault, Schedule, generate
from floodmark.nemesis.base import Layout
from floodmark.nemesis.compose import Composite
from floodmark.nemesis.message import messages_sent
from floodmark.reference.protocol import inter_broker_protocol as ibp
from floodmark.run import admin_faults
from floodmark.run.backend import Backend


def broker_args(config: TestConfig) -> tuple[str, ...]:
    """Extra ``floodmark broker`` options the test's configuration implies (the run's id
    among them, once the runner has given it one)."""
    return (
        "--zk-session-timeout", str(config.zk_session_timeout),
        "--min-insync-replicas", str(config.min_insync_replicas),
        "--inter-broker-protocol", config.inter_broker_protocol,
        *(("--run-id", config.run_id) if config.run_id is not None else ()),
    )


def protocols_spoken(config: TestConfig) -> tuple[str, ...]:
    """The inter-broker protocol versions the run's brokers speak (an upgrade adds its target)."""
    if "upgrade" in config.nemesis and config.inter_broker_protocol != UPGRADE_TARGET:
        return (config.inter_broker_protocol, UPGRADE_TARGET)
    return (config.inter_broker_protocol,)


def make_nemeses(config: TestConfig) -> Composite:
    """One nemesis per fault kind of the test; message faults aim at what its brokers send."""
    spoken = [ibp.features(version) for version in protocols_spoken(config)]
    return Composite(config.nemesis, messages_sent(
        heartbeats=any(f.heartbeats for f in spoken),
        isr_change_requests=any(f.isr_changes_by_request for f in spoken),
        epoch_requests=any(not f.truncation_on_fetch for f in spoken)))


def deterministic(config: TestConfig) -> bool:
    """Whether the backend :func:`make_backend` makes for ``config`` replays a run byte for
    byte (the simulator's): asked before it is made, to choose the run's id."""
    return config.cluster == "sim"


def make_backend(config: TestConfig, spec: ClusterSpec) -> Backend:
    seed = config.seed or 0
    if config.cluster == "sim":
        from floodmark.backends.sim import SimBackend

        return SimBackend(config, spec)
    from floodmark.backends.real import RealBackend

    if config.cluster == "local":
        from floodmark.backends.local import LocalCluster

        return RealBackend("local", LocalCluster(spec), config, seed)
    if config.cluster == "docker":
        from floodmark.backends.docker import DockerCluster

        return RealBackend("docker", DockerCluster(spec), config, seed)
    raise ValueError(f"unknown cluster backend {config.cluster!r}; choose docker, local or sim")


def layout_of(config: TestConfig) -> Layout:
    return Layout(config.nodes, config.replication_factor)


def kind_without_shapes(config: TestConfig, nemeses: Composite) -> str | None:
    """Why some fault kind of the test has no shape its cluster's layout gives something to
    do (None: every kind has one), naming the kind and its first shape's problem: a random
    schedule could only leave the kind out, and the test would pass for one that tried it."""
    layout = layout_of(config)
    drawable = nemeses.shapes(layout)
    for kind in nemeses.kinds:
        if not drawable[kind]:
            shape = nemeses.get(kind).shapes[0]
            return (f"--nemesis {kind}: no {kind} fault can take effect on this cluster "
                    f"({kind}:{shape}: {nemeses.layout_problem(kind, shape, layout)})")
    return None


def draw_schedule(config: TestConfig, nemeses: Composite, rng: random.Random) -> Schedule:
    """The schedule ``rng`` (the seed's schedule stream) draws for the test: only shapes its
    layout gives something to do, and on a layout that allows every shape (three brokers or
    more, every partition with a follower: two for failover groups) the schedule a seed always
    drew."""
    session = config.zk_session_timeout
    return generate(
        rng, config.nemesis, nemeses.shapes(layout_of(config)),
        config.time_limit, config.fault_duration, config.quiet_period,
        lambda kind, shape, drawn, r: nemeses.duration(kind, shape, drawn, session, r),
        lambda kind, shapes: nemeses.recovery(kind, session, shapes),
        lambda kind, shape, r: nemeses.group(kind, shape, session, r),
        nemeses.recovers_as, nemeses.weights(),
    )


REFUSALS_SHOWN = 3  # a schedule of 100,000 unknown faults made a 14 MB line
# The shortest a fault held for its duration (a cut, a pause) may last: the history counts
# time in nanoseconds, so one shorter starts and heals at one instant of it, as one of 0 s
# does (5e-324 s added to a start of 2 s is 2 s: the pause was counted as having taken effect).
SHORTEST_HELD = 1e-9


def refusal(cluster: str, schedule: Schedule, nemeses: Composite, brokers: int,
            session_timeout: float | None = None, time_limit: float | None = None,
            replication_factor: int | None = None) -> str | None:
    """Why the backend cannot apply some of the schedule's faults, in one line naming the
    first few and counting the rest (None: all fine); ``brokers`` and ``replication_factor``,
    the test's, refuse too what no cluster of that layout can take (a bridge on two brokers, a
    follower of a single replica), and ``session_timeout``, the test's ZooKeeper
    session timeout, a fault too long or too short for what its shape says, also once the
    test's ``time_limit`` has cut it short (the final heal-all ends it there)."""
    problems = refusals(cluster, schedule, nemeses, brokers, session_timeout, time_limit, replication_factor)
    if not problems:
        return None
    more = len(problems) - REFUSALS_SHOWN
    return "; ".join(problems[:REFUSALS_SHOWN]) + (
        f"; and {more} more {'fault' if more == 1 else 'faults'} refused" if more > 0 else "")


def refusals(cluster: str, schedule: Schedule, nemeses: Composite, brokers: int | None = None,
             session_timeout: float | None = None, time_limit: float | None = None,
             replication_factor: int | None = None) -> list[str]:
    """:func:`refusal`'s problems, one line each (empty: all fine; ``brokers`` None: any
    number of brokers; ``replication_factor`` None: as many replicas as brokers;
    ``session_timeout`` None: any duration; ``time_limit`` None: every fault lasts as written)."""
    layout = None if brokers is None else Layout(brokers, replication_factor or brokers)
    clock_overlaps = _clock_overlaps(schedule) if cluster != "sim" else {}
    problems = []
    upgrades = [fault.number for fault in schedule.faults if fault.kind == "upgrade"]
    for number in upgrades[1:]:  # a replayed or hand-written schedule may hold more than one
        problems.append(f"fault {number} (upgrade): fault {upgrades[0]} upgrades every broker to kip-343 "
                        "already; an upgrade happens once a run")
    for fault in schedule.faults:
        if fault.kind not in nemeses.kinds:
            problems.append(f"fault {fault.number} ({fault.kind}:{fault.shape}): {_missing_kind(cluster, fault.kind)}")
            continue
        if fault.shape not in nemeses.get(fault.kind).every_shape:
            problems.append(f"fault {fault.number} ({fault.kind}:{fault.shape}): unknown shape; "
                            f"known: {', '.join(nemeses.get(fault.kind).every_shape)}")
            continue
        layout_problem = None if layout is None else nemeses.layout_problem(fault.kind, fault.shape, layout)
        if layout_problem is not None:  # it would start, cut or strike nothing, and heal nothing
            problems.append(f"fault {fault.number} ({fault.kind}:{fault.shape}): {layout_problem}")
            continue
        if fault.duration < SHORTEST_HELD and nemeses.lasts(fault.kind, fault.shape):
            problems.append(f"fault {fault.number} ({fault.kind}:{fault.shape}): a duration of "
                            f"{fault.duration:g} s heals it as it starts, so it does nothing"
                            + (" (the history counts time in nanoseconds)" if fault.duration else ""))
            continue
        duration_problem = None if session_timeout is None else _duration_problem(
            fault, nemeses, session_timeout, time_limit)
        if duration_problem is not None:
            problems.append(f"fault {fault.number} ({fault.kind}:{fault.shape}): {duration_problem}")
            continue
        if cluster == "sim":
            continue  # the simulator applies every fault
        reason = admin_faults.refuses(fault.kind, fault.shape, node_faults.refuses) or clock_overlaps.get(fault.number)
        if reason is not None:
            problems.append(f"fault {fault.number} ({fault.kind}:{fault.shape}): the {cluster} backend "
                            f"refuses it: {reason}")
    return problems


def _clock_overlaps(schedule: Schedule) -> dict[int, str]:
    """Fault number -> why a real backend cannot apply that clock fault beside an earlier one
    still in force: a real node's clock file holds one skew, so the first of two overlapping
    faults to heal would set the clock back to true time under the other (the simulator
    keeps a stack, and a generated schedule never overlaps two faults of one kind). One sweep
    in start order, keeping the earlier fault that lasts longest: comparing each with every
    other took 18 s for 8,000 clock faults, and 100,000 would have taken most of an hour."""
    overlaps: dict[int, str] = {}
    longest: Fault | None = None  # of the clock faults so far, the one that ends last
    for fault in sorted((f for f in schedule.faults if f.kind == "clock"), key=lambda f: (f.start, f.number)):
        if longest is not None and longest.end > fault.start:
            overlaps[fault.number] = (f"it starts while clock fault {longest.number} is still in force, and a real "
                                      "node's clock holds one fault at a time (only --cluster sim stacks them)")
        if longest is None or fault.end > longest.end:
            longest = fault
    return overlaps


def _duration_problem(fault: Fault, nemeses: Composite, session_timeout: float,
                      time_limit: float | None) -> str | None:
    """Why ``fault`` is not what its shape says against the session timeout, as written or as
    the test's time limit cuts it: a long pause that starts 2 s before the end of the fault
    phase lasts 2 s, whatever its duration says, and the session it was to cost survives."""
    problem = nemeses.duration_problem(fault.kind, fault.shape, fault.duration, session_timeout)
    if problem is not None or time_limit is None or fault.end <= time_limit:
        return problem
    lasts = round(time_limit - fault.start, 3)
    problem = nemeses.duration_problem(fault.kind, fault.shape, lasts, session_timeout)
    if problem is None:
        return None
    return f"the test's time limit of {time_limit:g} s ends it {lasts:g} s after it starts: {problem}"


def _missing_kind(cluster: str, kind: str) -> str:
    """Why a schedule's fault of ``kind`` has no nemesis in the test, in the words that say
    what to do: a kind nothing knows, one the backend cannot apply, or one the test left out."""
    if kind not in ALL_KINDS:
        return f"unknown fault kind; known: {', '.join(ALL_KINDS)}"
    if kind in SIMULATED_KINDS and cluster != "sim":
        return f"the {cluster} backend cannot apply {kind} faults; only --cluster sim can"
    return f"the test has no {kind} nemesis"
