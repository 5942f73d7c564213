"""``floodmark report`` and ``floodmark serve``: the report and the results browser on the CLI.

``floodmark report RUN_DIR [--out FILE]`` renders (or re-renders) a run's report; what it
could not read (a damaged results.json, node events) is noted on the page and in one line
each on stderr, and the exit code is then 254 (the page is written all the same); an
``--out`` that is a directory or a file of the run is refused (254) and a device or FIFO is
written through (:mod:`floodmark.inputs.output_paths`);
``floodmark serve [--store DIR] [--port 8080] [--host 127.0.0.1]`` browses a store of runs
(``--host ::1`` or another IPv6 address, bracketed or not, serves over IPv6).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from floodmark.contracts.history import HistoryError
from floodmark.errors import EXIT_BAD_ARGUMENTS, UsageError, given_text, printable
from floodmark.inputs.output_paths import STDOUT


def register(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser(
        "report", help="render the HTML report of a run directory",
        description="Render RUN_DIR's report.html (or --out FILE): one self-contained HTML file.")
    report.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (store/<test>/<timestamp>-s<seed>)")
    report.add_argument("--out", metavar="FILE",
                        help="where to write the report (default RUN_DIR/report.html; '-' for standard output)")
    report.set_defaults(func=report_command)

    serve = subparsers.add_parser(
        "serve", help="browse a store of runs in a web browser",
        description="Serve an index of every run in the store, newest first, with links to reports and files.")
    serve.add_argument("--store", default="store", metavar="DIR", help="the store directory (default ./store)")
    serve.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default 127.0.0.1, ::1 for IPv6; the store may hold sensitive logs)")
    serve.set_defaults(func=serve_command)


def report_command(args: argparse.Namespace) -> int:
    from floodmark.reports.report import write_report

    given_text("RUN_DIR", args.run_dir, "path")
    given_text("--out", args.out, "file name")
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: {_not_a_directory(run_dir)} (report renders a run directory)")
    warnings: list[str] = []
    try:
        target = write_report(run_dir, args.out, warn=warnings.append)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    except HistoryError as e:
        raise UsageError(f"cannot read the history: {e}") from None
    for warning in warnings:  # the page shows them too; an input it could not read is bad input
        print(f"floodmark report: warning: {printable(warning)}", file=sys.stderr)
    if args.out != STDOUT:  # (the page itself went there; one line, whatever its name holds)
        print(printable(str(target)))
    return EXIT_BAD_ARGUMENTS if warnings else 0


def _not_a_directory(path: Path) -> str:
    return "is a file, not a directory" if path.exists() else "no such directory"


def serve_command(args: argparse.Namespace) -> int:
    from floodmark.reports.server import host_problem, serve, unbracketed, url_host

    given_text("--store", args.store, "directory name")
    store = Path(args.store)
    if not store.is_dir():
        raise UsageError(f"--store {store}: {_not_a_directory(store)}")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be between 0 and 65535")
    if not args.host.strip():  # the empty address is every interface: say so, never by accident
        raise UsageError("--host: empty; give an address (0.0.0.0 for every interface)")
    problem = host_problem(args.host)
    if problem is not None:
        raise UsageError(f"--host {printable(args.host)}: {problem}")
    host = unbracketed(args.host)  # "[::1]", as copied from a URL, is ::1
    try:
        serve(store, host, args.port, announce=lambda url: print(f"serving {printable(str(store))} at {url}",
                                                                  flush=True))
    except OSError as e:
        print(f"floodmark serve: cannot listen on {printable(url_host(host))}:{args.port}: {e.strerror or e}",
              file=sys.stderr)
        return 254
    return 0
