"""Input errors that point at the problem: which file, which line, what is wrong.

Every reader of user-supplied files (histories, node events, configurations, foreign
formats) raises a subclass, so the CLI can print ``file:line: problem`` and exit 254 the same
way whatever was being read.
"""

from __future__ import annotations


class SourceError(ValueError):
    """Malformed input at ``source:line`` (line 0 when the problem is the whole file)."""

    def __init__(self, source: str, line: int, problem: str) -> None:
        super().__init__(f"{source}:{line}: {problem}" if line else f"{source}: {problem}")
        self.source = source
        self.line = line
        self.problem = problem
