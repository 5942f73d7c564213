"""Failover faults: a group of faults aimed at one partition's roles, timed against each other.

Replication bugs that the fixes of KIP-101/279/320/343/966, KAFKA-7128 and KAFKA-6082
removed need several things at once: a follower lagging (its fetch responses lost) for
shorter or longer than the replica lag time, then the leader killed, powered off or its
ZooKeeper session expired just as that follower leaves the ISR, and sometimes a second
failure within the lag time (the new leader too), another follower missing the
controller's LeaderAndIsr, or a one-way cut (the third replica cannot hear the new leader);
or the controller's event thread stuck as a leader fails. Independent random faults of
each kind line up like that almost never, so this kind plans them as one group: a *pattern*
(drawn like a shape) stands for several *steps*, each a fault of its own in the schedule,
timed from the group's start by :meth:`FailoverNemesis.group` (offsets drawn against the
replica lag time and the session timeout). The schedule expands the group
(``floodmark.harness.schedule.generate``); each step is planned when it starts, like any
fault.

Steps aim at roles, not brokers, of one partition (drawn from the group's seed, which
every step shares, so all aim at the same one), read from the cluster when the step starts:
the *leader*; its *successor*, the first other replica in assignment order (the one the
controller elects next while it is in sync); the *third*, the replica after that. So "kill
the leader" twice in a group kills the leader, then the one elected after it. A role is only
ever a replica of that partition: a broker outside it neither fetches nor hears the
partition's LeaderAndIsr, so lagging or cutting it would test nothing the pattern says. A
step aimed at a role the layout does not give (the third with replication factor 2), and a
pattern with such a step, is refused before the run or never drawn
(:meth:`FailoverNemesis.layout_problem`).

Only the simulator applies it (message faults, power loss, session expiry and thread stalls
on demand).
At most one step of a group is a power loss, and groups are spaced as power losses are
(:meth:`FailoverNemesis.recovery`), so a group stays inside the durability contract: fewer
than min.insync.replicas replicas lose unsynced writes at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from floodmark.harness.faults import (
    ClusterView,
    FaultPlan,
    MessageFault,
    NetworkCut,
    ProcessCrash,
    SessionExpiry,
    ThreadStall,
)
from floodmark.nemesis.base import (
    Choice,
    Layout,
    Nemesis,
    NemesisError,
    brokers_by_id,
    choose_broker,
)
from floodmark.nemesis.kill import PowerNemesis

# The brokers' replica.lag.time.max (seconds; reference.broker.config's default): how long a
# silent follower stays in the ISR. Nemeses do not reach into the reference, so it is named here.
REPLICA_LAG_TIME = 10.0
FETCH_RESPONSE = "ReplicaFetchResponse"
LEADER_AND_ISR = "LeaderAndIsrRequest"
ISR_CHANGE_REQUEST = "IsrChangeRequest"
HOLD_ISR_CHANGES = 0.7  # share of groups at KIP-343 that hold ISR change requests back
ALWAYS_HELD = frozenset({"stale-proposal"})  # patterns made for a held-back proposal: every one

# Step shape -> (the fault kind it acts as, for coverage and healing).
STEPS: dict[str, str] = {
    "lag-successor": "message",  # fetch responses to the successor lost
    "lag-third": "message",  # fetch responses to the third replica lost
    "lose-leader-and-isr-third": "message",  # the controller's LeaderAndIsr to the third lost
    "cut-third-from-successor": "partition",  # the third replica cannot hear the successor
    "kill-leader": "kill",
    "power-leader": "power",
    "expire-leader": "session",
    "expire-other-leader": "session",  # a leader other than the controller (see stalled_controller)
    "stall-controller": "stall",  # the controller's event thread stuck, its session expired
    "hold-isr-changes": "message",  # ISR change requests (KIP-343) held back past a failover
}

# Step shape -> the partition's role it aims at, the last in ROLES if several (None: none).
STEP_ROLES: dict[str, str | None] = {
    "lag-successor": "successor",
    "lag-third": "third",
    "lose-leader-and-isr-third": "third",
    "cut-third-from-successor": "third",  # (and the successor)
    "kill-leader": "leader",
    "power-leader": "leader",
    "expire-leader": "leader",
    "expire-other-leader": "leader",
    "stall-controller": None,  # the controller, whoever it is
    "hold-isr-changes": None,  # every ISR change request
}

# Steps aimed at a partition the controller does not lead: a stalled controller strikes
# only when it has another broker's failure to decide about (its own expiry just resigns it).
BESIDE_CONTROLLER = frozenset({"stall-controller", "expire-other-leader"})

# The kinds of steps that are a state held for their duration (the others are acts, done once).
HELD_STEPS = frozenset({"message", "partition", "stall"})
ROLES = ("leader", "successor", "third")  # a partition's replicas, in the order a group aims at them
MIN_BROKERS = 2  # a role's broker and one to take over; the roles themselves need replicas

Step = tuple[str, float, float]  # (step shape, seconds after the group starts, duration)
Pattern = Callable[[random.Random, float], list[Step]]


def _second_failure(rng: random.Random, at: float, session: float) -> list[Step]:
    """Sometimes a second failure follows the leader's: the new leader too (within the lag
    time of its election), or the third replica deaf to it or to the controller."""
    roll = rng.random()
    if roll < 0.35:  # the new leader dies within the lag time of being elected
        return [("kill-leader", at + session + rng.uniform(0.3, 4.0), rng.uniform(4.0, 10.0))]
    if roll < 0.5:
        return [("expire-leader", at + rng.uniform(1.0, 4.0), 0.5)]
    if roll < 0.65:
        return [("lose-leader-and-isr-third", at - rng.uniform(0.0, 1.0), rng.uniform(5.0, 12.0))]
    if roll < 0.8:
        return [("cut-third-from-successor", at - rng.uniform(0.0, 1.0), rng.uniform(5.0, 12.0))]
    return []


def lagging_follower(rng: random.Random, session: float) -> list[Step]:
    """A follower's fetch responses lost, shorter or longer than the lag time; the leader
    fails within that window, often just as the follower leaves the ISR; maybe a second
    failure follows."""
    lagging = rng.choice(("lag-successor", "lag-third"))
    longer = rng.random() < 0.5
    lag = rng.uniform(REPLICA_LAG_TIME + 0.5, REPLICA_LAG_TIME + 5.0) if longer else rng.uniform(1.0, 8.0)
    at = REPLICA_LAG_TIME + rng.uniform(-0.5, 1.5) if longer and rng.random() < 0.7 else rng.uniform(0.3, lag)
    failure = rng.choice(("kill-leader", "kill-leader", "expire-leader", "power-leader"))
    down = 0.5 if failure == "expire-leader" else rng.uniform(2.0, 15.0)
    steps = [(lagging, 0.0, lag), (failure, at, down)]
    if failure != "power-leader":  # one power loss a group: the contract's bound
        steps += _second_failure(rng, at, session)
    return steps


def lagging_behind_shrink(rng: random.Random, session: float) -> list[Step]:
    """KAFKA-7128's shape: the third replica lags until the leader drops it (the HW jumps to
    the successor's log end), the successor misses that (its fetch responses lost from just
    before), and the leader dies at once: the successor leads with the old HW."""
    shrink = REPLICA_LAG_TIME + rng.uniform(0.0, 1.0)
    return [("lag-third", 0.0, shrink + rng.uniform(2.0, 6.0)),
            ("lag-successor", shrink - rng.uniform(0.3, 2.0), rng.uniform(3.0, 6.0)),
            ("kill-leader", shrink + rng.uniform(0.1, 1.5), rng.uniform(5.0, 20.0))]


def two_leaders_lost(rng: random.Random, session: float) -> list[Step]:
    """KAFKA-6361's shape (KIP-279): the successor lags the third when the leader dies, the
    third cannot hear the successor through its whole epoch yet stays in its ISR, and the
    successor dies within the lag time: the third leads over logs with several epoch gaps."""
    lag = rng.uniform(1.0, 3.0)
    cut = rng.uniform(0.5, lag)
    killed = cut + rng.uniform(0.3, 1.0)
    second = killed + session + rng.uniform(0.3, 3.0)
    return [("lag-successor", 0.0, lag),
            ("cut-third-from-successor", cut, second - cut + rng.uniform(1.0, 3.0)),
            ("kill-leader", killed, rng.uniform(session + 6.0, 30.0)),
            ("kill-leader", second, rng.uniform(4.0, 10.0))]


def stale_follower(rng: random.Random, session: float) -> list[Step]:
    """KIP-320's shape: the leader loses leadership and the successor, lagging, loses it
    too (session expiries) while the third hears nothing from the controller and keeps
    fetching in the old epoch from a leader that no longer holds what it claims."""
    lag = rng.uniform(1.0, 2.5)
    first = rng.uniform(1.0, lag)
    return [("lag-successor", 0.0, lag),
            ("lose-leader-and-isr-third", first - rng.uniform(0.2, 0.8), rng.uniform(8.0, 12.0)),
            ("expire-leader", first, 0.5),
            ("expire-leader", first + rng.uniform(1.5, 4.0), 0.5)]


def stale_proposal(rng: random.Random, session: float) -> list[Step]:
    """KIP-343's shape: the third replica lags past the lag time, so the leader proposes an
    ISR without it, and the leader's session expires as it does: its successor leads a new
    epoch before the proposal (held back, where brokers send ISR change requests) lands."""
    expire = REPLICA_LAG_TIME + rng.uniform(1.2, 3.0)  # (the leader checks its ISR every second)
    return [("lag-third", 0.0, expire + rng.uniform(1.0, 6.0)), ("expire-leader", expire, 0.5)]


def unclean_return(rng: random.Random, session: float) -> list[Step]:
    """KIP-966's shapes: the leader loses power (its unsynced tail gone) as the last member of
    its ISR, both followers having lagged out of it, and comes back while they hold what was
    acknowledged; or it comes back as the controller learns of it and then its successor
    fails, so the controller must choose between them."""
    if rng.random() < 0.5:
        power_at = REPLICA_LAG_TIME + rng.uniform(1.0, 3.0)
        return [("lag-successor", 0.0, power_at + rng.uniform(0.5, 3.0)),
                ("lag-third", rng.uniform(0.0, 0.5), power_at + rng.uniform(0.0, 2.5)),
                ("power-leader", power_at, rng.uniform(1.0, 2 * session))]
    power = rng.uniform(0.5, session)
    back = max(power, session) + rng.uniform(0.0, 2.0)
    failure = rng.choice(("kill-leader", "expire-leader"))
    return [("power-leader", 0.0, power),
            (failure, back, 0.5 if failure == "expire-leader" else rng.uniform(3.0, 10.0))]


def lone_survivor(rng: random.Random, session: float) -> list[Step]:
    """The third replica lags out of the ISR and stays behind while the leader and then its
    successor die: only an out-of-sync replica lives (unclean election's case)."""
    killed = REPLICA_LAG_TIME + rng.uniform(0.5, 2.0)
    second = killed + session + rng.uniform(0.5, 3.0)
    return [("lag-third", 0.0, second + rng.uniform(2.0, 5.0)),
            ("kill-leader", killed, second - killed + session + rng.uniform(2.0, 8.0)),
            ("kill-leader", second, rng.uniform(4.0, 10.0))]


def stalled_controller(rng: random.Random, session: float) -> list[Step]:
    """KAFKA-6082's shape: the controller's event thread stuck with a decision in hand, its
    session expired (another broker takes over), and a leader's session expiring just then,
    a failure the stuck controller has to decide about: another broker's, for the controller's
    own would only resign it, and the stall would never strike."""
    stall = rng.uniform(2.0, 6.0)
    return [("stall-controller", 0.0, stall), ("expire-other-leader", rng.uniform(0.1, 1.0), 0.5)]


# Pattern -> how it is drawn.
PATTERNS: dict[str, Pattern] = {
    "lagging-follower": lagging_follower,
    "lagging-behind-shrink": lagging_behind_shrink,
    "two-leaders-lost": two_leaders_lost,
    "stale-follower": stale_follower,
    "stale-proposal": stale_proposal,
    "unclean-return": unclean_return,
    "lone-survivor": lone_survivor,
    "stalled-controller": stalled_controller,
}
PATTERN_WEIGHTS = {"lagging-follower": 3.0}  # the general pattern, drawn most; the others 1.0
# Pattern -> the last role any of its steps aims at: the third, unless it says.
PATTERN_ROLES = {"stalled-controller": "leader"}


class FailoverNemesis(Nemesis):
    kind = "failover"
    # Drawn by the schedule as shapes: each pattern, by weight (listed as often as it weighs).
    shapes = tuple(name for name in PATTERNS for _ in range(int(PATTERN_WEIGHTS.get(name, 1.0))))
    simulated_only = True
    recovers_as = "power"  # a group may power a leader off
    weight = 3.0  # a group is what the test's other kinds rarely line up to do

    def __init__(self, messages: Mapping[str, str] | None = None) -> None:
        """``messages``: the messages the cluster sends (as for the message nemesis): ISR
        change requests are held back only where brokers send them (KIP-343)."""
        self.isr_change_requests = messages is not None and ISR_CHANGE_REQUEST in messages.values()

    @property
    def every_shape(self) -> tuple[str, ...]:
        """A schedule holds steps; a pattern is only drawn (and expanded into steps)."""
        return tuple(STEPS)

    def layout_problem(self, shape: str, layout: Layout) -> str | None:
        if layout.brokers < MIN_BROKERS:  # (every pattern ends in a failover to another broker)
            return f"needs at least {MIN_BROKERS} brokers, one to fail over to; the test has {layout.brokers}"
        role = PATTERN_ROLES.get(shape, "third") if shape in PATTERNS else STEP_ROLES.get(shape)
        if role is not None and layout.replication_factor < ROLES.index(role) + 1:
            return (f"aims at a partition's {role} replica: with replication factor "
                    f"{layout.replication_factor} no partition has one")
        if shape == "hold-isr-changes" and layout.replication_factor < 2:
            return ("with replication factor 1 no partition has a follower to move in or out of its ISR, "
                    f"so no {ISR_CHANGE_REQUEST} is ever sent")
        return None

    def lasts(self, shape: str) -> bool:
        return STEPS.get(shape) in HELD_STEPS

    def recovery(self, session_timeout: float, shapes: Sequence[str]) -> float:
        # A group that powers a leader off is spaced from power losses as they are; one that
        # does not needs no recovery (kills and session expiries lose no synced write), and
        # spacing it as one only left fewer groups in each test.
        if any(STEPS.get(shape) == "power" for shape in shapes):
            return PowerNemesis().recovery(session_timeout, ("leader",))
        return 0.0

    def group(self, shape: str, session_timeout: float, rng: random.Random) -> tuple[Step, ...]:
        """The steps a group of pattern ``shape`` stands for, sorted by start."""
        pattern = PATTERNS.get(shape)
        if pattern is None:
            raise NemesisError(f"failover: unknown pattern {shape!r}; known: {', '.join(PATTERNS)}")
        drawn = pattern(rng, session_timeout)
        if (shape != "stalled-controller" and self.isr_change_requests
                and (shape in ALWAYS_HELD or rng.random() < HOLD_ISR_CHANGES)):
            # The leader's ISR shrink reaches the controller after its successor leads (a
            # deposed leader's stale proposal, which the controller must refuse): always in
            # the pattern made for it, in a share of the others.
            drawn.append(("hold-isr-changes", 0.0, max(at for _, at, _ in drawn) + 1.0))
        steps = [(step, round(max(at, 0.0), 3), round(duration, 3)) for step, at, duration in drawn]
        return tuple(sorted(steps, key=lambda s: s[1]))

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[FaultPlan, Choice]:
        self.check_shape(shape)
        roles, how = partition_roles(rng, view, beside_controller=shape in BESIDE_CONTROLLER)
        role = STEP_ROLES[shape]
        if role is not None and ROLES.index(role) >= len(roles):
            # The layout check refuses this before the run; a view without the partition's
            # replicas (ZooKeeper did not answer) or fewer of them than the test made lands here.
            topic, partition = how["partition"]
            raise NemesisError(f"failover: {shape} aims at the {role} replica of {topic}/{partition}, "
                               f"which has {len(roles)} known replicas ({', '.join(roles) or 'none'})")
        aimed = dict(zip(ROLES, roles, strict=False))  # holds every role this step aims at
        plan: FaultPlan
        if shape in ("lag-successor", "lag-third"):
            plan = MessageFault(FETCH_RESPONSE, "drop", destination=aimed[shape.removeprefix("lag-")])
        elif shape == "hold-isr-changes":  # every one, to any controller, long enough to land late
            delay = round(rng.uniform(1.2, 2.5) * view.session_timeout, 3)
            plan = MessageFault(ISR_CHANGE_REQUEST, "delay", delay=delay)
        elif shape == "lose-leader-and-isr-third":
            plan = MessageFault(LEADER_AND_ISR, "drop", destination=aimed["third"])
        elif shape == "cut-third-from-successor":
            plan = NetworkCut(((aimed["third"], (aimed["successor"],)),))
        elif shape in ("expire-leader", "expire-other-leader"):
            plan = SessionExpiry(aimed["leader"])
        elif shape == "stall-controller":
            plan = self._stall(rng, view, how)
        else:
            plan = ProcessCrash(aimed["leader"], "kill" if shape == "kill-leader" else "power-loss")
        return plan, {"shape": shape, "acts_as": STEPS[shape], **how}

    @staticmethod
    def _stall(rng: random.Random, view: ClusterView, how: Choice) -> ThreadStall:
        slot, chose = choose_broker(rng, view, "controller")
        how["controller"] = chose
        return ThreadStall(slot.name, "controller", expire_session=True)


def partition_roles(rng: random.Random, view: ClusterView, *,
                    beside_controller: bool = False) -> tuple[tuple[str, ...], Choice]:
    """The roles (leader, successor, third) of the partition the group aims at, as node names,
    as many as it has replicas (up to three), and how they were read. Only its replicas: a
    partition of two has no third. Without a leader now (mid-election) the roles follow
    assignment order; without its replicas known (ZooKeeper did not answer) there are none.
    ``beside_controller``: a partition the controller's broker does not lead, if any does."""
    if not view.partitions:
        raise NemesisError("failover: the cluster has no partitions to aim at")
    candidates = sorted(view.partitions)
    if beside_controller:
        # (a partition without a leader now is no help: nobody's expiry there needs deciding)
        elsewhere = [tp for tp in candidates if tp in view.leaders and view.leaders[tp] != view.controller]
        candidates = elsewhere or candidates
    topic, partition = rng.choice(candidates)
    by_id = {b.broker_id: b.name for b in brokers_by_id(view)}
    assigned = [r for r in view.replicas.get((topic, partition), ()) if r in by_id]
    how: Choice = {"partition": [topic, partition]}
    leader = view.leaders.get((topic, partition))
    if not assigned:
        how["fallback"] = "the partition's replicas are not known: no roles"
    elif leader not in assigned:
        how["fallback"] = "no current leader: roles in assignment order"
        leader = assigned[0]
    ordered = sorted(assigned, key=lambda r: r != leader)  # the leader, then assignment order (a stable sort)
    roles = tuple(by_id[r] for r in ordered[:len(ROLES)])
    how["roles"] = dict(zip(ROLES, roles, strict=False))  # a partition of two replicas has no third
    return roles, how
