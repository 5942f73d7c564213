"""``floodmark check``: judge run directories and history files from the command line.

    floodmark check PATH... [--model M] [--checker NAME,...] [--time-limit S] [--to-edn OUT]

A PATH is a run directory (its history, node events and ``test.yaml`` are judged by the
workload's checkers and ``results.json`` is written or updated) or a history file in any
format :mod:`floodmark.formats.detect` recognises (judged by the linearizability checker
unless it is a queue or log-lin history). One verdict line per path, then the overall
verdict; the exit code is 0 valid, 1 invalid, 2 unknown, 254 for bad arguments or an
unreadable input (reported as ``file:line: problem``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from floodmark.checkers.linearizable import ModelMismatch, format_conventions, infer_model
from floodmark.checkers.models import MODEL_NAMES
from floodmark.checkers.registry import (
    CHECKER_NAMES,
    check_run,
    default_checker_names,
    judge_history,
    results_of,
)
from floodmark.errors import UsageError, exit_code
from floodmark.formats import edn
from floodmark.formats.detect import load_history
from floodmark.formats.jepsen_edn import write_edn_history
from floodmark.history import HistoryError, read_history
from floodmark.node_events import NodeEventError
from floodmark.results import Validity, merge_validity
from floodmark.run_config import ConfigError
from floodmark.rundir import RunDir, is_run_dir

_WORD = {True: "VALID", False: "INVALID"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check run directories or history files (JSONL, Jepsen EDN, Jepsen text logs)",
        description=(
            "Judge run directories (their history, node events and test.yaml; results.json is "
            "written) and history files in our JSONL, Jepsen EDN or Jepsen 2014 text logs (the "
            "format is detected). Prints a verdict per path and overall. Register histories follow "
            "their tool's conventions: Knossos EDN registers start at 0 and a nil read tells "
            "nothing; Jepsen text logs start at nil and a failed cas observed a mismatch."
        ),
        epilog="Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or unreadable input.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="run directories or history files")
    parser.add_argument("--model", choices=MODEL_NAMES,
                        help="linearizability model (default: guessed from the workload or the ops)")
    parser.add_argument("--checker", metavar="NAME,...",
                        help=f"checkers to run, comma-separated, from: {', '.join(CHECKER_NAMES)}")
    parser.add_argument("--time-limit", type=float, metavar="S",
                        help="seconds the searching checkers may take before answering 'unknown'")
    parser.add_argument("--initial", metavar="EDN",
                        help="the register model's initial value, in EDN (e.g. 0, nil, '{:x 0}')")
    parser.add_argument("--to-edn", metavar="OUT",
                        help="also write each history as Jepsen EDN (a file for one path, else a directory)")
    parser.set_defaults(func=run_check)


def _parse_checkers(raw: str | None) -> list[str] | None:
    if raw is None:
        return None
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in CHECKER_NAMES]
    if unknown or not names:
        raise UsageError(f"unknown checker {', '.join(unknown) or '(none given)'}; choose from: {', '.join(CHECKER_NAMES)}")
    return names


def _lin_options(args: argparse.Namespace, history_format: str, model: str) -> dict[str, Any]:
    options: dict[str, Any] = {"model": model, **format_conventions(history_format, model)}
    if args.initial is not None:
        try:
            from floodmark.formats.jepsen_edn import plain

            options["initial"] = plain(edn.loads(args.initial, "--initial"))
        except edn.EdnError as e:
            raise UsageError(f"--initial: {e.problem}") from None
    return options


def _edn_target(out: str, path: Path, many: bool) -> Path:
    if not many:
        return Path(out)
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{path.name if path.is_dir() else path.stem}.edn"


def _check_one(path: Path, args: argparse.Namespace, checkers: list[str] | None, many: bool) -> dict[str, Any]:
    if path.is_dir():
        if not is_run_dir(path):
            raise UsageError(f"{path}: not a run directory (no history.jsonl) and not a history file")
        if args.to_edn:
            write_edn_history(_edn_target(args.to_edn, path, many), read_history(RunDir(path).history))
        options: dict[str, Any] = {"model": args.model} if args.model else {}
        if args.initial is not None:
            options.update({k: v for k, v in _lin_options(args, "jsonl", args.model or "cas-register").items()
                            if k == "initial"})
        return check_run(path, checkers=checkers, time_limit=args.time_limit, **options)
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    loaded = load_history(path)
    if args.to_edn:
        write_edn_history(_edn_target(args.to_edn, path, many), loaded.ops)
    fs = {op.f for op in loaded.ops}
    workload = "queue" if fs & {"send", "poll", "drain"} else None
    model = args.model or infer_model(loaded.ops)
    if workload is None and model == "log":
        workload = "log-lin"
    names = checkers or list(default_checker_names(workload))
    # A history file states no configuration: the checkers are told none, not a made-up one.
    judged = judge_history(loaded.ops, {}, None, checkers=names, time_limit=args.time_limit,
                           **_lin_options(args, loaded.format, model))
    linearizable = judged.get("linearizable")
    if linearizable is not None and isinstance(linearizable.cause, ModelMismatch):
        raise ModelMismatch(f"model {model}: {linearizable.cause}")
    return results_of(judged, None)


def _summary(results: dict[str, Any]) -> str:
    parts = []
    for name, result in results.get("checkers", {}).items():
        valid = result.get("valid")
        word = _WORD.get(valid, "unknown") if isinstance(valid, bool) else "unknown"
        counts = result.get("anomaly_counts") or {}
        detail = ", ".join(f"{n} {t}" for t, n in counts.items())
        error = (result.get("stats") or {}).get("error")
        parts.append(f"{name} {word.lower()}" + (f" ({detail})" if detail else "") + (f" [error: {error}]" if error else ""))
    return "; ".join(parts)


def run_check(args: argparse.Namespace) -> int:
    checkers = _parse_checkers(args.checker)
    if args.time_limit is not None and args.time_limit <= 0:
        raise UsageError("--time-limit must be positive")
    paths = [Path(p) for p in args.paths]
    many = len(paths) > 1
    verdicts: list[Validity] = []
    for path in paths:
        try:
            results = _check_one(path, args, checkers, many)
        except (HistoryError, NodeEventError) as e:
            raise UsageError(str(e)) from None
        except ModelMismatch as e:
            raise UsageError(f"{path}: the history does not fit the model: {e}") from None
        except ConfigError as e:  # names the file itself
            raise UsageError(str(e)) from None
        except (OSError, ValueError) as e:
            raise UsageError(f"{path}: {e}") from None
        valid = results["valid"]
        verdicts.append(valid)
        word = _WORD.get(valid, "UNKNOWN") if isinstance(valid, bool) else "UNKNOWN"
        print(f"{word:8} {path}  {_summary(results)}")
        sys.stdout.flush()
    overall = merge_validity(verdicts)
    word = _WORD.get(overall, "UNKNOWN") if isinstance(overall, bool) else "UNKNOWN"
    print(f"overall: {word} ({len(paths)} path{'s' if many else ''})")
    return exit_code(overall)
