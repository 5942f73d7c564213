"""What a checker is: a named function from a run's record to a verdict.

A checker receives a :class:`CheckInput` (the client history, the node events and the run's
configuration) and returns a :class:`~floodmark.contracts.results.CheckerResult`. Checkers never read
files themselves, so the same checker runs in-process (``floodmark check``) and inside Spark
UDFs (``floodmark analyze``). They know nothing of the implementation that ran: what a run
promised comes from its configuration and its node events, so the same checkers judge
foreign histories, which state no configuration at all (``config`` is then None).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from floodmark.contracts.history import Op
from floodmark.contracts.results import CheckerResult

if TYPE_CHECKING:  # types only: judging a history file must not load node events or YAML
    from floodmark.checkers.permitted import LossPermissions
    from floodmark.contracts.node_events import NodeEvent
    from floodmark.contracts.run_config import TestConfig


@dataclass(frozen=True)
class CheckInput:
    history: list[Op]
    events: dict[str, list[NodeEvent]] = field(default_factory=dict)
    config: TestConfig | None = None  # None: the run states no configuration (a foreign history)
    time_limit: float | None = None  # seconds; checkers that search answer "unknown" past it
    # None: ``events`` hold each node's whole file, and the event coverage looks for lines
    # missing from them. Where they hold a part of each file (Spark's by-partition groups),
    # what was found over the whole files instead: the missing lines, or "" for none.
    whole_file_gap: str | None = None
    # Nodes whose event file ends in a line cut short, or in a whole line without its newline
    # (see node_events.iter_events): the node was killed writing it, or the file was cut. What such a node did after that line may be
    # missing from its story, so its story proves nothing by what it lacks.
    cut_short: frozenset[str] = frozenset()
    # Whether the node event files are known to be those the run wrote (its digest.json says
    # so, or the events are in memory as the caller made them). False for a run directory
    # without a digest: a file may then have been cut at a line's end, which leaves no cut
    # line and no gap in the numbers, so what a node's story lacks at its end proves nothing.
    files_recorded: bool = True

    @cached_property
    def loss_permissions(self) -> LossPermissions:
        """What losses the run permits, and where (worked out once: several checkers ask,
        and finding the recoveries scans every node event)."""
        from floodmark.checkers.permitted import loss_permissions

        return loss_permissions(self.config, self.history, self.events)

    @cached_property
    def coverage_problem(self) -> str | None:
        """Why the node events do not speak for every broker of the run, or None (worked out
        once: the white-box checkers all ask, and it scans every event)."""
        from floodmark.checkers.event_coverage import uncovered

        return uncovered(self.events, self.config, self.whole_file_gap)

    @cached_property
    def missing_lines(self) -> frozenset[str]:
        """The nodes whose event files miss lines (a gap in their numbering): like those cut
        short, their stories prove nothing by what they lack."""
        from floodmark.checkers.event_coverage import nodes_missing_lines

        return nodes_missing_lines(self.events, self.whole_file_gap)

    def loss_details(self, topic: str, partition: int, *, committed: bool) -> dict[str, Any]:
        """What a loss anomaly in this partition carries: ``permitted_by`` when the run
        permits it. ``committed``: what was lost was read by a consumer (see
        :mod:`floodmark.checkers.permitted`). A new dict each time, for the checker to extend."""
        return self.loss_permissions.details(topic, partition, committed=committed)


class NotJudgeable(ValueError):
    """What a checker raises when the history is not of the kind it judges (ops its model does
    not have): its verdict is unknown, for the reason given, and that is no crash."""


class Checker(Protocol):
    name: str

    def check(self, run: CheckInput) -> CheckerResult: ...
