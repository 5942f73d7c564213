"""The linearizability checker: is there one order of the operations that explains them all?

The history is first cut into calls (an invocation with its completion), prepared by the
model and grouped by the independent object they touch: a key, or a log partition. An
object's operations commute with every other object's, so each object has a linearization
on its own if and only if the whole history has one (Herlihy and Wing's locality,
"P-compositionality" in Lowe's terms). Objects are searched with :func:`floodmark.checkers.linearizability.wgl.search_either`, all of them interleaved a
slice at a time (as Porcupine searches partitions in parallel); the first object found
invalid ends every search (fail-fast; ``every_object`` searches on to name every invalid
object), and an overall deadline turns what is left into
"unknown", never a guess. An object with a call that the model finds no order can explain (a
read of a value nobody wrote) is invalid at once, whatever its search would have reached.

How a history is read (:class:`Interpretation`): the model (given, or inferred from the
ops), whether its register ops are Jepsen ``independent`` ``[key value]`` ones (one register
per key, :mod:`floodmark.checkers.linearizability.independent`), and the register conventions of the format
it came in (:func:`format_conventions`). The result's stats say which, in words.

Outcomes follow Jepsen: ``ok`` happened, ``fail`` did not (except a failed compare-and-set
where the model is told it is an observed compare failure), ``info`` or no completion may
have happened at any point after the invocation, or never.

For an invalid object the anomaly carries the longest partial linearizations the search
reached (each op with the model state after it) and the ops it could not linearize next. A
log partition's anomaly that a loss the configuration permits explains carries
``permitted_by`` (:mod:`floodmark.checkers.linearizability.permitted_loss`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass, field
from typing import Any

from floodmark.checkers.api import CheckInput, NotJudgeable
from floodmark.checkers.linearizability.independent import (
    MissingValue,
    looks_independent,
    looks_independent_locks,
    names_keys_beside,
)
from floodmark.checkers.linearizability.models import (
    _UNSET,
    INCONSISTENT,
    KEYED_MODELS,
    Log,
    Model,
    MultiRegister,
    Mutex,
    make_model,
)
from floodmark.checkers.linearizability.permitted_loss import loss_permission
from floodmark.checkers.linearizability.values import display, order_key, same, shown
from floodmark.checkers.linearizability.wgl import (
    DEFAULT_CACHE_LIMIT,
    Call,
    SearchResult,
    search_either,
)
from floodmark.checkers.op_shapes import failed_yet_done
from floodmark.contracts.history import NEMESIS, Op, nemesis_client_ops
from floodmark.contracts.results import Anomaly, CheckerResult, Validity, merge_validity


class ModelMismatch(NotJudgeable):
    """The history has operations the chosen model does not have."""


@dataclass(frozen=True)
class ObjectHistory:
    key: Hashable
    calls: list[Call]


def prepare_history(ops: list[Op], model: Model) -> list[ObjectHistory]:
    """Pair client invocations with completions and group the model's calls by object."""
    # One record per invocation, in invocation order: [position, invocation, completed at, completion].
    completed: list[list[Any]] = []
    open_calls: dict[Any, Any] = {}
    for position, op in enumerate(ops):
        process = op.process
        if process == NEMESIS:
            continue
        if op.type == "invoke":
            # a process never has two open calls; an earlier one left open stays indeterminate
            record = [position, op, None, None]
            open_calls[process] = record
            completed.append(record)
        else:
            record = open_calls.pop(process, None)
            if record is not None:
                record[2] = position
                record[3] = op

    objects: dict[Hashable, list[Call]] = {}
    split, prepare = model.split, model.prepare
    # (what a write returns only echoes it: the model never looks, so it is not even split)
    uses_result = model.uses_result
    keyed = model.keyed
    make_call = tuple.__new__  # Call(...) without its Python-level __new__: this loop is hot
    for invoked_at, invocation, completed_at, completion in completed:
        outcome = "info" if completion is None else completion.type
        if outcome == "fail" and model.failures_hold_nothing and completion is not None and \
                (contradiction := failed_yet_done(invocation.f, outcome, completion.value)):
            raise ModelMismatch(f"op {completion.index} ({invocation.f} {shown(invocation.value)}): {contradiction}")
        try:
            key, invoked_value = split(invocation.value, invocation.extra)
            completed_value = None
            if outcome == "ok" and (uses_result is None or invocation.f in uses_result):
                value, extra = completion.value, completion.extra
                if not keyed:  # (the whole value is the object's: nothing to split)
                    completed_value = value
                # (same too, not only ==: a read invoked with true and returning 1 echoes nothing)
                elif value == invocation.value and extra == invocation.extra and same(value, invocation.value):
                    completed_value = invoked_value  # (an echoed write: no second split)
                else:
                    try:
                        completed_key, completed_value = split(value, extra)
                    except MissingValue:
                        raise
                    except ValueError:
                        completed_value = value  # a bare value: the invocation named the key
                    else:
                        # (judged under the invocation's key, a completion that names another
                        # key would pass off what it read there as this key's value)
                        if completed_key != key:
                            raise ValueError(f"its completion, op {completion.index}, names key "
                                             f"{shown(display(completed_key))}, not the invocation's "
                                             f"{shown(display(key))}")
            call = prepare(invocation.f, invoked_value, completed_value, outcome)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ModelMismatch(f"op {invocation.index} ({invocation.f} {shown(invocation.value)}): {e}") from None
        if call is None:
            continue
        # (op, completion, call, invoked at, completed at: None when the outcome is unknown)
        made = make_call(Call, (invocation.index, None if completion is None else completion.index, call,
                                invoked_at, completed_at if outcome == "ok" or outcome == "fail" else None))
        calls = objects.get(key)
        if calls is None:
            objects[key] = [made]
        else:
            calls.append(made)
    for calls in objects.values() if model.may_be_unfit() else ():
        problem = model.unfit([made.call for made in calls])
        if problem is not None:
            number, what = problem
            op = ops[calls[number].invoked_at]
            raise ModelMismatch(f"op {op.index} ({op.f} {shown(op.value)}): {what}")
    return [ObjectHistory(k, calls) for k, calls in objects.items()]


def infer_model(ops: list[Op], workload: str | None = None) -> str:
    """Guess the model from the workload or the operations' functions."""
    if workload == "log-lin":
        return "log"
    fs = {op.f for op in ops if op.process != NEMESIS}
    if "txn" in fs:
        return "multi-register"
    if fs & {"acquire", "release"}:
        return "mutex"
    sample = next((op for op in ops if op.process != NEMESIS and op.f in ("append", "read", "final-read")), None)
    if sample is not None and isinstance(sample.value, dict) and "topic" in sample.value:
        return "log"
    if fs & {"get", "put", "append"}:
        return "kv"
    return "cas-register"


REGISTER_MODELS = ("cas-register", "register", "multi-register")


def format_conventions(history_format: str, model: str) -> dict[str, Any]:
    """The register conventions of the tools that write each format, so their histories get
    the verdicts those tools give.

    - Knossos/Jepsen EDN: registers start at 0 as in Knossos's own test data (Jepsen's own
      tests start theirs at nil: ``--initial nil``), a read of nil tells nothing, a failed op
      never happened. In kv (Porcupine's data, Jepsen's independent ops) a read of nil tells
      nothing either; keys start at the empty string, as in Porcupine.
    - Jepsen 2014 text logs (etcd): the register starts absent (nil), ``:ok :read nil`` read
      the absent value, and a failed cas observed that the register did not hold the
      expected value.
    - later Jepsen's ``jepsen.log``: Knossos's ``cas-register`` as Jepsen's tests make it:
      registers start at nil, a read of nil tells nothing, a failed op never happened (kv as
      for EDN).
    - our JSONL: every register (register, cas-register, multi-register) starts at nil, nil
      is a value like any other, failed ops never happened: the models' own defaults.
    """
    if history_format == "edn":
        if model == "kv":
            return {"nil_reads_unknown": True}
        if model in REGISTER_MODELS:
            return {"initial": 0, "nil_reads_unknown": True}
        return {}
    if history_format == "jepsen-text" and model in REGISTER_MODELS:
        return {"initial": None, "failed_cas_observed": True}
    if history_format == "jepsen-log":
        if model == "kv":
            return {"nil_reads_unknown": True}
        if model in REGISTER_MODELS:
            return {"initial": None, "nil_reads_unknown": True}
    return {}


def describe_conventions(conventions: dict[str, Any]) -> str:
    """Register conventions in words, e.g. 'start at 0 and a nil read tells nothing'."""
    initial = conventions.get("initial")
    parts = [f"start at {shown(initial)}"]
    parts.append("a nil read tells nothing" if conventions.get("nil_reads_unknown") else "nil is a value")
    if conventions.get("failed_cas_observed"):
        parts.append("a failed cas observed a mismatch")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def render_state(model: Model, state: Any) -> Any:
    """A model state as JSON for the report."""
    if isinstance(model, Log):
        return {"length": model.length[state], "last": display(model.last[state])}
    if isinstance(model, Mutex):
        return "held" if state else "free"
    if isinstance(model, MultiRegister):
        registers = model.registers(state)
        return {_key_text(k): display(registers[k]) for k in sorted(registers, key=order_key)}
    return display(state)


def _key_text(key: Any) -> str:
    shown_key = display(key)
    return shown_key if type(shown_key) is str else shown(key)


@dataclass(frozen=True)
class Interpretation:
    """How a history is read: the model, whether its ops are independent [key value] ones,
    and the model's options (the register conventions among them)."""

    model: str
    independent: bool
    detected: bool  # independent because the history's shape said so (not asked)
    options: dict[str, Any]
    keys_beside: bool = False  # one register per key its ops name beside their value (a :key field)

    def describe(self) -> str:
        """In words, for the verdict line: the model, and for registers their conventions."""
        what = self.model
        if self.independent:
            what += f" per key of jepsen.independent [key value] ops{' (detected)' if self.detected else ''}"
        elif self.keys_beside:
            what += " per key its ops name beside their value (detected)"
        if self.model in REGISTER_MODELS or self.model == "kv":
            initial = self.options.get("initial", "" if self.model == "kv" else None)
            start = {**self.options, "initial": initial}
            what += f"; {'keys' if self.model == 'kv' else 'registers'} {describe_conventions(start)}"
        elif self.model in _STARTS_AS and "initial" in self.options:  # given, and nothing to give it to
            what += f"; an initial value does not apply, {_STARTS_AS[self.model]}"
        return what


# How the models without an initial value start (an --initial given for them is said to be ignored).
_STARTS_AS = {"mutex": "a mutex starts free", "log": "a log starts empty"}


@dataclass
class LinearizableChecker:
    """Wing–Gong–Lowe linearizability over a model, per object, with a deadline.

    ``conventions``: the history format whose register conventions apply
    (:func:`format_conventions`); ``initial``, ``failed_cas_observed`` and
    ``nil_reads_unknown``, when given, override them. ``independent``: the ops are
    ``jepsen.independent`` [key value] ones, one register per key; None: so if the history
    unmistakably looks it (:func:`~floodmark.checkers.linearizability.independent.looks_independent`).
    """

    model: str | None = None
    initial: Any = _UNSET
    failed_cas_observed: bool | None = None
    nil_reads_unknown: bool | None = None
    independent: bool | None = None
    conventions: str | None = None
    cache_limit: int = DEFAULT_CACHE_LIMIT
    every_object: bool = False  # search on past an invalid object, to name every one (no fail-fast)
    name: str = field(default="linearizable")

    def interpret(self, run: CheckInput) -> Interpretation:
        """The model and options this checker judges ``run``'s history with."""
        model_name = self.model or infer_model(run.history, run.config.workload if run.config else None)
        independent, detected = self.independent, False
        if independent is None:
            looks = looks_independent_locks if model_name == "mutex" else looks_independent
            independent = detected = model_name in KEYED_MODELS and looks(run.history)
        # (ops that name their key beside their value: one object per key, unless told one object)
        keys_beside = self.independent is None and not independent and model_name in KEYED_MODELS \
            and names_keys_beside(run.history)
        conventions = format_conventions(self.conventions, model_name) if self.conventions else {}
        options: dict[str, Any] = {
            "failed_cas_observed": _given(self.failed_cas_observed, conventions.get("failed_cas_observed", False)),
            "nil_reads_unknown": _given(self.nil_reads_unknown, conventions.get("nil_reads_unknown", False)),
        }
        if self.initial is not _UNSET:
            options["initial"] = self.initial
        elif "initial" in conventions:
            options["initial"] = conventions["initial"]
        return Interpretation(model_name, independent, detected, options, keys_beside)

    def check(self, run: CheckInput) -> CheckerResult:
        started = time.monotonic()
        deadline = None if run.time_limit is None else started + run.time_limit
        seen = self.interpret(run)
        model_name = seen.model
        build = lambda: make_model(model_name, independent=seen.independent, keys_beside=seen.keys_beside,  # noqa: E731
                                   **seen.options)
        try:
            first = build()
        except (ValueError, TypeError) as e:  # an initial value or option the model cannot take
            raise ModelMismatch(f"the {model_name} model: {e}") from None
        objects = prepare_history(run.history, first)
        objects.sort(key=lambda o: len(o.calls))
        verdicts: list[Validity] = []
        anomalies: list[Anomaly] = []
        unknown: list[str] = []
        explored = 0
        checked = 0
        # Every object's search runs interleaved with the others', a slice at a time, so the
        # first object without a linearization stops them all early (fail-fast) even when
        # larger valid objects come before it.
        # (a hard object gets a second search in another order beside the first: search_either)
        active = [(obj, _search(build(), obj.calls, build, deadline, self.cache_limit)) for obj in objects]
        while active:
            still: list[tuple[ObjectHistory, Generator[None, None, tuple[Model, SearchResult]]]] = []
            failed = False
            for obj, steps in active:
                try:
                    next(steps)
                except StopIteration as done:
                    model, result = done.value
                else:
                    still.append((obj, steps))
                    continue
                explored += result.explored
                verdicts.append(result.valid)
                if result.valid is False:
                    anomaly = _anomaly(model, obj, result, run.history)
                    if isinstance(first, Log) and isinstance(obj.key, tuple):
                        anomaly.details.update(loss_permission(obj.calls, obj.key, run.loss_permissions, build,
                                                               deadline, self.cache_limit))
                    anomalies.append(anomaly)
                    if not self.every_object:
                        failed = True
                        break  # fail-fast: one object without a linearization decides the history
                    continue
                if result.valid == "unknown":
                    unknown.append(f"{_describe_key(first, obj.key)}: {result.reason}")
                checked += 1
            if failed:
                for _, steps in still + active:
                    steps.close()
                break
            active = still
        valid = merge_validity(verdicts)
        stats = {
            "model": model_name,
            "independent": seen.independent,
            "interpretation": seen.describe(),
            "objects": len(objects),
            "objects_checked": checked,
            "calls": sum(len(o.calls) for o in objects),
            "configurations_explored": explored,
            "seconds": round(time.monotonic() - started, 6),
        }
        if isinstance(first, Log):  # (as the queue checkers count permitted losses apart)
            permitted = sum("permitted_by" in a.details for a in anomalies)
            stats["permitted"], stats["violations"] = permitted, len(anomalies) - permitted
        if unknown:
            stats["unknown_because"] = unknown
            if valid == "unknown":  # (said on the verdict line, as every checker says why)
                stats["unjudged_because"] = unknown_reason(unknown)
        shadowed = nemesis_client_ops(run.history)
        if shadowed and valid is True:  # (its search left them out, as a fault's records)
            valid = "unknown"
            stats["unjudged_because"] = (f"op {shadowed[0].index} ({shadowed[0].f}; {len(shadowed)} in all) is a "
                                         "client's op recorded by the nemesis, whose ops no search takes in")
        if not any(op.process != NEMESIS for op in run.history):
            if run.config is not None:
                # A floodmark run always has clients: one that recorded no op tested nothing.
                stats["unjudged_because"] = "the run recorded no client op: nothing was tested"
                return CheckerResult("unknown", anomalies, stats)
            # A foreign history is vacuously linearizable, as Knossos and Porcupine judge it
            # (the reference data has such a history); the stats say that nothing was tested.
            stats["note"] = "the history has no client op: it is linearizable because nothing happened"
        return CheckerResult(valid, anomalies, stats)


IMPOSSIBLE_BUDGET = 5_000  # configurations searched for a report's orders once a call is known impossible


def _search(model: Model, calls: list[Call], build: Callable[[], Model], deadline: float | None,
            cache_limit: int) -> Generator[None, None, tuple[Model, SearchResult]]:
    """:func:`search_either`, unless the model names a call that no order can help
    (:meth:`Model.first_impossible`: a read of a value nobody wrote). Then the object is invalid
    whatever the other calls did, and the search runs only a little, for the report's longest
    orders: proving it by search may take every order of the calls before that one."""
    impossible = model.first_impossible([c.call for c in calls], tuple(c.invoked_at for c in calls),
                                        tuple(c.completed_at for c in calls))
    if impossible is None:
        return (yield from search_either(model, calls, build, deadline=deadline, cache_limit=cache_limit))
    number, why = impossible
    searched, result = yield from search_either(model, calls, build, deadline=deadline,
                                                cache_limit=min(cache_limit, IMPOSSIBLE_BUDGET))
    if result.valid == "unknown":  # (the budget or the time ran out)
        result = SearchResult(False, result.explored, f"op {calls[number].op} cannot take effect in any order: "
                              f"{why}", stuck=[number])
    return searched, result


UNKNOWN_SHOWN = 3  # objects named on the verdict line; results.json has them all


def unknown_reason(unknown: list[str]) -> str:
    """Why the search gave no verdict, in one line: the first objects it stopped on."""
    more = len(unknown) - UNKNOWN_SHOWN
    said = "; ".join(unknown[:UNKNOWN_SHOWN]) + (f"; and {more} more objects" if more > 0 else "")
    hint = " (a longer time limit may decide it)" if any("time limit" in u for u in unknown) else ""
    return f"the search stopped before a verdict: {said}{hint}"


def _given(value: bool | None, otherwise: bool) -> bool:
    return otherwise if value is None else value


def _describe_key(model: Model, key: Hashable) -> str:
    if key is None and not model.keyed:
        return model.one_object
    if isinstance(model, Log) and isinstance(key, tuple):
        return f"partition {key[0]}/{key[1]}"
    return f"key {shown(key)}"


def _anomaly(model: Model, obj: ObjectHistory, result: SearchResult, history: list[Op]) -> Anomaly:
    def op_summary(number: int, state: Any = INCONSISTENT) -> dict[str, Any]:
        call = obj.calls[number]
        invocation = history[call.op]
        completion = history[call.completion] if call.completion is not None else None
        summary: dict[str, Any] = {
            "op": call.op,
            "completion": call.completion,
            "process": invocation.process,
            "f": invocation.f,
            "value": completion.value if completion is not None and completion.type == "ok" else invocation.value,
            "outcome": completion.type if completion is not None else "info",
        }
        if state is not INCONSISTENT:
            summary["state"] = render_state(model, state)  # the model state after this op
        return summary

    paths = [[op_summary(number, state) for number, state in path] for path in result.longest]
    stuck = [op_summary(number) for number in result.stuck]
    first_stuck = stuck[0] if stuck else None
    depth = len(result.longest[0]) if result.longest else 0
    last_state = result.longest[0][-1][1] if result.longest and result.longest[0] else model.initial()
    where = _describe_key(model, obj.key)
    if first_stuck is not None and result.reason is not None and not result.longest:
        # (the model named the op no order can help, and the search ran out before it: why, in words)
        explanation = (f"No linearization exists for {where}: op {first_stuck['op']} ({first_stuck['f']} "
                       f"{shown(first_stuck['value'])}, process {first_stuck['process']}) cannot take effect "
                       f"in any order: {result.reason.partition(': ')[2]}.")
    elif first_stuck is not None:
        explanation = (
            f"No linearization exists for {where}: the longest consistent order covers {depth} of "
            f"{len(obj.calls)} ops, after which op {first_stuck['op']} ({first_stuck['f']} "
            f"{shown(first_stuck['value'])}, process {first_stuck['process']}) cannot take effect from state "
            f"{shown(render_state(model, last_state))}."
        )
    else:
        explanation = f"No linearization exists for {where}."
    topic: str | None = None
    partition: int | None = None
    if isinstance(model, Log) and isinstance(obj.key, tuple):
        topic, partition = obj.key
    witness = sorted({s["op"] for s in stuck} | {s["completion"] for s in stuck if s["completion"] is not None})
    return Anomaly(
        type="nonlinearizable",
        explanation=explanation,
        topic=topic,
        partition=partition,
        ops=tuple(witness),
        details={
            "key": None if (obj.key is None and not model.keyed) or isinstance(model, Log) else repr(display(obj.key)),
            "partial_linearizations": paths,
            "unlinearizable_ops": stuck,
            "stuck": [s["op"] for s in stuck],
        },
    )
