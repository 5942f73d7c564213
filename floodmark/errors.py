"""Errors and exit codes shared by every part of floodmark, below everything else.

Every ``floodmark`` command ends with one of four exit codes: 0 valid (or success), 1 invalid,
2 unknown, 254 bad arguments or unusable input. A command that finds its input unusable
after parsing raises :class:`UsageError`; the CLI prints its one-line message and exits 254.

Every reader of user-supplied files (histories, node events, configurations, foreign
formats) raises a :class:`SourceError`, so the CLI can print ``file:line: problem`` and exit
254 the same way whatever was being read.
"""

from __future__ import annotations

import unicodedata

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_ARGUMENTS = 254


class UsageError(Exception):
    """Bad arguments or unusable input discovered after parsing: exits 254 with a message."""


class SourceError(ValueError):
    """Malformed input at ``source:line`` (line 0 when the problem is the whole file)."""

    def __init__(self, source: str, line: int, problem: str) -> None:
        problem = one_line(problem)
        source = printable(source)  # a file's name may hold a newline too
        super().__init__(f"{source}:{line}: {problem}" if line else f"{source}: {problem}")
        self.source = source
        self.line = line
        self.problem = problem

    def __reduce__(self) -> tuple[type[SourceError], tuple[str, int, str]]:
        # An explorer's worker hands its errors back pickled: by default the message alone
        # would be passed to a constructor taking three arguments, and the pool would break.
        return type(self), (self.source, self.line, self.problem)


MAX_PROBLEM_CHARS = 300


def one_line(problem: str) -> str:
    """A problem as one line of bounded length: the input it quotes is the user's, of any
    length and with any characters (a refusal must not repeat a megabyte back)."""
    flat = printable(problem)
    return flat if len(flat) <= MAX_PROBLEM_CHARS else flat[:MAX_PROBLEM_CHARS - 3] + "..."


def first_few(names: list[str], shown: int) -> str:
    """Up to ``shown`` of ``names``, comma-separated, and how many more: a one-line message
    names a few of a long list (files that differ, faults edited, settings) and counts the rest."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


# C0 and C1 controls but the tab, and the Unicode line and paragraph separators: every
# character a terminal acts on or that ends a line (str.splitlines ends one at \x85 too);
# and the lone surrogates a file name holds for its bytes that are not UTF-8 (os.fsdecode's
# surrogate escapes, shown as the byte they stand for), which no stream can write.
_CONTROLS = ({c: f"\\x{c:02x}" for c in [*range(32), *range(127, 160)] if chr(c) != "\t"}
             | {ord("\r"): "\\r", ord("\n"): "\\n", 0x2028: "\\u2028", 0x2029: "\\u2029"}
             | {c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)}
             | {0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)})


def printable(text: str) -> str:
    """``text`` (a file name, a message quoting one) with its control characters escaped:
    a line says one thing, and a name cannot end it or drive the terminal. A name's bytes
    that are not UTF-8 are shown as ``\\xff``. Invisible format characters are escaped
    too: the bidirectional overrides and isolates reorder what a terminal shows (a name
    holding U+202E would show its end first: "Trojan Source", CVE-2021-42574), and the
    zero-width ones make two different names look the same."""
    if text.isprintable():
        return text
    shown = text.translate(_CONTROLS)
    return "".join(_escaped(c) if not c.isprintable() and unicodedata.category(c) == "Cf" else c
                   for c in shown)


def _escaped(c: str) -> str:
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"


def exit_code(valid: object) -> int:
    """The exit code for a verdict: 0 for ``True``, 1 for ``False``, 2 for anything else."""
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN


def given_text(option: str, value: str | None, what: str, example: str = "one") -> str | None:
    """``value`` unless it is empty or only blanks: then a UsageError saying ``option``
    names ``what`` (a file name, a directory, a URL) but gives none, and, for an argument,
    what to name instead (``example``). None (not given) stays.
    A value the shell left empty (``--store "$STORE"`` with STORE unset) must not stand for
    the default or the current directory: the user named something, and would get something
    else without a word."""
    if value is not None and not value.strip():
        # (an option may be left out for its default; an argument such as PATH may not)
        fix = f"give one, or leave {option} out for the default" if option.startswith("-") else f"name {example}"
        raise UsageError(f"{option}: {'an empty' if not value else 'a blank'} {what} ({value!r}); {fix}")
    return value
