"""What a run directory replays: its configuration and fault schedule, read and checked.

``floodmark repro`` replays a run and ``floodmark shrink`` replays smaller versions of it;
both must start from exactly the test the run was, or say why they cannot. A run's
``test.yaml`` must state every setting (one cut short would replay with defaults, another
test) and, where ``digest.json`` recorded it, be the very file the run wrote (a setting
deleted or edited since, its variant or its rate, would replay another test, and the
replay's difference would be blamed on nondeterminism), its ``schedule.json`` must be there
and of the same seed, and every fault in it must be one the test can apply on its backend:
refused before anything runs, since a shrink would otherwise drop such a fault unseen.

``schedule.json`` is the one file a user may edit to replay another test (the ``run
--schedule`` format: a fault deleted, the time limit cut short, as one shrinks by hand): a
replay runs it as it now is, its time limit included, over test.yaml's (which only says what
the run ran, for the checkers). What it can tell of such an edit (a time limit that is not
test.yaml's, which every run writes into both; a fault that is not what the run records of
executing it) it says (:attr:`Replayed.edited`), so that a replay that differs is blamed on
the edit, not on nondeterminism. A fault whose plan and record disagree because the record
was changed (the history shows the plan is what the run started: :mod:`.schedule_sides`)
is no edit of what is replayed: said as a changed record (:attr:`Replayed.record_changed`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from floodmark.errors import UsageError, first_few
from floodmark.harness.code_version import code_version
from floodmark.harness.config import ConfigError, TestConfig, load_run_config, make_config
from floodmark.harness.run_identity import derived_run_id
from floodmark.harness.schedule import (
    FAULT_KEYS,
    MAX_SCHEDULE_BYTES,
    Schedule,
    ScheduleError,
    load_schedule,
)
from floodmark.inputs.sources import special_file_problem
from floodmark.run.schedule_sides import changed_sides, plan_departures, vouched_starts
from floodmark.run_dirs import run_digests, rundir


@dataclass(frozen=True)
class Replayed:
    """What a run directory replays, and how its schedule.json now differs from the test
    the run ran, in words (None: not as far as the files tell)."""

    config: TestConfig
    schedule: Schedule
    edited: str | None = None
    # Planned faults schedule.json records nothing of executing: added by hand since, or
    # never reached (a run that failed or was interrupted first), which the files cannot
    # tell apart; a replay that differs names them rather than blame nondeterminism alone.
    unrecorded: tuple[int, ...] = ()
    # Faults whose record of executing schedule.json changed since the run while their plan
    # is the run's (the history says so): the replay runs the run's own plan.
    record_changed: tuple[Any, ...] = ()

    def record_change(self) -> str | None:
        """What a changed record is, in words ("fault 0's record ..."), or None when none is."""
        if not self.record_changed:
            return None
        shown = first_few([str(n)[:20] for n in self.record_changed], EDITS_SHOWN)
        many = len(self.record_changed) > 1
        return (f"{rundir.SCHEDULE}'s record of executing fault{'s' if many else ''} {shown} changed since the run; "
                f"{'their plans are' if many else 'its plan is'} the run's (as the history records it), and the "
                "plan is what is replayed")

    def unrecorded_cause(self) -> str:
        """The first cause a replay that differs may have, when some faults are unrecorded
        ("fault 9 in schedule.json with no record of the run's (added since?), or "); empty
        when none is."""
        if not self.unrecorded:
            return ""
        shown = first_few([str(n) for n in self.unrecorded], EDITS_SHOWN)
        return (f"fault{'s' if len(self.unrecorded) > 1 else ''} {shown} in {rundir.SCHEDULE} with no record of "
                "the run's (added since?), or ")


def replayed_test(run: rundir.RunDir) -> Replayed:
    """The configuration and fault schedule a run directory replays (repro, shrink); a
    UsageError naming the file when they cannot be: a test.yaml cut short (or, by its
    digest, edited since the run), no seed, a schedule.json missing, of another seed, or
    holding a fault the test cannot apply (refused before anything runs: shrinking would
    otherwise drop it unseen). A time limit schedule.json states is the replay's (see the
    module)."""
    from floodmark.run.assemble import make_nemeses, refusal

    _refuse_unless_a_file(run.config)
    try:
        config = load_run_config(run.config)
        if config.seed is None:
            raise UsageError(f"{run.config}: no seed recorded; cannot reproduce")
        _refuse_an_edited_configuration(run)
        if not os.path.lexists(run.schedule):
            raise UsageError(f"{run.schedule}: no such file: every run records its fault schedule there, and "
                             "without it the replay could be of another test; to run the schedule the seed "
                             f"draws, floodmark run -f {run.config}")
        _refuse_unless_a_file(run.schedule)
        seed, schedule = load_schedule(run.schedule)
        if seed is not None and seed != config.seed:
            raise UsageError(f"{run.schedule}: seed {seed} differs from test.yaml's seed {config.seed}")
        edits, unrecorded, record_changed = _faults_edited(run, schedule)
        # (A fault with no record is named on its own, as the likely cause: added since.)
        if not edits and not unrecorded and _other_faults_than_the_run_s(config, schedule):
            vouched = _config_vouched(run)  # else test.yaml itself may be what changed
            edits.append("its faults are not the ones the run's id (in test.yaml) was derived from: in another "
                         "order, or edited alike in the record of executing them"
                         + ("" if vouched else f" (or {rundir.CONFIG} edited: no digest says it is the run's)"))
        if schedule.time_limit_stated and schedule.time_limit != config.time_limit:
            make_config({"time_limit": schedule.time_limit}, str(run.schedule))  # one no test may have: refused
            edits.insert(0, f"time limit {schedule.time_limit:g} s, test.yaml's {config.time_limit:g} s")
            config = config.replace(time_limit=schedule.time_limit)
        schedule.check_starts_within(config.time_limit, str(run.schedule))
    except (ConfigError, ScheduleError) as e:
        raise UsageError(str(e)) from None
    problem = refusal(config.cluster, schedule, make_nemeses(config), config.nodes, config.zk_session_timeout,
                      config.time_limit, config.replication_factor)
    if problem is not None:
        raise UsageError(f"{run.schedule}: {problem}")
    return Replayed(config, schedule, "; ".join(edits) or None, unrecorded, record_changed)


EDITS_SHOWN = 3  # faults named in an edit's description; the rest counted


def _faults_edited(run: rundir.RunDir, schedule: Schedule) -> tuple[list[str], tuple[int, ...], tuple[Any, ...]]:
    """How the schedule's faults differ from what schedule.json records of executing them
    (a fault changed or removed since), in words; the planned faults it records nothing of
    (see :class:`Replayed`); and the faults whose record alone changed (the plan is the
    run's, see :mod:`.schedule_sides`). Empty when they do not differ, or it records nothing
    to compare with."""
    try:
        data = rundir.read_json_file(run.schedule, limit=MAX_SCHEDULE_BYTES, what="a schedule")
    except (OSError, ValueError):
        return [], (), ()  # (read a moment ago: the replay runs what was read then)
    executed = data.get("executed") if isinstance(data, dict) else None
    if not isinstance(executed, list) or not all(isinstance(e, dict) for e in executed):
        return [], (), ()
    planned = {fault.number: fault.to_dict() for fault in schedule.faults}
    # (A number edited into a list or an object is no key: named as its text, as changed.)
    ran: dict[Any, dict[str, Any]] = {_key(e.get("number")): {key: e.get(key) for key in FAULT_KEYS}
                                      for e in executed}
    # (A planned fault it records nothing of may be one added since, or one the run never
    # reached: a run that failed, or was interrupted, before it was due. Not told apart.)
    unrecorded = tuple(n for n in planned if n not in ran)
    changed = [n for n in ran if n not in planned or planned[n] != ran[n]]
    starts = vouched_starts(run)
    # (Plan and record edited alike agree: the history may still show the plan edited.)
    alike = [n for n in plan_departures(starts, planned, ran.keys()) if n not in changed]
    if not changed and not alike:
        return [], unrecorded, ()
    sides = changed_sides(starts, {n: (planned.get(n), ran[n]) for n in changed})
    record_changed = tuple(n for n in changed if sides[n] == "record")
    edits = []
    edited = [n for n in changed if sides[n] == "plan"] + alike
    if edited:
        shown = first_few([str(n)[:20] for n in edited], EDITS_SHOWN)
        edits.append(f"fault{'s' if len(edited) > 1 else ''} {shown} not as the run executed")
    # (A recorded fault the plan lacks, with no history to tell: taken out of the plan, or
    # its record changed; not guessed either way.)
    untold = [n for n in changed if sides[n] is None]
    if untold:
        shown = first_few([str(n)[:20] for n in untold], EDITS_SHOWN)
        many = len(untold) > 1
        edits.append(f"fault{'s' if many else ''} {shown} not as its record of executing {'them' if many else 'it'} "
                     "says: its plan or that record changed since the run")
    return edits, unrecorded, record_changed


def _other_faults_than_the_run_s(config: TestConfig, schedule: Schedule) -> bool:
    """Whether a simulated run's id, a digest of its settings and its plan as the run had it
    (:mod:`floodmark.harness.run_identity`), is not that of ``schedule``'s faults: a plan
    edited where no record disagrees (its faults reordered, a start or seed edited alike in
    plan and record), whose replay differs at least by the id in its ``started`` events.
    (The time limit is left as test.yaml's: an edited one is said on its own.) Told only on
    the commit that ran it: not known otherwise."""
    from floodmark.run.assemble import deterministic

    if config.run_id is None or not deterministic(config):
        return False  # (a real run's id is random: nothing of its plan)
    if config.code_version != code_version():
        # Another commit may derive ids otherwise (a setting added since): the replay that
        # differs says the code changed, which is then as likely a cause.
        return False
    return derived_run_id(config, Schedule(schedule.faults, config.time_limit)) != config.run_id


def _key(number: Any) -> Any:
    """An executed fault's number as a key: itself, or its text when it cannot be one."""
    return str(number) if isinstance(number, list | dict) else number


def _refuse_unless_a_file(path: os.PathLike[str]) -> None:
    """A UsageError, at once, when a file the run wrote is a FIFO or a device: no run wrote
    it, and reading it would wait for a writer."""
    problem = special_file_problem(path)
    if problem is not None:
        raise UsageError(f"{path}: {problem}: a run writes its {os.path.basename(path)} as a regular file")


def _config_vouched(run: rundir.RunDir) -> bool:
    """Whether digest.json records test.yaml (read a moment ago, as it records it)."""
    try:
        saved = run_digests.load_digest(run)
    except run_digests.DigestError:
        return False
    return saved is not None and saved.get(rundir.CONFIG) is not None


def _refuse_an_edited_configuration(run: rundir.RunDir) -> None:
    """A UsageError when the run's digest.json records its test.yaml and the file is no longer
    that one. (A digest that cannot be read is repro's to name; one written before test.yaml
    was recorded says nothing of it.)"""
    try:
        saved = run_digests.load_digest(run)
    except run_digests.DigestError:
        return
    recorded = None if saved is None else saved.get(rundir.CONFIG)
    if recorded is None:
        return
    try:
        now = run_digests.config_digest(run)
    except OSError:
        return  # (read a moment ago; gone since: the replay's own reading says so)
    if now is not None and now != recorded:
        raise UsageError(f"{run.config}: differs from what {rundir.DIGEST} recorded at the end of the run, so "
                         f"a replay of it would be of another test; to run it as it is now: floodmark run -f "
                         f"{run.config} --schedule {run.schedule}")
