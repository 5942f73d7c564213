"""A run directory that does not hold a whole run, and why no verdict on it may be valid.

A run can stop before its history is whole in three ways, and each leaves its mark:

- **Interrupted** (Ctrl-C, SIGTERM): the runner writes ``interrupted.json`` at once, before
  the teardown, saying what the run was doing and how far it had got (:class:`Interruption`).
- **Being made**: from the moment its directory exists until its history and node events are
  whole, a run names its maker in ``.maker`` (:func:`claim_run`, :func:`release_run`), the
  harness process's :mod:`owner token <floodmark.owners>`.
- **Abandoned**: a harness killed outright (SIGKILL, the OOM killer, a crash of the
  interpreter) writes nothing more; its ``.maker`` stays, naming a process that is gone.

Readers of the store (``check``, the report, the results browser, ``analyze``) ask
:func:`unfinished_reason` and hold such a run at unknown at best, giving that reason: its
history stops early (no final drain, faults cut short), so it cannot show that nothing was
lost, however clean the part it holds. Nothing is deleted: what was recorded up to the end
can still be read, and a seed can be run again.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Any

from floodmark.errors import SourceError
from floodmark.inputs.output_paths import replace_file
from floodmark.inputs.sources import read_source, special_file_problem
from floodmark.owners import on_this_host, owner_alive, owner_token
from floodmark.run_dirs.rundir import RunDir, read_object_record

# Interruption (interrupted.json): written by the runner, atomically, as soon as a Ctrl-C or
# SIGTERM stops a run, before the teardown (which a second interrupt may cut short).

MAX_INTERRUPTION_BYTES = 1 << 16  # a few fields; a larger file is not one


class InterruptionError(ValueError):
    """An interrupted.json that cannot be read: names the file and what is wrong."""


TEARDOWN = "the teardown"  # the step after the history is whole


@dataclass(frozen=True)
class Interruption:
    """Where a run was when an interrupt stopped it.

    ``step``: what it was doing ("starting the cluster", "the fault phase", "healing",
    "waiting for recovery", "the final reads", "the teardown"); ``seconds``: the history's
    clock (seconds since it began, virtual on the simulator) at the interrupt;
    ``fault_phase_seconds``: how far into the fault phase, if it had begun; ``time_limit``:
    the fault phase's planned length; ``signal``: SIGINT (Ctrl-C) or SIGTERM."""

    step: str
    seconds: float
    fault_phase_seconds: float | None
    time_limit: float
    signal: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line for a verdict: interrupted, where, and what that means for the verdict."""
        where = (f"{self.fault_phase_seconds:.1f} s into its {self.time_limit:g} s"
                 if self.fault_phase_seconds is not None and self.step == "the fault phase"
                 else f"{self.seconds:.1f} s into the history")
        lost = ("its node events may not all have been collected" if self.step == TEARDOWN
                else "the history stops there (no final drain)")
        return f"interrupted ({self.signal}) during {self.step}, {where}: {lost}, so the run cannot be judged valid"


def write_interruption(run: RunDir, interruption: Interruption) -> None:
    """Record in the run directory, atomically, that the run was interrupted and where."""
    replace_file(run.interrupted, lambda f: f.write(json.dumps(interruption.to_dict(), indent=1) + "\n"))


def read_interruption(run: RunDir) -> Interruption | None:
    """The run's interruption, or None when it was not interrupted (no interrupted.json);
    InterruptionError naming the file when it is there but is not one."""
    path = run.interrupted
    data = read_object_record(path, MAX_INTERRUPTION_BYTES, "an interruption record", InterruptionError)
    if data is None:
        return None
    fields = {f.name for f in dataclasses.fields(Interruption)}
    unknown = sorted(str(k)[:40] for k in data if k not in fields)
    if unknown:
        raise InterruptionError(f"{path}: not an interruption record (unknown key {unknown[0]!r})")
    for name in sorted(fields):
        if name not in data:
            raise InterruptionError(f"{path}: not an interruption record (no {name!r})")
    for name in ("step", "signal"):
        if not isinstance(data[name], str) or not 0 < len(data[name]) <= 100:
            raise InterruptionError(f"{path}: {name}: expected a short text")
    for name in ("seconds", "fault_phase_seconds", "time_limit"):
        value = data[name]
        if value is None and name == "fault_phase_seconds":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
            raise InterruptionError(f"{path}: {name}: expected a number of seconds, at least 0")
    return Interruption(data["step"], float(data["seconds"]),
                        None if data["fault_phase_seconds"] is None else float(data["fault_phase_seconds"]),
                        float(data["time_limit"]), data["signal"])


# The maker (.maker): the owner token of the harness process making the run.

MAX_MAKER_BYTES = 1024  # host:pid:start-time; a larger file is no token


def claim_run(run: RunDir) -> None:
    """Name this process as the run's maker, until :func:`release_run`."""
    replace_file(run.maker, lambda f: f.write(owner_token() + "\n"))


def release_run(run: RunDir) -> None:
    """The run's history and node events are whole: it no longer needs its maker."""
    run.maker.unlink(missing_ok=True)


def unfinished_reason(run: RunDir) -> str | None:
    """None for a whole run; otherwise, in one line, why no verdict on it may be valid: where
    an interrupt stopped it, that it is still being made, or that its maker was killed before
    finishing it (or, when the record saying so cannot be read, that it is marked so all the
    same). For ``check``, the report, the results browser and ``analyze``: such a run is
    unknown at best, for this reason."""
    try:
        interruption = read_interruption(run)
    except InterruptionError as e:
        return f"{e}: the run is marked interrupted, so its history may stop early and it cannot be judged valid"
    if interruption is not None:
        return interruption.describe()
    return _maker_reason(run)


def _maker_reason(run: RunDir) -> str | None:
    path = run.maker
    if not os.path.lexists(path):
        return None
    unreadable = f"{path}: {{}}: the run is marked as being made, so its history may stop early and it cannot be judged valid"
    problem = special_file_problem(path)
    if problem is not None:
        return unreadable.format(problem)
    try:
        token = read_source(str(path), limit=MAX_MAKER_BYTES).decode("utf-8").strip()
    except (SourceError, UnicodeDecodeError) as e:
        return unreadable.format(str(e).removeprefix(f"{path}: ") if isinstance(e, SourceError) else "not text")
    if token.count(":") < 2 or not token.isprintable():
        return unreadable.format("not the token of a harness process (host:pid:start-time)")
    if not on_this_host(token):
        return (f"being made by a harness on another machine ({token}), or left unfinished there: "
                "its history may stop early, so the run cannot be judged valid")
    if owner_alive(token):
        return f"still being made by {token}: its history is not whole yet, so the run cannot be judged valid"
    return (f"its harness ({token}) ended before finishing it (killed or crashed): the history stops where it "
            "was cut off (no final drain), so the run cannot be judged valid")
