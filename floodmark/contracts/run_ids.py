"""Run ids: which run a node's events belong to.

A node's event file does not say which run wrote it, so events copied from another run (of
the same test, say) would be judged as this run's and could make its verdict, valid or
invalid; ``digest.json`` guards the files byte for byte, but is removed on purpose to check
edited ones. So every run has an id: the harness records it in ``test.yaml`` (``run_id``)
and gives it to every broker it starts, and each broker names it in its ``started`` event.
A node's events from one ``started`` event to the next are of the run that event names.

Read as a run's (:func:`~floodmark.contracts.node_events.read_events_dir` with what its
configuration states, a :class:`StatedRun`), a run directory's events are held to it
(:class:`RunIdCheck`), each refusal naming the file and the line:

- a ``started`` event must name the run id ``test.yaml`` states: one naming another run is
  another run's, and so is one naming none where ``test.yaml`` states one (the harness that
  wrote it gave every broker the id: a broker without one was started by an older harness,
  for another run);
- where ``test.yaml`` states an id, a node's events begin (in its own order, by ``seq``) with
  a ``started`` event: events before any say nothing of which run wrote them;
- a ``test.yaml`` written before run ids (no ``run_id``) is a run whose brokers named none:
  its events are read as they always were, and a ``started`` event naming a run is another's;
- a run with no ``test.yaml`` states no id, but it is one run: every ``started`` event must
  name the id (or the lack of one) that the first read names (files in name order).

An id is a short token (:data:`RUN_ID`), so a message can quote it whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from floodmark.contracts.node_event_fields import NodeEventError, short

# What an id may be: letters, digits, "-" and "_", at most 64 (the harness writes 16 hex digits).
RUN_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


def run_id_problem(value: object) -> str | None:
    """Why ``value`` cannot be a run id (None: it can)."""
    if not isinstance(value, str):
        return f"expected a string, got {short(value)}"
    if not RUN_ID.fullmatch(value):
        return f"{short(value)} is not a run id (1 to 64 letters, digits, '-' or '_')"
    return None


@dataclass(frozen=True)
class StatedRun:
    """What a run's configuration states of its id: ``run_id`` (None: a run from before run
    ids), and ``source``, the file that states it, for messages."""

    run_id: str | None
    source: str


@dataclass(frozen=True)
class _Named:
    """The first ``started`` event read of a run with no configuration: the run it names."""

    run_id: str | None
    source: str
    line: int


def _run(run_id: str | None) -> str:
    return "no run id" if run_id is None else f"run id {short(run_id)}"


class RunIdCheck:
    """Holds the events of one run directory to one run, file by file as they are read
    (see the module): :meth:`started` for each ``started`` event, :meth:`first_event` for
    each file's first event in its node's order. Each raises :class:`NodeEventError` naming
    the line."""

    def __init__(self, stated: StatedRun | None) -> None:
        self.stated = stated
        self._named: _Named | None = None  # what the first started event said, with no configuration

    def first_event(self, kind: str, source: str, line: int) -> None:
        """A node's first event (lowest ``seq``), of ``kind``: where the run states an id, it
        must be ``started``."""
        stated = self.stated
        if kind != "started" and stated is not None and stated.run_id is not None:
            raise NodeEventError(source, line, f"{kind} before any started event: nothing says it is of this run "
                                               f"({stated.source} states {_run(stated.run_id)}); a node's events "
                                               "begin with its started event")

    def started(self, run_id: str | None, source: str, line: int) -> None:
        """A ``started`` event naming ``run_id`` (None: it names none)."""
        stated = self.stated
        if stated is not None:
            if run_id != stated.run_id:
                raise NodeEventError(source, line, f"started names {_run(run_id)}, but {stated.source} states "
                                                   f"{_run(stated.run_id)}: these events are another run's")
            return
        named = self._named
        if named is None:
            self._named = _Named(run_id, source, line)
        elif run_id != named.run_id:
            raise NodeEventError(source, line, f"started names {_run(run_id)}, but {named.source}:{named.line} names "
                                               f"{_run(named.run_id)}: the events of two runs")
