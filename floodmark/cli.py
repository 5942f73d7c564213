"""The ``floodmark`` command line: the top of the house, imported by nobody.

Each part that offers commands has a ``commands`` module with a ``register(subparsers)``
function that adds its subcommands; every subcommand sets ``func(args) -> int``. This module
names those modules, so dependencies point down from here and never back up. Exit codes
(``floodmark.errors``) are shared by all of them:

    0 valid (or success), 1 invalid, 2 unknown, 254 bad arguments or unusable input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from floodmark.checkers import commands as checker_commands
from floodmark.errors import EXIT_BAD_ARGUMENTS, UsageError
from floodmark.pipeline import commands as pipeline_commands
from floodmark.reference.real import commands as reference_commands
from floodmark.reports import commands as report_commands
from floodmark.run import commands as run_commands

# The modules that contribute subcommands, in --help order.
COMMAND_MODULES = (run_commands, checker_commands, report_commands, pipeline_commands, reference_commands)


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error exits 254 (2 means 'unknown' for floodmark)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_ARGUMENTS, f"{self.prog}: error: {message}\n")


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="floodmark",
        description=(
            "Chaos testing for Kafka-style replicated logs. Start with `floodmark run --help` "
            "(run a chaos test), `floodmark check --help` (check a history) or "
            "`floodmark report --help` (render a report)."
        ),
        epilog="Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_ARGUMENTS
    try:
        return int(args.func(args))
    except UsageError as e:
        print(f"floodmark {args.command}: error: {e}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
