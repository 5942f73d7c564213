"""A node's lives: its events come from one process after another, each ended by a stop or a kill.

A broker process says ``started`` before anything else and, when it shuts down cleanly,
``stopped`` as the last thing it does; a process killed outright says nothing at its end,
and the next one's ``started`` tells of the change. So in a node's own order (``seq``) what
follows a ``stopped`` is the next process's ``started``, or nothing.

An event file in which anything else follows a ``stopped`` hides a restart, or tells of a
process that went on after saying it had ended; either way the checkers, which start a
broker's story afresh where its process changed (a restarted broker recovers its HW from a
checkpoint that may lag), cannot judge it: a HW lowered after a ``stopped`` passed as a
restart's. No node writes such a file, so it is refused, naming the line.
"""

from __future__ import annotations

from collections.abc import Iterable

from floodmark.contracts.node_event_kinds import KnownKind, Started, Stopped, UnknownKind


def life_after_a_stop(kind: str, stopped_on: int) -> str:
    """Why an event of ``kind`` that follows the clean stop on line ``stopped_on`` is refused."""
    return (f"{kind} after the clean stop on line {stopped_on} with no started between (a stopped process "
            "starts again before it emits anything)")


class Lives:
    """A node's events seen one at a time, in its order (``see``): ``found`` is the first that
    follows a ``stopped`` and is no ``started``, as (its line, its kind, the stop's line), and
    ``stopped_on`` the line of the stop the next event must start again after (None: none).
    A node's story seen in parts starts each part where the one before it left off."""

    def __init__(self, stopped_on: int | None = None) -> None:
        self.stopped_on = stopped_on
        self.found: tuple[int, str, int] | None = None

    def see(self, line: int, kind: str) -> None:
        if self.found is not None:
            return
        if self.stopped_on is not None and kind != Started.kind:
            self.found = (line, kind, self.stopped_on)
        self.stopped_on = line if kind == Stopped.kind else None


def first_life_after_a_stop(story: Iterable[tuple[int, KnownKind | UnknownKind]]) -> tuple[int, str, int] | None:
    """The first event of ``story`` (line and body, in the node's order) that follows a
    ``stopped`` and is no ``started``, as (its line, its kind, the stop's line); None if none."""
    lives = Lives()
    for line, body in story:
        lives.see(line, body.kind)
        if lives.found is not None:
            break
    return lives.found
