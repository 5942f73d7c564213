"""What a checker is: a named function from a run's record to a verdict.

A checker receives a :class:`CheckInput` (the client history, the node events and the run's
configuration) and returns a :class:`~floodmark.results.CheckerResult`. Checkers never read
files themselves, so the same checker runs in-process (``floodmark check``) and inside Spark
UDFs (``floodmark analyze``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from floodmark.history import Op
from floodmark.node_events import NodeEvent
from floodmark.results import CheckerResult


@dataclass(frozen=True)
class CheckInput:
    history: list[Op]
    events: dict[str, list[NodeEvent]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    time_limit: float | None = None  # seconds; checkers that search answer "unknown" past it


class Checker(Protocol):
    name: str

    def check(self, run: CheckInput) -> CheckerResult: ...
