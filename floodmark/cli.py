"""The ``floodmark`` command line.

Each package that offers commands has a ``commands`` module with a
``register(subparsers)`` function that adds its subcommands; every subcommand sets
``func(args) -> int``. Exit codes are shared by all of them:

    0 valid (or success), 1 invalid, 2 unknown, 254 bad arguments or unusable input.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from typing import NoReturn

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_ARGUMENTS = 254

# Packages whose ``commands`` module contributes subcommands, in --help order.
COMMAND_PACKAGES = ("harness", "checkers", "reports", "pipeline", "reference")


class UsageError(Exception):
    """Bad arguments or unusable input discovered after parsing: exits 254 with a message."""


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
    for package in COMMAND_PACKAGES:
        name = f"floodmark.{package}.commands"
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(subparsers)
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
