"""``floodmark analyze``: ingest a store of runs, check them at scale, aggregate.

Exit codes: 0 when every run was read, 254 when a run was rejected (each named, with why,
in one line on stderr; the aggregates over the other runs are written all the same) or
for bad arguments: a store that is not a directory, an ``--out`` or ``--parquet`` that is a
file or cannot be made a directory this process writes to (refused before Spark starts)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from floodmark.errors import EXIT_BAD_ARGUMENTS, UsageError, given_text, one_line, printable


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="analyse a store of runs on Spark (ingest, check at scale, aggregate)",
        description=(
            "Ingest every run directory under STORE into a Parquet store (incrementally: runs "
            "already ingested are skipped), re-check runs with the checkers on Spark, and write "
            "aggregate tables (Parquet + CSV) and summary.html to --out. Runs on local[*] by "
            "default; pass --master spark://HOST:7077 or use spark-submit for a cluster."
        ),
    )
    p.add_argument("store", help="the store directory (as written by `floodmark run --store`)")
    p.add_argument("--master", default=None, help="Spark master URL (default: local[*])")
    p.add_argument("--out", default=None, help="output directory (default: STORE/_analysis)")
    p.add_argument("--parquet", default=None, help="Parquet store directory (default: OUT/parquet)")
    p.add_argument("--no-check", action="store_true",
                   help="skip re-checking runs on Spark; aggregate the results.json verdicts as recorded")
    p.add_argument("--quiet", action="store_true", help="print no progress lines, only the outcome")
    p.set_defaults(func=run_analyze)


def run_analyze(args: argparse.Namespace) -> int:
    given_text("STORE", args.store, "path")
    given_text("--out", args.out, "directory name")
    given_text("--parquet", args.parquet, "directory name")
    store = Path(args.store)
    if not store.is_dir():
        raise UsageError(f"store {printable(str(store))} is not a directory")
    out = Path(args.out) if args.out else store / "_analysis"
    parquet = Path(args.parquet) if args.parquet else out / "parquet"
    from floodmark.pipeline.session import check_master

    check_master(args.master)  # before anything is made: a bad argument changes nothing
    writable_directory(out, "--out" if args.out else "--out (default STORE/_analysis)")
    writable_directory(parquet, "--parquet" if args.parquet else "--parquet (default OUT/parquet)")
    from floodmark.pipeline.analysis import analyze

    result = analyze(store, out, parquet, master=args.master, check=not args.no_check,
                     log=(lambda line: None) if args.quiet else lambda line: print(line, file=sys.stderr, flush=True))
    print(result.ingest.summary())
    print(f"summary: {printable(str(result.summary_path))}")
    print(f"tables:  {printable(str(out / 'tables'))}")
    # A run it could not read is bad input: named, one line each, and the exit code says so
    # (the aggregates cover the other runs and are written all the same).
    for path, error in result.ingest.rejected:
        why, shown = one_line(error), printable(path)  # most reasons name the file in the run: the path once
        print(f"floodmark analyze: error: rejected {why if why.startswith(shown) else f'{shown}: {why}'}",
              file=sys.stderr)
    return EXIT_BAD_ARGUMENTS if result.ingest.rejected else 0


def writable_directory(path: Path, option: str) -> None:
    """Make ``path`` a directory if it is not one yet; UsageError naming ``option`` when it is
    a file, cannot be made, or is not writable."""
    shown = printable(str(path))
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {shown}: is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{option} {shown}: cannot use it as a directory: {(e.strerror or str(e)).lower()}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {shown}: not writable")
