"""The ``floodmark`` command line: the top of the house, imported by nobody.

Each part that offers commands has a ``commands`` module with a ``register(subparsers)``
function that adds its subcommands; every subcommand sets ``func(args) -> int``. This module
names those modules, so dependencies point down from here and never back up. Exit codes
(``floodmark.errors``) are shared by all of them:

    0 valid (or success), 1 invalid, 2 unknown, 254 bad arguments or unusable input.

A command module is imported only when its command runs (or for ``floodmark --help``):
``floodmark check`` must start in about the time of a bare interpreter, not load the broker,
the harness and Spark glue it never uses. :data:`COMMANDS` says which module offers which
subcommand; a test holds it to what the modules register.

A reader that goes away early (``floodmark check DIR | head -1``) closes the pipe the output
goes to. Every command then finishes quietly, as if its output had been read: the work is
done (results written, runs torn down) and the exit code is the verdict, never a
``BrokenPipeError`` traceback halfway through a command. Output that cannot be written for
any other reason (standard output closed, ``>/dev/full``) is lost, and the verdict with it:
the command still finishes, then says so in one line and exits 254, never 0 or 1 for a
verdict nobody could read, and never a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NoReturn, TextIO, cast

from floodmark.errors import EXIT_BAD_ARGUMENTS, SourceError, UsageError, printable


def _run_commands() -> ModuleType:
    from floodmark.run import commands

    return commands


def _checker_commands() -> ModuleType:
    from floodmark.checkers import commands

    return commands


def _report_commands() -> ModuleType:
    from floodmark.reports import commands

    return commands


def _pipeline_commands() -> ModuleType:
    from floodmark.pipeline import commands

    return commands


def _reference_commands() -> ModuleType:
    from floodmark.reference.real import commands

    return commands


# The modules that contribute subcommands, in --help order, with the subcommands each adds.
COMMANDS: tuple[tuple[Callable[[], ModuleType], tuple[str, ...]], ...] = (
    (_run_commands, ("run", "repro", "explore", "shrink", "images", "cleanup")),
    (_checker_commands, ("check",)),
    (_report_commands, ("report", "serve")),
    (_pipeline_commands, ("analyze",)),
    (_reference_commands, ("topics", "reassign-partitions", "preferred-replica-election", "log-dirs", "broker")),
)


# Where an option's value is what argparse would take for an option of its own: every
# number a float or int option reads, negative ones included ("-inf", "-1e3", "-.5").
# argparse's own pattern knows only "-1" and "-1.5", and said of "--time-limit -inf" that
# --time-limit "expected one argument", never what was wrong with the value.
_NEGATIVE_NUMBER = re.compile(r"^-(?:(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:e[-+]?\d[\d_]*)?|inf(?:inity)?|nan)$",
                              re.IGNORECASE)


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong, and where help is) and exits
    254 (2 means 'unknown' for floodmark), and a value that is a negative number of any
    spelling is the option's value, never taken for an option of its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_ARGUMENTS, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> ArgumentParser:
    """The parser for every subcommand, or (``command``) only the module offering that one."""
    parser = ArgumentParser(
        prog="floodmark",
        description=(
            "Chaos testing for Kafka-style replicated logs. Start with `floodmark run --help` "
            "(run a chaos test), `floodmark check --help` (check a history) or "
            "`floodmark report --help` (render a report)."
        ),
        epilog="Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 130 interrupted.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    offering = [load for load, names in COMMANDS if command in names]
    for load in offering or [load for load, _ in COMMANDS]:
        load().register(subparsers)
    return parser


class _ReaderMayLeave:
    """A text stream that, once its reader has gone (a closed pipe), drops what it is given;
    and once it cannot be written at all (closed from the start, a full disk), drops it too
    and says why in ``lost``.

    The stream's descriptor is pointed at /dev/null then, so what the stream still buffers
    (and the interpreter's flush at exit) goes nowhere instead of failing again."""

    def __init__(self, stream: TextIO | None) -> None:
        self.lost: str | None = None  # why what was written went nowhere (not a reader gone)
        if stream is None:  # started with the descriptor closed (``>&-``)
            stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)
            self.lost = "it is closed"
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
        except OSError as e:
            self._cannot_write(e)
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()
        except OSError as e:
            self._cannot_write(e)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)

    def _cannot_write(self, error: OSError) -> None:
        if self.lost is None:
            self.lost = (error.strerror or str(error)).lower()
        self._reader_gone()

    def _reader_gone(self) -> None:
        try:
            fd = self._stream.fileno()
        except (OSError, ValueError):
            return  # no descriptor beneath it: nothing buffers for the exit's flush
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    streams = sys.stdout, sys.stderr
    out, err = _ReaderMayLeave(streams[0]), _ReaderMayLeave(streams[1])
    sys.stdout, sys.stderr = cast(TextIO, out), cast(TextIO, err)
    try:
        code = _main(argv)
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = streams
    if out.lost is not None:
        err.write(f"floodmark: error: cannot write to standard output: {out.lost}; what it said is lost\n")
        err.flush()
        return EXIT_BAD_ARGUMENTS
    return code


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_ARGUMENTS
    try:
        return int(args.func(args))
    except (UsageError, SourceError) as e:
        print(f"floodmark {args.command}: error: {printable(str(e))}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
