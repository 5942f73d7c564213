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

Where plan and record agree, both may have been edited alike (one search-and-replace over
the file): the history still says what the run started, so a planned fault it started
otherwise, in a key it records, or a fault it started that neither plan nor record still
holds, is a plan edited since the run (:func:`plan_departures`), not a replay to blame on
nondeterminism.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

from floodmark.contracts.history import HistoryError, read_history
from floodmark.run_dirs import run_digests, rundir

Side = Literal["plan", "record"]
Starts = dict[Any, dict[str, Any]]  # fault number -> what its start invocation says


def changed_sides(starts: Starts | None, faults: Mapping[Any, tuple[dict[str, Any] | None, dict[str, Any]]]
                  ) -> dict[Any, Side | None]:
    """For each fault number, its (plan, record) as schedule.json has them (plan None: the
    plan has no such fault), which side changed since the run: "plan", "record", or None
    when the history cannot tell (``starts``: :func:`vouched_starts`)."""
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


def plan_departures(starts: Starts | None, planned: Mapping[int, dict[str, Any]],
                    recorded: Collection[Any]) -> list[int]:
    """The fault numbers whose plan the history shows edited though no record disagrees:
    a planned fault started otherwise in a key the history records, or a fault the run
    started that neither the plan nor the record (``recorded``: its numbers) still holds.
    Empty when no digest vouches for the history (``starts``: :func:`vouched_starts`)."""
    if starts is None:
        return []
    departed = [number for number, plan in planned.items()
                if number in starts and any(plan.get(key) != said for key, said in starts[number].items())]
    departed += [number for number in starts if number not in planned and number not in recorded]
    return departed


def _side(plan: dict[str, Any], record: dict[str, Any], start: dict[str, Any]) -> Side | None:
    if any(plan.get(key) != said for key, said in start.items()):
        # The plan is not what the run started: on a key it disagrees with its record on,
        # or on one both were edited alike in.
        return "plan"
    differing = [key for key in plan.keys() | record.keys() if plan.get(key) != record.get(key)]
    if all(key in start for key in differing):
        return "record"  # the plan is what the run started, on every key they disagree on
    return None


def vouched_starts(run: rundir.RunDir) -> Starts | None:
    """Each fault's start as the history records it, by number; None when no digest vouches
    for the history (or it cannot be read): then it says nothing of which side changed."""
    try:
        saved = run_digests.load_digest(run)
        if saved is None or saved.get(rundir.HISTORY) != run_digests.file_digest(run.history):
            return None
        ops = read_history(run.history, check_dense=False)
    except (OSError, ValueError, HistoryError, run_digests.DigestError):
        return None
    starts: Starts = {}
    for op in ops:
        value = op.value
        if (op.process == "nemesis" and op.type == "invoke" and op.f.startswith("start-")
                and isinstance(value, dict) and type(value.get("fault")) is int):
            said = {"kind": op.f.removeprefix("start-")}
            said.update((key, value[key]) for key in ("shape", "duration") if key in value)
            starts.setdefault(value["fault"], said)
    return starts

