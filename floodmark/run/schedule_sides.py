"""Which side of a run's schedule.json changed since the run: its plan, or its record.

schedule.json holds the plan (``faults``: what a replay runs) and, written as the run went,
its record of what the run executed (``executed``: each fault again, with what the run did
of it). Where the two disagree on a fault, one of them was changed since the run, and which
one matters: an edited plan replays another test (a replay that differs is the edit's doing,
and a shrink must not start from it), while a changed record leaves the plan the run's own,
replayed as the run ran it.

The history says which, where it can: the run wrote it as it went, and digest.json vouches
that it is that file; each fault's start is a nemesis invocation naming the fault's number,
its kind (in ``f``: ``start-<kind>``), shape and duration. A key on which plan and record
disagree and which the history records is decided by it; a fault whose disagreeing keys
the history all decides, each for the plan, had its record changed, and one of them decided
for the record had its plan edited. A fault recorded as executed that the plan lacks was
taken out of the plan if the history started it (every fault the run records executing, it
started so), else its record is not the run's. Otherwise (a start or seed changed, which the history
does not record; no digest vouching for the history, as on real clusters) which side
changed is not known, and is said so, never guessed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal

from floodmark.contracts.history import HistoryError, read_history
from floodmark.run_dirs import run_digests, rundir

Side = Literal["plan", "record"]


def changed_sides(run: rundir.RunDir, faults: Mapping[Any, tuple[dict[str, Any] | None, dict[str, Any]]]
                  ) -> dict[Any, Side | None]:
    """For each fault number, its (plan, record) as schedule.json has them (plan None: the
    plan has no such fault), which side changed since the run: "plan", "record", or None
    when the history cannot tell."""
    starts = _vouched_starts(run)
    sides: dict[Any, Side | None] = {}
    for number, (plan, record) in faults.items():
        if starts is None:
            sides[number] = None
        elif plan is None:
            # Every fault the run recorded executing it started, with its number, in the
            # history: a recorded fault the history never started is a changed record; one it
            # started was taken out of the plan.
            sides[number] = "plan" if type(number) is int and number in starts else "record"
        else:
            start = starts.get(number) if type(number) is int else None
            sides[number] = None if start is None else _side(plan, record, start)
    return sides


def _side(plan: dict[str, Any], record: dict[str, Any], start: dict[str, Any]) -> Side | None:
    differing = [key for key in plan.keys() | record.keys() if plan.get(key) != record.get(key)]
    if any(key in start and start[key] != plan.get(key) for key in differing):
        return "plan"  # the plan is not what the run started
    if all(key in start for key in differing):
        return "record"  # the plan is what the run started, on every key they disagree on
    return None


def _vouched_starts(run: rundir.RunDir) -> dict[Any, dict[str, Any]] | None:
    """Each fault's start as the history records it, by number; None when no digest vouches
    for the history (or it cannot be read): then it says nothing of which side changed."""
    try:
        saved = run_digests.load_digest(run)
        if saved is None or saved.get(rundir.HISTORY) != _sha256(run.history):
            return None
        ops = read_history(run.history, check_dense=False)
    except (OSError, ValueError, HistoryError, run_digests.DigestError):
        return None
    starts: dict[Any, dict[str, Any]] = {}
    for op in ops:
        value = op.value
        if (op.process == "nemesis" and op.type == "invoke" and op.f.startswith("start-")
                and isinstance(value, dict) and type(value.get("fault")) is int):
            said = {"kind": op.f.removeprefix("start-")}
            said.update((key, value[key]) for key in ("shape", "duration") if key in value)
            starts.setdefault(value["fault"], said)
    return starts


def _sha256(path: Any) -> str:
    one = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            one.update(block)
    return one.hexdigest()
