"""The checker registry: which checkers exist, which judge which workload, and how to run them.

The harness runner, the report, ``floodmark check`` and the Spark pipeline all judge runs
through :func:`check_run` (a run directory) or :func:`check_history` (ops already in
memory). A checker that crashes on a malformed history does not take the others down: its
verdict becomes "unknown" with the error recorded (and kept as the result's ``cause``, so a
caller such as ``floodmark check`` can act on its type), because a checker that could not
decide must never pass as valid.
"""

from __future__ import annotations

import gc
import os
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floodmark.checkers.api import Checker, CheckInput, NotJudgeable
from floodmark.checkers.convergence import records_the_wait
from floodmark.checkers.run_partitions import partition_bounds
from floodmark.contracts.history import Op, OpsRead
from floodmark.contracts.results import (
    CheckerResult,
    PreviousResults,
    build_results,
    mark_interrupted,
    merge_validity,
    previous_results,
    write_results,
)
from floodmark.errors import UsageError

if TYPE_CHECKING:
    from floodmark.contracts.node_events import NodeEvent
    from floodmark.contracts.run_config import TestConfig
    from floodmark.run_dirs.rundir import RunDir

CHECKER_NAMES: tuple[str, ...] = ("durability", "hw", "leader", "invariants", "queue", "linearizable", "convergence",
                                   "stats")

_DEFAULTS = {
    "queue": ("durability", "queue", "hw", "leader", "invariants", "stats"),
    "log-lin": ("linearizable", "hw", "leader", "invariants", "stats"),
}


def make_checker(name: str, **linearizable_options: Any) -> Checker:
    """A checker by name; ``linearizable_options`` (model, initial, ...) go to the linearizable one.

    Each checker's module is imported when it is asked for, so judging a register history
    does not pay for loading the queue, durability and white-box checkers."""
    if name == "durability":
        from floodmark.checkers.durability import DurabilityChecker

        return DurabilityChecker()
    if name == "hw":
        from floodmark.checkers.white_box.hw import HighWatermarkChecker

        return HighWatermarkChecker()
    if name == "leader":
        from floodmark.checkers.white_box.leader import LeaderChecker

        return LeaderChecker()
    if name == "invariants":
        from floodmark.checkers.white_box.invariants import InvariantsChecker

        return InvariantsChecker()
    if name == "queue":
        from floodmark.checkers.queue import QueueChecker

        return QueueChecker()
    if name == "linearizable":
        from floodmark.checkers.linearizability.checker import LinearizableChecker

        return LinearizableChecker(**linearizable_options)
    if name == "convergence":
        from floodmark.checkers.convergence import ConvergenceChecker

        return ConvergenceChecker()
    if name == "stats":
        from floodmark.checkers.stats import StatsChecker

        return StatsChecker()
    raise ValueError(f"unknown checker {name!r}; choose from: {', '.join(CHECKER_NAMES)}")


def default_checker_names(workload: str | None, ops: Sequence[Op] = (), cluster: str | None = None,
                          ) -> tuple[str, ...]:
    """A workload's checkers; with ``ops``, also those that judge what the history records
    beyond the workload's ops (the runner's wait for whole ISRs after healing). A run on
    ``cluster`` sim always recorded that wait after its final reads, so its convergence is
    judged even when the history lacks it (cut at a line's end, or the op removed): unknown,
    saying so, never left out without a word."""
    names = _DEFAULTS.get(workload or "", ("linearizable", "stats"))
    if workload in _DEFAULTS and (cluster == "sim" or records_the_wait(ops)):
        names = (*names[:-1], "convergence", names[-1])  # (stats stays last)
    return names


def infer_workload(ops: Sequence[Op], model: str) -> str | None:
    """The workload a history's ops are of, when nothing states it: ``queue`` for sends,
    polls or drains, ``log-lin`` for a history of the ``log`` model, else None (judged for
    linearizability alone, as a foreign register history is)."""
    if any(op.f in ("send", "poll", "drain") for op in ops):
        return "queue"
    return "log-lin" if model == "log" else None


def checker_names_for(config: TestConfig | None, ops: Sequence[Op], model: str | None = None) -> tuple[str, ...]:
    """The checkers a run is judged by when none are asked for (``check`` and ``analyze``
    alike): its workload's, or, for a run that states no configuration, those of the workload
    its ops suggest (``model``: the linearizability model asked for, if any), as a history
    file is judged."""
    if config is not None:
        return default_checker_names(config.workload, ops, config.cluster)
    from floodmark.checkers.linearizability.checker import infer_model

    return default_checker_names(infer_workload(ops, model or infer_model(list(ops))), ops)


def refuse_unused_model(model: str | None, checkers: Sequence[str | Checker], what: str) -> None:
    """A UsageError if a ``model`` is asked for but none of ``checkers`` judges by one (it
    would be ignored without a word): only the linearizable checker does, for log-lin runs
    and register, kv, mutex or log histories. A queue workload's sends and polls are judged
    by its own checkers (durability, queue, ...), which no model describes. ``what``: the
    input, for the message."""
    names = [c if isinstance(c, str) else c.name for c in checkers]
    if model is None or "linearizable" in names:
        return
    raise UsageError(f"{what}, judged by {', '.join(names)}, none of which takes a model: --model applies to the "
                     "linearizable checker, which judges log-lin runs and register, kv, mutex and log histories")


def default_checkers(workload: str) -> list[Checker]:
    """The checkers that judge a workload's runs: the queue workload gets durability, queue,
    hw, leader, invariants and stats; ``log-lin`` gets linearizable (log model), hw, leader, invariants and stats;
    anything else (e.g. a foreign register history) linearizable and stats."""
    return [make_checker(n) for n in default_checker_names(workload)]


def run_checkers(checkers: Sequence[Checker], run: CheckInput) -> dict[str, CheckerResult]:
    results: dict[str, CheckerResult] = {}
    # Checkers allocate millions of small acyclic objects; the cyclic garbage collector would
    # otherwise rescan the whole history again and again (it tripled checking time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        _run_each(checkers, run, results)
    finally:
        if collecting:
            gc.enable()
    return results


def _run_each(checkers: Sequence[Checker], run: CheckInput, results: dict[str, CheckerResult]) -> None:
    for checker in checkers:
        try:
            results[checker.name] = checker.check(run)
        except NotJudgeable as e:  # a history of another kind: unknown, and why, without a crash's trace
            results[checker.name] = CheckerResult(
                "unknown", stats={"unjudged_because": f"the history does not fit the checker's model: {e}"}, cause=e)
        except Exception as e:  # noqa: BLE001 - one broken checker must not hide the others' verdicts
            results[checker.name] = CheckerResult(
                "unknown", stats={"error": f"{type(e).__name__}: {e}",
                                  "traceback": traceback.format_exc(limit=5)}, cause=e)


def _resolve(checkers: Sequence[str | Checker] | None, config: TestConfig | None, ops: Sequence[Op],
             **options: Any) -> list[Checker]:
    if checkers is None:
        workload, cluster = (config.workload, config.cluster) if config is not None else (None, None)
        return [make_checker(n, **options) if n == "linearizable" else make_checker(n)
                for n in default_checker_names(workload, ops, cluster)]
    return [make_checker(c, **options) if isinstance(c, str) and c == "linearizable"
            else make_checker(c) if isinstance(c, str) else c for c in checkers]


def judge_history(
    ops: list[Op],
    events: dict[str, list[NodeEvent]] | None = None,
    config: TestConfig | None = None,
    *,
    checkers: Sequence[str | Checker] | None = None,
    time_limit: float | None = None,
    whole_file_gap: str | None = None,
    cut_short: frozenset[str] = frozenset(),
    files_recorded: bool = True,
    history_torn_tail: str | None = None,
    **linearizable_options: Any,
) -> dict[str, CheckerResult]:
    """Each checker's judgement of a history (and node events) in memory.

    ``config`` is the run's configuration, or None for a history that states none (then the
    checkers assume nothing it would have said, and the workload's checkers are not known).
    ``whole_file_gap``: see :class:`CheckInput` (for events that are a part of each file);
    ``cut_short``: the nodes whose event file ends in a line cut short, ``files_recorded``:
    whether the files are known to be those the run wrote (both: see :class:`CheckInput`).
    ``history_torn_tail``: where the history's last line was cut short and left unread (a
    :class:`~floodmark.contracts.history.TornTail`'s ``where``), when ``ops`` are not the
    :class:`OpsRead` that knows it (Spark's re-check rebuilds them from the store): no
    checker is then valid (:func:`hold_short_of_valid`).
    """
    run = CheckInput(ops, events or {}, config, time_limit, whole_file_gap, cut_short, files_recorded)
    resolved = _resolve(checkers, config, ops, **linearizable_options)
    judged = run_checkers(resolved, run)
    torn = ops.torn_tail if isinstance(ops, OpsRead) else None
    unread = torn.where if torn is not None else history_torn_tail
    if unread is not None:
        hold_short_of_valid(judged, (f"{unread}: the last line, cut short, was not read, and what it "
                                     "recorded could be an anomaly",))
    return judged


# Checkers that describe a history and judge nothing in it: held to no verdict.
DESCRIPTIVE_CHECKERS = frozenset({"stats"})


def hold_short_of_valid(judged: dict[str, CheckerResult], unjudged: Sequence[str]) -> None:
    """Make every judging checker of ``judged`` unknown at best, because ``unjudged`` (reasons,
    each a phrase) names what the history holds that no checker read or judged: an anomaly
    found stands, but nothing else is vouched for. Each reason goes first in the checker's
    ``unjudged_because``."""
    for name, result in judged.items():
        if name in DESCRIPTIVE_CHECKERS or result.valid is False:
            continue
        result.valid = "unknown"
        before = result.stats.get("unjudged_because")
        result.stats["unjudged_because"] = "; ".join((*unjudged, *([before] if isinstance(before, str) else [])))


def results_of(judged: dict[str, CheckerResult], config: TestConfig | None) -> dict[str, Any]:
    """The results dict (``results.json``) of judgements of a run with ``config``."""
    if config is None:
        return build_results(judged)
    return build_results(judged, seed=config.seed, config=config.to_dict(), variant=config.variant)


def check_history(
    ops: list[Op],
    events: dict[str, list[NodeEvent]] | None = None,
    config: TestConfig | None = None,
    *,
    checkers: Sequence[str | Checker] | None = None,
    time_limit: float | None = None,
    whole_file_gap: str | None = None,
    cut_short: frozenset[str] = frozenset(),
    files_recorded: bool = True,
    history_torn_tail: str | None = None,
    **linearizable_options: Any,
) -> dict[str, Any]:
    """Judge a history (and node events) in memory; returns the results dict."""
    judged = judge_history(ops, events, config, checkers=checkers, time_limit=time_limit,
                           whole_file_gap=whole_file_gap, cut_short=cut_short, files_recorded=files_recorded,
                           history_torn_tail=history_torn_tail, **linearizable_options)
    return results_of(judged, config)


# Told one line about what the judgement rests on that a reader would otherwise not know (a
# torn last line left unread, ...); ``floodmark check`` prints it on stderr.
Note = Callable[[str], None]


def note_unread(results: dict[str, Any], ops: Sequence[Op], note: Note | None = None) -> None:
    """Record in ``results`` (its ``notes``) what the history's reader left out, and tell ``note``."""
    torn = ops.torn_tail if isinstance(ops, OpsRead) else None
    if torn is not None:
        add_note(results, str(torn), note)


def add_note(results: dict[str, Any], text: str, note: Note | None = None) -> None:
    results.setdefault("notes", []).append(text)
    if note is not None:
        note(text)


def check_run(
    run_dir: Path | str | os.PathLike[str],
    *,
    checkers: Sequence[str | Checker] | None = None,
    time_limit: float | None = None,
    ops: list[Op] | None = None,
    note: Note | None = None,
    **linearizable_options: Any,
) -> dict[str, Any]:
    """Judge a run directory and write (or update) its ``results.json``.

    ``ops``: the run's history as :func:`~floodmark.contracts.history.read_history` gives it with
    ``check_pairs``, when the caller has read it already (the runner shares it with the fault
    coverage: reading a history back costs more than most checkers).

    The run's ``test.yaml`` is its configuration; a malformed or unreadable one, or one
    naming a variant or fault kind no test may, raises
    :class:`~floodmark.contracts.run_config.ConfigError` naming the file and the key. A run without
    one is judged as a history file is, by the workload its ops suggest, and a note says so. With an explicit subset of ``checkers``, the verdicts of other checkers already in
    ``results.json`` are kept and the overall verdict is merged over all of them, but only
    while the history and node events are still the ones those verdicts judged (the
    ``judged_files`` digests each check records in ``results.json``; for a results file
    written before those were, the run's ``digest.json``): otherwise (they changed, or
    nothing says what they were) those checkers are unknown, each with the reason as its
    ``stats["error"]``, and a note says why.
    An old ``results.json`` that cannot be read, or is not shaped as this version writes
    it, keeps nothing: it is replaced, and a note says so. ``note`` is told, one line each,
    what else the judgement rests on (a torn last line of the history left unread, an old
    results file replaced); ``results.json`` keeps the same lines as ``notes``. A results
    file that cannot be written is a UsageError naming it.
    """
    from floodmark.contracts.history import read_history
    from floodmark.contracts.node_events import events_dir_problem, read_events_dir
    from floodmark.contracts.run_config import read_run_config
    from floodmark.contracts.run_ids import StatedRun
    from floodmark.run_dirs.rundir import RunDir
    from floodmark.run_dirs.unfinished_runs import unfinished_reason

    run = RunDir(Path(run_dir))
    if run.results.is_dir():  # where the verdict would go: refused before the checkers run for nothing
        raise UsageError(f"{run.results}: is a directory, not a file: the results cannot be written")
    config = read_run_config(run.config)
    if config is not None:
        refuse_unused_model(linearizable_options.get("model"), checkers or default_checker_names(config.workload),
                            f"{run.path}: a {config.workload} run")
    unlisted = events_dir_problem(run.events)
    if unlisted is not None:  # named as it is, not as node events that differ from the digest's
        raise unlisted
    files = _digest_of(run)
    _refuse_if_changed(run, files)
    torn: list[str] = []
    cut_short: set[str] = set()
    collecting = gc.isenabled()
    gc.disable()  # (what is read is acyclic: the collector would rescan the history at every event)
    try:
        if ops is None:
            ops = read_history(run.history, check_pairs=True)
        events = read_events_dir(run.events, torn, topics=None if config is None else config.topic_names,
                                 partitions=partition_bounds(config, ops), cut_short=cut_short,
                                 run=None if config is None else StatedRun(config.run_id, str(run.config)))
    finally:
        if collecting:
            gc.enable()
    if time_limit is None and config is not None:
        time_limit = config.check_time_limit
    judged = "judged by the checkers asked for"
    if config is None and checkers is None:  # judged as a history file is: by what its ops are
        from floodmark.checkers.linearizability.checker import infer_model

        inferred = infer_workload(ops, linearizable_options.get("model") or infer_model(ops))
        checkers = list(checker_names_for(None, ops, linearizable_options.get("model")))
        refuse_unused_model(linearizable_options.get("model"), checkers,
                            f"{run.path}: a run whose ops are a {inferred} history's")
        judged = (f"judged as a {inferred} history" if inferred else "judged for linearizability alone") + \
            ", as its ops suggest"
    # (a digest that is there was compared above: the files are those the run wrote)
    results = check_history(ops, events, config, checkers=checkers, time_limit=time_limit,
                            cut_short=frozenset(cut_short), files_recorded=os.path.lexists(run.digest),
                            **linearizable_options)
    if config is None:
        add_note(results, f"{run.config}: no such file: the run states no configuration; {judged}, "
                          "with no settings assumed", note)
    note_unread(results, ops, note)
    for line in torn:  # an event the node was writing when it was killed: said, as for the history
        add_note(results, line, note)
    results["judged_files"] = files
    if checkers is not None:
        previous = previous_results(run.results)  # (read once: its verdicts and the files they judged)
        if previous.problem is not None:  # an unreadable old results file is replaced, and said to be
            add_note(results, f"{previous.problem}: replaced; the verdicts it held, if any, are not kept", note)
        merged = {**_unless_changed(run, previous, results, note), **results["checkers"]}
        merged.update(_not_checked(run, checker_names_for(config, ops, linearizable_options.get("model")),
                                   merged, results, note))
        results["checkers"] = merged
        results["valid"] = merge_validity(c.get("valid", "unknown") for c in merged.values())
    interrupted = unfinished_reason(run)
    if interrupted is not None:  # its history stops early: unknown at best, and the file says why
        add_note(results, interrupted, note)
        mark_interrupted(results, interrupted)
    try:
        write_results(run.results, results)
    except OSError as e:
        from floodmark.inputs.sources import describe_os_error, file_problem

        # What stands at results.json (a directory, a FIFO) says more than the error; with
        # nothing there the error is the cause (a read-only directory), not "no such file".
        there = file_problem(run.results) if os.path.lexists(run.results) else None
        raise UsageError(f"{run.results}: cannot write: {there or describe_os_error(e)}") from None
    return results


def _digest_of(run: RunDir) -> dict[str, str] | None:
    """The digests of the history and node events being judged (None: they cannot be read
    again, and then no later check keeps a verdict on the strength of this one)."""
    from floodmark.run_dirs.run_digests import compute_digest

    try:
        return compute_digest(run)
    except OSError:
        return None


def _refuse_if_changed(run: RunDir, files: dict[str, str] | None) -> None:
    """A UsageError when the run's history or node events are not those its digest.json
    recorded as the run ended (a file cut at a line's end, edited, lost or added): judging
    them would judge another run, and a node's events cut short can make up violations. The
    message says how to check the files as they are, on purpose: remove the digest."""
    from floodmark.run_dirs.run_digests import unrecorded_problem

    problem = unrecorded_problem(run, files, f"remove {run.digest.name} to check the files as they are now")
    if problem is not None:
        raise UsageError(problem)


def _not_checked(run: RunDir, defaults: Sequence[str], judged: dict[str, Any], results: dict[str, Any],
                 note: Note | None) -> dict[str, dict[str, Any]]:
    """The checkers that judge the run by default but neither judged it now nor kept a verdict
    from before, each unknown, and a note naming them: an overall verdict over the others
    alone would call valid a run whose history was never read for lost writes (``check
    --checker stats`` on a new run said VALID, and the report showed the run valid)."""
    missing = [name for name in defaults if name not in judged]
    if not missing:
        return {}
    add_note(results, f"{run.results}: {', '.join(missing)} did not judge the run: unknown until floodmark check "
                      "runs them (all of them, without --checker)", note)
    unchecked = CheckerResult("unknown", stats={"error": "not run by this check"})
    return {name: unchecked.to_dict() for name in missing}


def _unless_changed(run: RunDir, previous: PreviousResults, results: dict[str, Any],
                    note: Note | None) -> dict[str, dict[str, Any]]:
    """The old verdicts of checkers not judged again, if they were judged on the history and
    node events the run holds now (the old results.json's ``judged_files`` say so, or, for
    results written before those were recorded, digest.json); else those checkers as
    unknown, with the reason, and a note saying it."""
    from floodmark.run_dirs.run_digests import changed_since_judged

    kept = previous.verdicts
    others = [name for name in kept if name not in results["checkers"]]
    if not others:
        return kept
    changed = changed_since_judged(run, previous.judged_files, results.get("judged_files"), previous.run_id)
    if changed is None:
        return kept
    add_note(results, f"{run.results}: the verdicts of {', '.join(others)} are not kept ({changed}): "
                      "they are unknown until checked again", note)
    dropped = CheckerResult("unknown", stats={"error": "not checked again, and its old verdict is not kept "
                                                       "(the notes say why)"})
    return {name: dropped.to_dict() for name in others}
