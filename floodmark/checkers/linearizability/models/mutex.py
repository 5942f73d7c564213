"""The mutex model (``mutex``): a lock that one process at a time may hold.

Acquire needs the lock free and release needs it held; a history is linearizable if there
is an order in which no two processes held it at once. Nothing is read back, so every call
changes the state and none is read-only.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from floodmark.checkers.linearizability.independent import PerKey
from floodmark.checkers.linearizability.models.contract import DROP, INCONSISTENT, Model, Outcome


class Mutex(PerKey, Model):
    """A lock: acquire needs it free, release needs it held. ``independent``: one lock per key
    of ``[key value]`` ops; ``keys_beside``: per key each op names beside its value (``:key``)."""

    name = "mutex"
    one_object = "the mutex"
    uses_result = frozenset()

    def read_only(self, call: tuple[Any, ...]) -> bool:
        return False

    def initial(self) -> Hashable:
        return False

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        if f not in ("acquire", "release"):
            raise ValueError(f"the mutex model has only acquire/release, not {f!r}")
        return DROP if outcome == "fail" else (f,)

    def step(self, state: Any, call: tuple[Any, ...]) -> Any:
        if call[0] == "acquire":
            return True if not state else INCONSISTENT
        return False if state else INCONSISTENT
