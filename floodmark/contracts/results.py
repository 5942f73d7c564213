"""Results: the verdict of a run, and of each checker that judged it.

``results.json`` holds:

    valid      true | false | "unknown", merged over the checkers with priority
               false > unknown > true (one proven anomaly makes the run invalid; a checker
               that could not decide makes an otherwise clean run unknown)
    checkers   {name: {"valid": ..., "anomalies": [...], "stats": {...}}}
    seed, config, variant   copied from the run so the file stands alone
    notes      (when there are any) one line each about what the verdict rests on that it
               does not say itself: a torn last line of the history left unread, ...
    interrupted   (a run stopped by Ctrl-C or SIGTERM) why it cannot be judged valid, in one
               line (:func:`floodmark.run_dirs.unfinished_runs.unfinished_reason`): its verdict is unknown at
               best, merged as one more unknown verdict (:func:`mark_interrupted`)
    judged_files  (a run directory's) the SHA-256 of the history and of each node's events
               the checkers read, as ``digest.json`` names them: a later ``check --checker``
               keeps the other verdicts only while the files are still these

An anomaly names its ``type``, the ``topic``/``partition`` and ``offsets`` involved, the
history ``ops`` (indices) that witness it, optional node ``events`` ([node, seq] pairs), and a
one-sentence ``explanation``. Checkers may add fields (``permitted_by`` for losses the
configuration allows, ``partial_linearizations`` for the linearizability checker, ...).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from floodmark.errors import SourceError

# Every reader of a results file (check, the report, the results browser's index, analyze)
# parses it whole. A verdict and its anomalies stay far below this but for runs with hundreds
# of thousands of anomalies, which are then shown unchecked, saying why: a results file of
# gigabytes (or one growing without end) would exhaust the memory of any of them first.
MAX_RESULTS_BYTES = 64 << 20

Validity = bool | Literal["unknown"]


def merge_validity(values: Iterable[Validity]) -> Validity:
    """Priority false > unknown > true; an empty set of verdicts is true."""
    merged: Validity = True
    for v in values:
        if v is False:
            return False
        if v == "unknown":
            merged = "unknown"
    return merged


@dataclass(frozen=True)
class Anomaly:
    type: str
    explanation: str
    topic: str | None = None
    partition: int | None = None
    offsets: tuple[int, ...] = ()
    ops: tuple[int, ...] = ()
    events: tuple[tuple[str, int], ...] = ()
    details: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "type": self.type,
            "topic": self.topic,
            "partition": self.partition,
            "offsets": list(self.offsets),
            "ops": list(self.ops),
            "explanation": self.explanation,
        }
        if self.events:
            d["events"] = [list(e) for e in self.events]
        d.update(self.details)
        return d


@dataclass
class CheckerResult:
    """One checker's judgement."""

    valid: Validity
    anomalies: list[Anomaly] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    # The error that kept the checker from deciding, for callers in the same process that
    # act on its type (results.json records its text in ``stats["error"]``).
    cause: Exception | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "valid": self.valid,
            "anomalies": [a.to_dict() for a in self.anomalies],
            "anomaly_counts": anomaly_counts(self.anomalies),
            "stats": self.stats,
        }
        d.update(self.extra)
        return d


def verdict_word(valid: Any) -> str:
    """``valid`` as results.json holds it, in a word: valid, invalid, unknown or unchecked."""
    if valid is True:
        return "valid"
    if valid is False:
        return "invalid"
    if valid == "unknown":
        return "unknown"
    return "unchecked"


def anomaly_counts(anomalies: Iterable[Anomaly]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in anomalies:
        counts[a.type] = counts.get(a.type, 0) + 1
    return dict(sorted(counts.items()))


def build_results(
    checkers: dict[str, CheckerResult],
    *,
    seed: int | None = None,
    config: dict[str, Any] | None = None,
    variant: str | None = None,
) -> dict[str, Any]:
    return {
        "valid": merge_validity(r.valid for r in checkers.values()),
        "seed": seed,
        "variant": variant,
        "config": config or {},
        "checkers": {name: r.to_dict() for name, r in checkers.items()},
    }


def mark_interrupted(results: dict[str, Any], reason: str) -> None:
    """Hold ``results`` (as :func:`build_results` makes them) at unknown at best, for ``reason``
    (the run was interrupted, so its history stops early): an anomaly found in what it
    recorded still makes it invalid, but no verdict on it is valid. The reason goes into
    ``interrupted`` and ``notes``, so the file says why."""
    results["interrupted"] = reason
    results["valid"] = merge_validity([results.get("valid", "unknown"), "unknown"])
    notes = results.setdefault("notes", [])
    if reason not in notes:
        notes.append(reason)


def shown_verdict(verdict: Any, interrupted: str | None) -> Any:
    """The verdict to show for a run whose results file holds ``verdict`` (None: never
    checked, shown so), where ``interrupted`` is why the run is marked interrupted (None: it
    is not): unknown at best, as :func:`mark_interrupted` holds it and ``check`` judges it,
    whatever a results file written before the mark says."""
    if interrupted is None or verdict is None:
        return verdict
    return merge_validity([verdict, "unknown"])


def write_results(path: str | os.PathLike[str], results: dict[str, Any]) -> None:
    """Write atomically: a reader never sees half a results file, and two checks of one run
    at once (``check`` beside ``analyze``) never write into one temporary file."""
    from floodmark.inputs.output_paths import replace_file

    def write(f: TextIO) -> None:
        json.dump(results, f, indent=1, default=str)
        f.write("\n")

    replace_file(Path(path), write)


@dataclass(frozen=True)
class PreviousResults:
    """What an old results file holds for a check of some checkers only: the judgements to
    keep beside the new ones and the ``judged_files`` they were judged on, read together, or
    none and why not (``problem``)."""

    verdicts: dict[str, dict[str, Any]]
    judged_files: Any  # as written: the caller judges whether it is digests (None: none recorded)
    problem: str | None
    run_id: Any = None  # the run its copy of the configuration names (:func:`results_run_id`)


def previous_results(path: str | os.PathLike[str]) -> PreviousResults:
    """The checkers' judgements a results file holds, to keep beside new ones, with the files
    they judged; or none and why, when the file is there but unreadable, not shaped as
    :func:`build_results` writes it (a judgement kept must read as any other: a verdict,
    anomalies, counts, stats) or no verdict (:func:`verdict_problem`). No file at all is no
    judgements and no problem."""
    from floodmark.inputs.sources import file_problem

    if not os.path.lexists(path):
        return PreviousResults({}, None, None)
    problem = file_problem(path)
    if problem is not None:
        return PreviousResults({}, None, f"{path}: {problem}")
    try:
        results = read_results(path)
    except ValueError as e:
        return PreviousResults({}, None, str(e))
    # A file that is no verdict as the report reads it (a checker valid over the anomalies it
    # lists, an overall verdict its checkers do not give) keeps nothing: its "valid" was kept,
    # and a run the report shows unchecked was judged VALID by check --checker.
    problem = verdict_problem(results)
    if problem is not None:
        return PreviousResults({}, None, f"{path}: {problem}")
    return PreviousResults(results.get("checkers") or {}, results.get("judged_files"), None, results_run_id(results))


def results_run_id(results: dict[str, Any]) -> Any:
    """The run id a results file's copy of the configuration names, as written (None: none,
    as in one written before run ids): what tells whose verdict it is when it does not record
    which files it judged."""
    config = results.get("config")
    return config.get("run_id") if isinstance(config, dict) else None


def judgement_problem(result: Any) -> str | None:
    """What makes ``result`` no checker's judgement as :func:`build_results` writes one (a
    verdict, and anomalies, counts and stats of the right shapes), in a phrase; None if it is one."""
    if not isinstance(result, dict):
        return f"{_kind(result)}, not an object"
    valid = result.get("valid", "unknown")
    if not (valid is True or valid is False or valid == "unknown"):
        return "'valid' is not true, false or \"unknown\""
    expected = {"anomalies": list, "stats": dict, "anomaly_counts": dict}
    for key, kind in expected.items():
        if key in result and not isinstance(result[key], kind):
            return f"{key!r} is {_kind(result[key])}, not {'a list' if kind is list else 'an object'}"
    if not all(isinstance(a, dict) for a in result.get("anomalies", [])):
        return "an anomaly is not an object"
    counts = result.get("anomaly_counts", {})
    if not all(isinstance(k, str) and type(v) is int for k, v in counts.items()):
        return "'anomaly_counts' is not a count per anomaly type"
    return None


def verdict_problem(results: dict[str, Any]) -> str | None:
    """Why a results file's overall verdict is no verdict, in a phrase; None when it is one: a
    ``valid`` that is true, false or "unknown" and the merge of its checkers' verdicts, each
    checker's entry a judgement (:func:`judgement_problem`). A file that contradicts itself,
    or whose checkers are not judgements, is no verdict whatever its top line says; nor is
    one without any checker, unless it is a run that failed or was interrupted before it
    could be checked (unknown, with its ``error`` or ``interrupted`` reason); nor one with a
    valid checker that reports anomalies; an interrupted run's verdict is its checkers'
    merged with unknown. The report and the results browser show such a file
    unchecked; the pipeline does not take its verdict for the run's."""
    valid = results.get("valid")
    if not (valid is True or valid is False or valid == "unknown"):
        return f"not a results file ('valid' is {_short(valid)}, not true, false or \"unknown\")"
    checkers = results.get("checkers")
    if checkers is not None and not isinstance(checkers, dict):
        return f"not a results file ('checkers' is {_short(checkers)}, not an object)"
    interrupted = isinstance(results.get("interrupted"), str)
    if not checkers:
        if valid == "unknown" and (isinstance(results.get("error"), str) or interrupted):
            return None
        return "no checker's verdict in it"
    for name, result in checkers.items():
        shape = judgement_problem(result)
        if shape is not None:
            return f"not a results file (checker {str(name)[:40]!r}: {shape})"
        # No checker finds an anomaly and calls the run valid (anomalies make it invalid or
        # unknown): a valid entry that lists or counts some contradicts itself.
        if result.get("valid", "unknown") is True and _reports_anomalies(result):
            return f"inconsistent: checker {str(name)[:40]!r} is valid, but it reports anomalies"
    verdicts: list[Validity] = [c.get("valid", "unknown") for c in checkers.values()]
    merged = merge_validity([*verdicts, "unknown"] if interrupted else verdicts)
    if merged != valid:
        disagree = [f"{str(name)[:40]} {verdict_word(c.get('valid', 'unknown'))}" for name, c in checkers.items()
                    if c.get("valid", "unknown") == merged] or ["the run was interrupted"]
        return (f"inconsistent: its verdict is {verdict_word(valid)}, but its checkers' is "
                f"{verdict_word(merged)} ({', '.join(disagree[:4])})")
    return None


def _reports_anomalies(result: dict[str, Any]) -> bool:
    """Whether a checker's judgement (of the shape :func:`judgement_problem` asks for) lists
    an anomaly or counts one."""
    return bool(result.get("anomalies")) or any(n > 0 for n in result.get("anomaly_counts", {}).values())


def _short(value: Any, limit: int = 40) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = _kind(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def oversized_results(path: str | os.PathLike[str]) -> str | None:
    """Why the results file ``path`` is too large to read whole (more than
    :data:`MAX_RESULTS_BYTES`), in a phrase; None when it is not, or cannot be looked at (its
    reader says why)."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    if size <= MAX_RESULTS_BYTES:
        return None
    return f"{size:,} bytes, more than the {MAX_RESULTS_BYTES:,} a results file may have"


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A results file; ValueError (naming the file) when it is not one. Read once, as JSON
    without NaN, lone surrogates or nesting deeper than the checkers ever write, and never
    more than :data:`MAX_RESULTS_BYTES` of it."""
    from floodmark.inputs.plain_values import parse_json
    from floodmark.inputs.sources import read_source

    too_large = oversized_results(path)
    if too_large is not None:
        raise ValueError(f"{path}: {too_large}")
    try:  # (bounded as well while it is read: it may grow after it was measured)
        data = parse_json(read_source(path, limit=MAX_RESULTS_BYTES))
    except SourceError as error:
        raise ValueError(str(error)) from None
    except ValueError as error:
        raise ValueError(f"{path}: not a results file: {error}") from None
    if not isinstance(data, dict) or "valid" not in data:
        raise ValueError(f"{path}: not a results file (no 'valid' field)")
    return data
