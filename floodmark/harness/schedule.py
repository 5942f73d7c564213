"""The fault schedule: which faults happen when, decided from the seed before the run starts.

A schedule is a list of planned faults. Each names its ``kind`` (partition, clock, pause,
disk, kill), a ``shape`` (how the nemesis of that kind applies it: "isolate-one",
"bump-forward", "controller", ...), when it starts (seconds after the workload starts), how
long it lasts, and a ``seed`` for whatever the nemesis must still choose when it acts (which
node of several to isolate, by how much to skew a clock). Choices that depend on the
cluster's state at that moment (who the controller is, who leads a partition) are made by
the nemesis when it acts, and recorded in the history op it writes.

Faults are separated by quiet periods so the cluster can recover between them; sometimes a
second fault of another kind overlaps the first, because real failures compose. Every fault
is healed when its duration ends, and all of them end by the time limit. A final heal-all
follows regardless. A hand-written schedule (``run --schedule``, or a run's own replayed) is
held to half of that: a fault that starts at or after the test's time limit is refused
(:meth:`Schedule.check_starts_within`: it would never run, yet the schedule would claim it),
while one that lasts past the limit is accepted and ended by that final heal-all (unless,
cut there, it is no longer what its shape says: a long pause the session outlives, refused
with the faults a backend cannot apply). The heal-all comes once the clients' operations
still in flight at the limit have completed, so such a fault lasts from the limit to then
(or to its own end, if sooner): on the simulator the same every replay. Jepsen does the
same (its time limit wraps the nemesis, whose final generator heals), and refusing it would
forbid "down for the rest of the test" and a replay of a run whose time limit was cut by
hand; but it is never cut short unseen: the run says so in one line before it starts
(:meth:`Schedule.past`), and schedule.json records when the heal-all ended it.

``schedule.json`` holds the plan and, as the run goes, what was executed: when each fault
really started and stopped and the nemesis's own account of what it did.
``floodmark repro`` reads the plan back, its time limit included, and executes it again.
The file is rewritten whole, so rewriting it after every action would make a schedule of n
faults cost n² (a thousand faults in a 5 s simulated run took 80 s): it is written when the
run starts, at most about once a second while it goes (less often when writing it takes
longer, so writing costs at most a tenth of the time), and whenever the run ends, healed,
failed or interrupted. A harness killed outright loses at most that second's account; the
history has it too.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from floodmark.errors import SourceError, printable

# Chance that a fault is joined by an overlapping fault of another kind.
OVERLAP_PROBABILITY = 0.25


class ScheduleError(ValueError):
    """A schedule file that cannot be used: names the file and what is wrong."""


@dataclass(frozen=True)
class Fault:
    """One planned fault."""

    number: int  # position in the schedule, from 0
    kind: str
    shape: str
    start: float  # seconds after the workload starts
    duration: float  # seconds until its heal
    seed: int  # for the nemesis's own choices when it acts

    @property
    def end(self) -> float:
        return self.start + self.duration

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "kind": self.kind, "shape": self.shape, "start": self.start,
                "duration": self.duration, "seed": self.seed}


@dataclass(frozen=True)
class Schedule:
    """A run's planned faults, ordered by start time."""

    faults: tuple[Fault, ...]
    time_limit: float
    # Whether the file said how long its test runs (else: until its last fault ends).
    time_limit_stated: bool = field(default=True, compare=False)
    # The file it was read from, for messages about it (None: drawn from a seed, or made).
    source: str | None = field(default=None, compare=False)

    def actions(self) -> list[tuple[float, str, Fault]]:
        """Every start and stop in time order: (seconds, "start"|"stop", fault).

        At equal times stops come first, so a heal is never queued behind a new fault; but a
        fault that ends when it starts (no duration, or one too small to add to its start)
        stops after it starts, else it would last until the heal-all.
        """
        events = [(f.start, 1, "start", f) for f in self.faults]
        events += [(f.end, 0 if f.end > f.start else 2, "stop", f) for f in self.faults]
        events.sort(key=lambda e: (e[0], e[1], e[3].number))
        return [(t, what, f) for t, _, what, f in events]

    def to_dict(self) -> dict[str, Any]:
        return {"time_limit": self.time_limit, "faults": [f.to_dict() for f in self.faults]}

    def check_starts_within(self, time_limit: float, source: str) -> None:
        """A ScheduleError naming the first fault that starts at or after ``time_limit``
        (the test's): the fault phase ends then, so it would never run."""
        for fault in self.faults:
            if fault.start >= time_limit:
                raise ScheduleError(f"{source}: fault {fault.number} ({fault.kind} {fault.shape}) starts at "
                                    f"{fault.start:g} s, at or after the test's time limit of {time_limit:g} s: "
                                    "it would never run")

    def past(self, time_limit: float) -> list[Fault]:
        """The faults planned to end after ``time_limit`` (the test's): the final heal-all
        ends them instead, so a run must say so (see the module)."""
        return [fault for fault in self.faults if fault.end > time_limit + END_TOLERANCE]

    @staticmethod
    def from_dict(data: Any, source: str = "<schedule>") -> Schedule:
        if not isinstance(data, dict) or not isinstance(data.get("faults"), list):
            raise ScheduleError(f"{source}: expected an object with a 'faults' list")
        _refuse_unknown(data, SCHEDULE_KEYS, source, "")
        if len(data["faults"]) > MAX_SCHEDULE_FAULTS:
            raise ScheduleError(f"{source}: {len(data['faults'])} faults, more than {MAX_SCHEDULE_FAULTS}: a run "
                                "cannot execute that many (each costs the harness time and memory)")
        faults = []
        numbered: dict[int, int] = {}  # fault number -> the position it was first given at
        for position, raw in enumerate(data["faults"]):
            if not isinstance(raw, dict):
                raise ScheduleError(f"{source}: fault {position}: expected an object")
            _refuse_unknown(raw, FAULT_KEYS, source, f"fault {position}: ")
            try:
                fault = Fault(
                    number=_whole(raw["number"], "number"), kind=_word(raw["kind"], "kind"),
                    shape=_word(raw["shape"], "shape"), start=_seconds(raw["start"], "start"),
                    duration=_seconds(raw["duration"], "duration"), seed=_whole(raw["seed"], "seed"),
                )
            except KeyError as e:
                raise ScheduleError(f"{source}: fault {position}: missing field {e}") from None
            except ValueError as e:
                raise ScheduleError(f"{source}: fault {position}: {e}") from None
            first = numbered.setdefault(fault.number, position)
            if first != position:  # what the run records of each fault is keyed by its number
                raise ScheduleError(f"{source}: fault {position}: number {fault.number} is fault {first}'s already")
            faults.append(fault)
        try:
            # Unstated: until the last fault ends, as long as a time limit may be (a fault of
            # 7 days starting at 1 s made one the file it is written to refused on reading).
            time_limit = (_seconds(data["time_limit"], "time_limit") if "time_limit" in data
                          else min(max((f.end for f in faults), default=0.0), MAX_SCHEDULE_SECONDS))
        except ValueError as e:
            raise ScheduleError(f"{source}: {e}") from None
        _check_record(data, source)
        return Schedule(tuple(faults), time_limit, "time_limit" in data, source)


# Times are planned to the millisecond, and a drawn fault cut to end at the time limit may
# add up to a hair past it (24.603 + 6.097 is 30.700000000000003): no end past the limit.
END_TOLERANCE = 1e-6
MAX_SCHEDULE_SECONDS = 7 * 24 * 3600.0  # as long as a configuration's time limit may be
MAX_SCHEDULE_BYTES = 64 << 20
# A fault costs the harness about 2 ms and 35 kB of history and account: 100,000 are minutes
# and gigabytes; the 600,000 that fit in MAX_SCHEDULE_BYTES would exhaust the machine.
MAX_SCHEDULE_FAULTS = 100_000
# What a schedule.json holds: the plan, and what a run wrote of its execution (read as
# written, never replayed). A key outside these is a typo ("time-limit") that would
# otherwise be ignored silently, and the run would not be the one written.
FAULT_KEYS = ("number", "kind", "shape", "start", "duration", "seed")
SCHEDULE_KEYS = ("seed", "time_limit", "faults", "executed", "heal_all")
# An entry of "executed" (ExecutedFault.to_dict): the fault, then what the run did of it.
EXECUTED_KEYS = (*FAULT_KEYS, "started_at", "start_result", "stopped_at", "stop_result", "error")


def _check_record(data: dict[str, Any], source: str) -> None:
    """A ScheduleError naming the first part of what a run recorded (``executed``,
    ``heal_all``) that is not of the shape a run writes (:meth:`ScheduleLog.to_dict`).

    Neither is replayed: they say what a run did, and a replay does it anew. But they are
    read: repro tells an edited fault from nondeterminism by comparing the plan with
    ``executed``, and a record of another shape (a number, a list of strings) made it compare
    nothing and blame a replay that differs on nondeterminism; a record no run could have
    written is a file that is not what it claims to be. Absent or null, each records
    nothing (a hand-written schedule need not have them). Not checked here: the fault an
    entry copies from the plan (repro compares it with the plan and says an edited one was
    edited, whatever it now holds) and the accounts (the nemesis's, each kind its own).
    """
    heal_all = data.get("heal_all")
    if heal_all is not None and not isinstance(heal_all, dict):
        raise ScheduleError(f"{source}: heal_all: expected an object (each kind's account of the final "
                            "heal-all) or null")
    executed = data.get("executed")
    if executed is None:
        return
    if not isinstance(executed, list):
        raise ScheduleError(f"{source}: executed: expected a list (what the run did of each fault) or null")
    first_at: dict[str, int] = {}  # each fault number recorded, as its JSON text: where first
    for position, entry in enumerate(executed):
        where = f"executed[{position}]: "
        if not isinstance(entry, dict):
            raise ScheduleError(f"{source}: {where}expected an object (a fault, and what the run did of it)")
        _refuse_unknown(entry, EXECUTED_KEYS, source, where)
        # (a run records each fault once; repro, comparing, would keep only the last record)
        number = json.dumps(entry.get("number"), sort_keys=True)
        if "number" in entry and first_at.setdefault(number, position) != position:
            raise ScheduleError(f"{source}: {where}fault {printable(number[:20])} is recorded again "
                                f"(first at executed[{first_at[number]}]): a run records each fault once")
        for key, expected, shape in (("started_at", (int, float), "a number of seconds"),
                                     ("stopped_at", (int, float), "a number of seconds"),
                                     ("start_result", dict, "an object"), ("stop_result", dict, "an object"),
                                     ("error", str, "text")):
            value = entry.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, expected)
                                      or (isinstance(value, float) and not math.isfinite(value))):
                raise ScheduleError(f"{source}: {where}{key} must be {shape} or null")


def _refuse_unknown(data: dict[Any, Any], known: tuple[str, ...], source: str, where: str) -> None:
    """A ScheduleError naming the first key of ``data`` not in ``known`` (and the known key
    it is closest to, if one is close)."""
    import difflib

    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key).replace("-", "_"), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
            shown = key if len(key) <= 40 else key[:37] + "..."
            raise ScheduleError(f"{source}: {where}unknown key {shown!r}; {hint}")


def _whole(value: Any, name: str) -> int:
    if type(value) is not int or not 0 <= value < 2**63:
        raise ValueError(f"{name} must be an integer from 0 to 2**63 - 1")
    return value


def _word(value: Any, name: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 100:
        raise ValueError(f"{name} must be a name of 1 to 100 characters")
    return value


def _seconds(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_SCHEDULE_SECONDS:
        raise ValueError(f"{name} must be a number of seconds from 0 to {MAX_SCHEDULE_SECONDS:g}")
    return float(value)


# (kind, shape, drawn duration, rng) -> how long the fault lasts: a shape defined against a
# timeout (a pause longer than the session) sets its own duration.
DurationRule = Callable[[str, str, float, random.Random], float]
# (kind, the shapes planned: a group's steps or the one fault's shape) -> seconds after they
# heal before the next fault of that kind may start (what the cluster needs to recover from
# them, so faults add up only as the contract allows).
RecoveryRule = Callable[[str, tuple[str, ...]], float]
# (kind, shape, rng) -> the faults one drawn fault stands for, as (shape, seconds after its
# start, duration); empty for a fault that is just itself (see Nemesis.group).
GroupRule = Callable[[str, str, random.Random], Sequence[tuple[str, float, float]]]


def generate(
    rng: random.Random,
    kinds: Sequence[str],
    shapes: Mapping[str, Sequence[str]],
    time_limit: float,
    fault_duration: tuple[float, float],
    quiet_period: tuple[float, float],
    duration_rule: DurationRule | None = None,
    recovery: RecoveryRule | None = None,
    group: GroupRule | None = None,
    recovers_as: Callable[[str], str] | None = None,
    weights: Mapping[str, float] | None = None,
) -> Schedule:
    """Plan faults of ``kinds`` over ``time_limit`` seconds, drawing only from ``rng``.

    ``shapes`` lists each kind's shapes (in the nemesis's order; a kind without shapes gets
    "default"). A fault whose shape needs longer than the time left is not planned, nor one
    that would start sooner than ``recovery(kind, shapes)`` seconds after the last fault of
    its kind (of those shapes) healed (or of a kind it ``recovers_as``: faults of both count
    against one recovery). A drawn fault that stands for a group (``group``) becomes the
    group's faults, all of its kind and sharing its seed (so they aim at the same
    partition), planned only if each of them starts in time (see :func:`_expand`). A kind of
    ``weights`` is drawn that many times as often as one without (a test without such kinds
    draws as it always did). The same arguments always give the same schedule.
    """
    faults: list[Fault] = []
    if not kinds:
        return Schedule((), time_limit)
    ready_at: dict[str, float] = {}  # kind -> when the cluster has recovered from its last fault

    def plan(kind: str, start: float) -> list[Fault]:
        key = recovers_as(kind) if recovers_as is not None else kind
        if start < ready_at.get(key, 0.0):
            return []
        fault = _plan(rng, len(faults), kind, shapes, start, fault_duration, time_limit, duration_rule)
        planned = [] if fault is None else [fault]
        if fault is not None and group is not None:
            planned = _expand(fault, group(kind, fault.shape, rng), time_limit, fault_duration[0])
        if planned and recovery is not None:
            # (a group that needs no recovery must not shorten its kind's wait for an earlier one)
            healed = max(f.end for f in planned) + recovery(kind, tuple(f.shape for f in planned))
            ready_at[key] = max(ready_at.get(key, 0.0), healed)
        return planned

    weighted = [(weights or {}).get(kind, 1.0) for kind in kinds]

    def draw_kind() -> str:
        if all(w == 1.0 for w in weighted):
            return rng.choice(list(kinds))
        return rng.choices(list(kinds), weighted)[0]

    t = rng.uniform(*quiet_period)  # let the workload warm up first
    while t + fault_duration[0] <= time_limit:
        firsts = plan(draw_kind(), t)
        if not firsts:
            t += rng.uniform(*quiet_period)
            continue
        faults.extend(firsts)
        first = firsts[0]
        group_end = max(f.end for f in firsts)
        others = [k for k in kinds if k != first.kind]
        if others and rng.random() < OVERLAP_PROBABILITY:
            start = t + rng.uniform(0, first.duration / 2)
            if start + fault_duration[0] <= time_limit:
                seconds = plan(rng.choice(others), start)
                faults.extend(seconds)
                group_end = max([group_end, *(f.end for f in seconds)])
        t = group_end + rng.uniform(*quiet_period)
    faults.sort(key=lambda f: (f.start, f.number))
    faults = [dataclasses.replace(f, number=n) for n, f in enumerate(faults)]
    return Schedule(tuple(faults), time_limit)


def _plan(
    rng: random.Random, number: int, kind: str, shapes: Mapping[str, Sequence[str]],
    start: float, fault_duration: tuple[float, float], time_limit: float,
    duration_rule: DurationRule | None,
) -> Fault | None:
    shape = rng.choice(list(shapes.get(kind) or ("default",)))
    drawn = rng.uniform(*fault_duration)
    seed = rng.getrandbits(32)
    if duration_rule is not None:
        required = duration_rule(kind, shape, drawn, rng)
        if required != drawn and start + required > time_limit:
            return None  # the shape needs longer than is left: it would not be what it says
        drawn = required
    duration = min(drawn, time_limit - start)
    return Fault(number, kind, shape, round(start, 3), round(duration, 3), seed)


def _expand(fault: Fault, steps: Sequence[tuple[str, float, float]], time_limit: float,
            shortest: float) -> list[Fault]:
    """A drawn fault as the group of faults it stands for (itself when it stands for none).

    What a group lines up is when its steps start against each other, so it is planned
    only if every step starts at least ``shortest`` seconds (the shortest fault) before the
    time limit (else it would not be what it says), and a step that would last past the
    limit is cut there, as a single fault is: by then what the group lined up has happened.
    Asking the whole group to end in time left the longest groups (a follower lagging past
    the replica lag time, then a failover) out of most tests: a group of 24 s fitted a 30 s
    test only if it began in its first 6 s, and a 20 s test never."""
    if not steps:
        return [fault]
    starts = [round(fault.start + at, 3) for _, at, _ in steps]
    if any(start + shortest > time_limit for start in starts):
        return []
    return [Fault(fault.number + i, fault.kind, shape, start, round(min(duration, time_limit - start), 3), fault.seed)
            for i, ((shape, _, duration), start) in enumerate(zip(steps, starts, strict=True))]


@dataclass
class ExecutedFault:
    """What happened to one planned fault: when it really started and stopped, and how."""

    fault: Fault
    started_at: float | None = None  # seconds after the workload started
    start: dict[str, Any] | None = None  # the nemesis's account (the history op's value)
    stopped_at: float | None = None
    stop: dict[str, Any] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.fault.to_dict(),
            "started_at": self.started_at, "start_result": self.start,
            "stopped_at": self.stopped_at, "stop_result": self.stop, "error": self.error,
        }


SAVE_INTERVAL = 1.0  # seconds between writes of schedule.json while the run goes, at least
SAVE_SHARE = 0.1  # of the time, at most, spent writing it (a long schedule is written less often)


@dataclass
class ScheduleLog:
    """schedule.json while the run goes: the plan, what was executed, and the final heal-all."""

    path: str | os.PathLike[str]
    seed: int
    schedule: Schedule
    executed: dict[int, ExecutedFault] = field(default_factory=dict)
    heal_all: dict[str, Any] | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)  # wall time: what writing costs
    _unsaved: bool = field(default=False, repr=False)
    _next_save: float = field(default=0.0, repr=False)

    def record(self, fault: Fault) -> ExecutedFault:
        return self.executed.setdefault(fault.number, ExecutedFault(fault))

    def changed(self) -> None:
        """Something was executed: write schedule.json if it is time to (see the module)."""
        self._unsaved = True
        if self.clock() >= self._next_save:
            self.save()

    def flush(self) -> None:
        """Write what :meth:`changed` has not written yet."""
        if self._unsaved:
            self.save()

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            **self.schedule.to_dict(),
            "executed": [self.executed[n].to_dict() for n in sorted(self.executed)],
            "heal_all": self.heal_all,
        }

    def save(self) -> None:
        """Rewrite schedule.json now, atomically."""
        started = self.clock()
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1, default=str)
            f.write("\n")
        os.replace(tmp, self.path)
        finished = self.clock()
        self._unsaved = False
        self._next_save = finished + max(SAVE_INTERVAL, (finished - started) / SAVE_SHARE)


def load_schedule(path: str | os.PathLike[str]) -> tuple[int | None, Schedule]:
    """Read the planned schedule (and the seed) back from a run's schedule.json."""
    from floodmark.run_dirs.rundir import read_json_file

    source = str(path)
    try:
        data = read_json_file(source, limit=MAX_SCHEDULE_BYTES, what="a schedule")
    except SourceError as e:
        raise ScheduleError(str(e)) from None
    schedule = Schedule.from_dict(data, source)
    seed = data.get("seed")
    if seed is not None:  # a seed a replay would compare with test.yaml's: never ignored when wrong
        try:
            _whole(seed, "seed")
        except ValueError as e:
            raise ScheduleError(f"{source}: {e}") from None
    return seed, schedule
