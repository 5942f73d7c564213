"""``floodmark check``: judge run directories and history files from the command line.

    floodmark check PATH... [--model M] [--independent] [--initial EDN] [--conventions FORMAT]
                            [--checker NAME,...] [--time-limit S] [--every-key] [--to-edn OUT]

A PATH is a run directory (its history, node events and ``test.yaml`` are judged by the
workload's checkers and ``results.json`` is written or updated) or a history file in any
format :mod:`floodmark.formats.detect` recognises (judged by the linearizability checker
unless it is a queue or log-lin history; a Jepsen kafka history by the queue checker, over
the queue ops :mod:`floodmark.formats.jepsen_kafka` makes of it, and never valid where it
holds what no checker judges). One verdict line per path, then the overall
verdict; the exit code is 0 valid, 1 invalid, 2 unknown, 254 for bad arguments or an
unreadable input (reported as ``file:line: problem``, or a history that does not fit the
model, naming the op).

Register histories are judged by the conventions of the tool that wrote their format
(:func:`~floodmark.checkers.linearizability.checker.format_conventions`); the verdict line says which
model, conventions and interpretation were used. ``--to-edn`` writes a history as it is,
op for op, for Jepsen's tools (never over an input: :mod:`floodmark.inputs.output_paths`);
when floodmark would judge that EDN differently from the history it came from (EDN
registers start at 0 and a nil read tells nothing), it says so in one line on standard
error and names the flag that gives the same verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floodmark.checkers.registry import CHECKER_NAMES, DESCRIPTIVE_CHECKERS, hold_short_of_valid
from floodmark.errors import (
    EXIT_BAD_ARGUMENTS,
    SourceError,
    UsageError,
    exit_code,
    given_text,
    printable,
)
from floodmark.inputs.sources import STDIN, file_problem

if TYPE_CHECKING:
    from floodmark.contracts.history import Op
    from floodmark.contracts.results import CheckerResult

# Everything else ``check`` needs is imported when a path is checked: ``floodmark check``
# starts in the time of a bare interpreter plus the history readers and the checker.

_WORD = {True: "VALID", False: "INVALID"}
# floodmark.checkers.linearizability.models.MODEL_NAMES and floodmark.formats.detect.FORMATS, named here so
# that --help does not import the models and the readers (the tests hold them equal)
MODEL_NAMES = ("cas-register", "register", "kv", "multi-register", "mutex", "log")
FORMATS = ("jsonl", "edn", "jepsen-text", "jepsen-log")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check run directories or history files (JSONL, Jepsen EDN, Jepsen text logs)",
        description=(
            "Judge run directories (their history, node events and test.yaml; results.json is "
            "written) and history files in our JSONL, Jepsen EDN, Jepsen 2014 text logs or later "
            "Jepsen's jepsen.log (the format is detected). Prints a verdict per path and overall. "
            "Register histories follow their tool's conventions: our JSONL registers start at nil "
            "and nil is a value; Knossos EDN registers start at 0 (as in Knossos's test data) and a "
            "nil read tells nothing; Jepsen 2014 text logs start at nil and a failed cas observed a "
            "mismatch; a jepsen.log's start at nil and a nil read tells nothing. Jepsen's own tests "
            "start their registers at nil: check their EDN with --initial nil. Jepsen independent "
            "histories ([key value] ops) are detected and checked one register per key. Histories of "
            "Jepsen's kafka workload (jepsen.tests.kafka: [[:send k v]] and [[:poll]] ops) are read as "
            "queue ops (key K is partition key/K; a final round that sought to the beginning and read a "
            "key as far as any op had seen it is a drain of that key) and judged by the queue checker: "
            "lost-write, unseen, duplicate, inconsistent-offsets, poll-skip, nonmonotonic-poll and -send, "
            "G1a, unexpected. Not checked, so never valid: transactions (:txn ops, ops of several "
            "micro-ops: G0, G1c, precommitted reads), records of failed polls. A poll of a value before its "
            "send began is G1c-realtime, as Jepsen's cycle search names it. A send no read passed is unknown, "
            "not unseen."
        ),
        epilog="Exit codes: the worst over all paths: 254 bad arguments or an unusable input (each "
               "is named and the rest are still checked), then 1 invalid, 2 unknown, 0 valid.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="run directories or history files ('-' for standard input)")
    parser.add_argument("--model", choices=MODEL_NAMES,
                        help="linearizability model (default: guessed from the workload or the ops); only "
                             "the linearizable checker takes one, so a queue run or history refuses it")
    parser.add_argument("--independent", action=argparse.BooleanOptionalAction, default=None,
                        help="the ops are Jepsen independent [key value] ones: check one register (or mutex) per "
                             "key (default: so when there is a read and every read is invoked as [key nil], or every "
                             "acquire and release as [key value]; ops naming a :key are per key too); "
                             "--no-independent: one register holding the pairs")
    parser.add_argument("--checker", metavar="NAME,...",
                        help=f"checkers to run, comma-separated, from: {', '.join(CHECKER_NAMES)} (on a "
                             "run directory, the other checkers' verdicts already in its results.json are kept while "
                             "its history and node events are the ones they judged, else they are unknown with a "
                             "warning, as are the run's checkers that never judged it; the overall verdict is over "
                             "all of them)")
    parser.add_argument("--time-limit", type=float, metavar="S",
                        help="seconds the searching checkers may take before answering 'unknown'")
    parser.add_argument("--every-key", action="store_true",
                        help="linearizability: check every key (or partition) and name each invalid one, "
                             "instead of stopping at the first")
    parser.add_argument("--initial", metavar="EDN",
                        help="the registers' initial value, in EDN (e.g. 0, nil, '{:x 0}'); "
                             "--initial nil gives Jepsen's (cas-register) to an EDN history; a mutex "
                             "or log has none (the verdict line says it was ignored)")
    parser.add_argument("--conventions", choices=FORMATS, metavar="FORMAT",
                        help="judge registers by the conventions of FORMAT (jsonl, edn, jepsen-text, "
                             "jepsen-log) "
                             "instead of the file's own, e.g. an EDN written by --to-edn as its JSONL")
    parser.add_argument("--to-edn", metavar="OUT",
                        help="also write each history as Jepsen EDN, op for op (a file for one path, else "
                             "a directory); if floodmark would judge that EDN differently (EDN registers "
                             "start at 0, a nil read tells nothing), a warning says so and names the flag "
                             "that keeps the verdict (--conventions FORMAT)")
    parser.set_defaults(func=run_check)


def _parse_checkers(raw: str | None) -> list[str] | None:
    if raw is None:
        return None
    names = [n.strip() for n in raw.split(",")]
    if len(names) > 1 and not all(names):  # "hw,,leader": a name was meant there
        raise UsageError(f"--checker {raw!r}: an empty checker name in the list; choose from: {', '.join(CHECKER_NAMES)}")
    names = [n for n in names if n]
    unknown = [n for n in names if n not in CHECKER_NAMES]
    if unknown or not names:
        raise UsageError(f"unknown checker {', '.join(unknown) or '(none given)'}; choose from: {', '.join(CHECKER_NAMES)}")
    return names


def _lin_options(args: argparse.Namespace, history_format: str | None, model: str | None) -> dict[str, Any]:
    """The linearizable checker's options from the command line, for a history in
    ``history_format`` (None: a run directory, whose JSONL conventions are the defaults)."""
    options: dict[str, Any] = {}
    if model is not None:
        options["model"] = model
    conventions = args.conventions or history_format
    if conventions is not None:
        options["conventions"] = conventions
    if args.initial is not None:
        options["initial"] = _initial(args.initial)
    if args.independent is not None:
        options["independent"] = args.independent
    if args.every_key:
        options["every_object"] = True
    return options


def _initial(text: str) -> Any:
    from floodmark.formats import edn
    from floodmark.formats.jepsen_edn import plain

    try:
        return plain(edn.loads(text, "--initial"))
    except edn.EdnError as e:
        raise UsageError(f"--initial: {e.problem}") from None


def _edn_target(out: str, path: Path, many: bool, *, make: bool = True) -> Path:
    if not many:
        return Path(out)
    directory = Path(out)
    if make:
        directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{path.name if path.is_dir() else path.stem}.edn"


def _edn_inputs(paths: list[str]) -> list[str | Path | int]:
    """What --to-edn must never write over: every history checked (standard input by its
    descriptor) and every file each run directory checked recorded."""
    from floodmark.run_dirs.rundir import RunDir

    inputs: list[str | Path | int] = []
    for name in paths:
        if name == STDIN:
            inputs.append(_stdin_fd())
        elif Path(name).is_dir():
            inputs += RunDir(Path(name)).recorded_files()
        else:
            inputs.append(name)
    return inputs


def _stdin_fd() -> int:
    try:
        return sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # none, closed, or not a file (then fd 0 is stdin)
        return 0


def _refuse_edn_targets(out: str, paths: list[Path], many: bool) -> None:
    """Refuse a --to-edn that is a directory (for one path) or an input, before any path is
    read or judged (a UsageError: the output is what is wrong, not the history)."""
    from floodmark.inputs.output_paths import STDOUT, check_output

    if out == STDOUT:
        raise UsageError("--to-edn -: standard output carries the verdicts; name a file")
    if many and Path(out).exists() and not Path(out).is_dir():
        raise UsageError(f"--to-edn {printable(out)}: is not a directory (the EDN of several paths goes into one)")
    if many and not Path(out).is_dir():
        return  # made when the first EDN is written
    inputs = _edn_inputs([str(p) for p in paths])
    for path in paths:
        check_output(_edn_target(out, Path("stdin" if str(path) == STDIN else path), many, make=False),
                     flag="--to-edn", inputs=inputs)


def _to_edn(out: str, path: Path, many: bool, ops: list[Op], *, keyword_keys: bool = True,
            inputs: list[str | Path | int] | None = None) -> Path:
    """Write ``ops`` as Jepsen EDN where --to-edn says, and return where; a target that
    cannot be written, or would overwrite one of ``inputs``, is named (it is the output
    that is wrong, not the history). See :mod:`floodmark.inputs.output_paths`."""
    from floodmark.formats.jepsen_edn import write_edn_history
    from floodmark.inputs.sources import describe_os_error

    target = Path(out)
    try:
        target = _edn_target(out, path, many)
    except OSError as e:
        raise UsageError(f"--to-edn {printable(str(target))}: cannot write: {describe_os_error(e)}") from None
    return write_edn_history(target, ops, keyword_keys=keyword_keys, flag="--to-edn", inputs=inputs or ())


def _check_one(path: Path, args: argparse.Namespace, checkers: list[str] | None, many: bool,
               stage: _Stage) -> dict[str, Any]:
    from floodmark.checkers.linearizability.checker import ModelMismatch, infer_model
    from floodmark.checkers.registry import (
        check_run,
        default_checker_names,
        infer_workload,
        judge_history,
        note_unread,
        refuse_unused_model,
        results_of,
    )
    from floodmark.formats.detect import load_history

    name = str(path)
    if name != STDIN and path.is_dir():
        from floodmark.contracts.history import read_history
        from floodmark.run_dirs.rundir import RunDir, is_run_dir

        stage.reading = False  # (a run's files are regular ones, refused if not: none is waited on)
        if not is_run_dir(path):
            history = RunDir(path).history
            if os.path.lexists(history):  # there, but no file to read: say what it is
                raise UsageError(f"{history}: {file_problem(history) or 'cannot be read'}: a run's history is a regular file")
            raise UsageError(f"{path}: not a run directory (no history.jsonl) and not a history file")
        if args.to_edn:
            ops = read_history(RunDir(path).history)
            out = _to_edn(args.to_edn, path, many, ops, inputs=_edn_inputs(args.paths))
        results = check_run(path, checkers=checkers, time_limit=args.time_limit, note=_note,
                            **_lin_options(args, None, args.model))
        if args.to_edn:
            _warn_if_edn_differs(out, ops, "jsonl", results, args)
        return results
    loaded = load_history(name)
    stage.reading = False
    if args.to_edn:
        # (a history read from EDN keeps its string map keys strings; a JSON one's become keywords)
        out = _to_edn(args.to_edn, Path("stdin" if name == STDIN else name), many, loaded.file_ops,
                      keyword_keys=loaded.format != "edn", inputs=_edn_inputs(args.paths))
    kafka = loaded.kafka_ops is not None
    model = args.model or infer_model(loaded.ops)
    workload = "Jepsen kafka" if kafka else infer_workload(loaded.ops, model)
    # (a Jepsen kafka history has no node events: it is judged by what judges its ops)
    names = checkers or (list(KAFKA_CHECKERS) if kafka else list(default_checker_names(workload, loaded.ops)))
    refuse_unused_model(args.model, names, f"{'<stdin>' if name == STDIN else printable(name)}: a {workload} history")
    # A history file states no configuration: the checkers are told none, not a made-up one.
    judged = judge_history(loaded.ops, {}, None, checkers=names, time_limit=args.time_limit,
                           **_lin_options(args, loaded.format, model))
    if kafka:
        _judged_as_kafka(judged, loaded.unjudged)
    linearizable = judged.get("linearizable")
    if linearizable is not None and isinstance(linearizable.cause, ModelMismatch):
        raise ModelMismatch(f"model {model}: {linearizable.cause}")
    results = results_of(judged, None)
    note_unread(results, loaded.ops, _note)
    if args.to_edn:
        _warn_if_edn_differs(out, loaded.ops, loaded.format, results, args)
    return results


# The checkers of a Jepsen kafka history (:mod:`floodmark.formats.jepsen_kafka`): its
# anomalies are the queue checker's, and no node events or configuration come with it.
KAFKA_CHECKERS = ("queue", "stats")
KAFKA_READ = "Jepsen kafka history: key K is partition key/K"


def _judged_as_kafka(judged: dict[str, CheckerResult], unjudged: tuple[str, ...]) -> None:
    """Say how a Jepsen kafka history was read, and make what it holds that no checker
    judges (transactions, records of failed polls) keep every verdict from valid."""
    for name, result in judged.items():
        if name in DESCRIPTIVE_CHECKERS:
            continue
        result.stats.setdefault("interpretation", KAFKA_READ)
        if unjudged:
            result.stats["not_judged"] = list(unjudged)
    if unjudged:
        hold_short_of_valid(judged, unjudged)


def _note(text: str) -> None:
    """What a verdict rests on that its line does not say (a torn last line left unread)."""
    print(f"floodmark check: warning: {printable(text)}", file=sys.stderr)
    sys.stderr.flush()


def _warn_if_edn_differs(out: Path, ops: list[Any], history_format: str, results: dict[str, Any],
                         args: argparse.Namespace) -> None:
    """One line on standard error if floodmark would judge the EDN written to ``out``
    differently from the history it came from (whose verdict is in ``results``).

    The EDN is written as the history is, op for op, since that is what Jepsen's tools must
    read; but floodmark reads an EDN register by Knossos's conventions, so a JSONL or text
    history whose verdict rests on its own (a register that starts at nil, a nil read that is
    a lost write) would silently change meaning. Only then is the history judged again as
    EDN (the same ops, the EDN conventions), and a differing verdict named with its cause."""
    from floodmark.checkers.linearizability.checker import describe_conventions, format_conventions
    from floodmark.checkers.registry import judge_history

    judged = results.get("checkers", {}).get("linearizable")
    stats = (judged or {}).get("stats") or {}
    model = stats.get("model")
    if model is None:
        return
    source = args.conventions or history_format
    ours, theirs = format_conventions(source, model), format_conventions("edn", model)
    if args.initial is not None:  # (the same --initial would be given to the EDN)
        ours = {**ours, "initial": _initial(args.initial)}
        theirs = {**theirs, "initial": ours["initial"]}
    if ours == theirs:
        return
    # (read as it was: [key value] ops as found, or else as the same arguments and ops read them)
    options = {**_lin_options(args, "edn", model), "conventions": "edn"}
    if stats.get("independent"):
        options["independent"] = True
    again = judge_history(ops, {}, None, checkers=["linearizable"], time_limit=args.time_limit, **options)
    before, after = judged.get("valid"), again["linearizable"].valid if "linearizable" in again else "unknown"
    if after == before:
        return
    kind = "kv key" if model == "kv" else "register"
    print(f"floodmark check: warning: {out}: floodmark judges this EDN {_word(after)}, not {_word(before)}: "
          f"its EDN {kind}s {describe_conventions(theirs)} (this {source} history's "
          f"{describe_conventions(ours)}); check it with --conventions {source} for the same verdict",
          file=sys.stderr)
    sys.stderr.flush()


def _word(valid: Any) -> str:
    return _WORD.get(valid, "UNKNOWN") if isinstance(valid, bool) else "UNKNOWN"


def _summary(results: dict[str, Any]) -> str:
    parts = []
    for name, result in results.get("checkers", {}).items():
        valid = result.get("valid")
        word = _WORD.get(valid, "unknown") if isinstance(valid, bool) else "unknown"
        counts = result.get("anomaly_counts") or {}
        detail = ", ".join(f"{n} {t}" for t, n in counts.items())
        stats = result.get("stats") or {}
        error = stats.get("error")
        # (the linearizable checker says how it read the history: model, keys, conventions)
        how = stats.get("interpretation")
        # (an unknown verdict says why, where the checker said it in words)
        why = stats.get("unjudged_because") if word not in ("VALID", "INVALID") else None
        parts.append(f"{name} {word.lower()}" + (f" ({detail})" if detail else "") + (f" [{how}]" if how else "")
                     + (f" [error: {error}]" if error else "") + (f" [{why}]" if isinstance(why, str) else "")
                     + _malformed(stats.get("malformed_ops")))
    return printable("; ".join(parts))


def _malformed(ops: Any) -> str:
    """The first op a checker could not read, for the verdict line (results.json has them all)."""
    if not isinstance(ops, list) or not ops or not isinstance(ops[0], dict):
        return ""
    more = f"; {len(ops) - 1} more in results" if len(ops) > 1 else ""
    return f" [malformed op {ops[0].get('op')}: {ops[0].get('problem')}{more}]"


def _unusable(path: Path, error: BaseException) -> str:
    """One line naming the unusable input and what is wrong with it."""
    from floodmark.checkers.linearizability.checker import ModelMismatch

    if isinstance(error, SourceError | UsageError):
        return printable(str(error))  # names the file (and line) itself
    path = Path(printable(str(path)))
    if isinstance(error, ModelMismatch):
        return f"{path}: the history does not fit the model: {error}"
    if isinstance(error, OSError):
        from floodmark.inputs.sources import describe_os_error

        return f"{path}: {describe_os_error(error)}"
    if isinstance(error, RecursionError):
        return f"{path}: nested too deeply to check"
    if isinstance(error, MemoryError):
        return f"{path}: too large to check in this machine's memory"
    return f"{path}: {error}"


# Progress on one long path: a line on stderr after STILL_FIRST seconds, then every
# STILL_EVERY, so that a long search (a history file's is bounded only by --time-limit) is
# not taken for a hang. Most paths take well under a second and print nothing of it.
STILL_FIRST = 10.0
STILL_EVERY = 30.0


class _Stage:
    """What a path's check is doing, for the line that says it is still at it."""

    reading = True  # until the history is read: a pipe whose writer stalls holds it here


@contextlib.contextmanager
def _still_checking(path: Path, time_limit: float | None) -> Iterator[_Stage]:
    done = threading.Event()
    started = time.monotonic()
    stage = _Stage()
    bound = (f"the searching checkers give up at {time_limit:g} s" if time_limit is not None else
             "--time-limit S bounds the searching checkers")

    def say() -> None:
        wait = STILL_FIRST
        while not done.wait(wait):
            doing = ("still reading it", "its writer has not finished") if stage.reading else ("still checking", bound)
            print(f"floodmark check: {printable(str(path))}: {doing[0]} after "
                  f"{time.monotonic() - started:.0f} s ({doing[1]})", file=sys.stderr, flush=True)
            wait = STILL_EVERY

    thread = threading.Thread(target=say, name="still-checking", daemon=True)
    thread.start()
    try:
        yield stage
    finally:
        done.set()
        thread.join()


def run_check(args: argparse.Namespace) -> int:
    checkers = _parse_checkers(args.checker)
    if args.time_limit is not None and not (math.isfinite(args.time_limit) and 0 < args.time_limit <= 1e6):
        raise UsageError("--time-limit must be a positive number of seconds, at most 1000000")
    if args.initial is not None:
        _initial(args.initial)  # a bad --initial is a usage error before any path is read
    if args.independent and args.model not in (None, "register", "cas-register", "mutex"):
        raise UsageError(f"--independent checks one register (or mutex) per key; --model {args.model} is neither")
    given_text("--to-edn", args.to_edn, "file name")
    for given in args.paths:
        given_text("PATH", given, "path")
    paths = [Path(p) if p != STDIN else Path(STDIN) for p in args.paths]
    if sum(str(p) == STDIN for p in paths) > 1:
        raise UsageError("standard input ('-') can be checked only once")
    many = len(paths) > 1
    if args.to_edn:
        _refuse_edn_targets(args.to_edn, paths, many)  # never over an input, whatever else happens
    verdicts: list[Any] = []
    unusable = 0
    for path in paths:
        try:
            with _still_checking(path, args.time_limit) as stage:
                results = _check_one(path, args, checkers, many, stage)
        except (SourceError, UsageError, OSError, ValueError, RecursionError, MemoryError) as e:
            # An unusable input is named and the others are still checked; the exit code
            # says some input was unusable.
            unusable += 1
            print(f"floodmark check: error: {_unusable(path, e)}", file=sys.stderr)
            sys.stderr.flush()
            continue
        valid = results["valid"]
        verdicts.append(valid)
        word = _WORD.get(valid, "UNKNOWN") if isinstance(valid, bool) else "UNKNOWN"
        print(f"{word:8} {printable(str(path))}  {_summary(results)}")
        sys.stdout.flush()
    from floodmark.contracts.results import merge_validity

    overall = merge_validity(verdicts) if verdicts else "unknown"
    word = _WORD.get(overall, "UNKNOWN") if isinstance(overall, bool) else "UNKNOWN"
    counted = f"{len(paths)} path{'s' if many else ''}" + (f", {unusable} unusable" if unusable else "")
    if unusable:
        word = "UNUSABLE" if not verdicts else f"{word} of the usable ones"
    print(f"overall: {word} ({counted})")
    return EXIT_BAD_ARGUMENTS if unusable else exit_code(overall)
