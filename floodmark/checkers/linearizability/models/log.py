"""The log model (``log``): the append-only log of one partition, as the ``log-lin`` workload uses it.

An append returns the offset it was written at (an acknowledged one that names none does not
fit: the workload records an append it cannot place as unknown); a read of an offset returns
the record there, or nothing past the end; a final read (``final-read``, made after every
fault is healed) returns every record of the log from offset 0, and so says where it ends.
Records never move in an append-only log, so what any read
or acknowledgement saw at an offset pins every state (which keeps the search short), and an
unknown append whose value no read returned is only "some record" (so such appends are
interchangeable). Each partition is an independent object.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final

from floodmark.checkers.linearizability.models.contract import DROP, INCONSISTENT, Model, Outcome
from floodmark.checkers.linearizability.values import canonical, ordered
from floodmark.checkers.linearizability.values import shown as _shown
from floodmark.checkers.op_agreement import acknowledgement_problem, read_problem
from floodmark.contracts.history import FINAL_READ

UNOBSERVED: Final = "<a record no read returned>"  # stands for the value of an unobserved unknown append


class Log(Model):
    """The append-only log of one partition.

    States are interned log ids (0 is the empty log) so that the search's cache holds small
    integers, not whole logs: each id remembers its parent, its last record and its length.
    """

    name = "log"
    failures_hold_nothing = True  # (the log-lin workload records a failed append without an offset)

    def __init__(self) -> None:
        self.parent: list[int] = [-1]
        self.last: list[Any] = [None]
        self.length: list[int] = [0]
        self.children: dict[tuple[int, Any], int] = {}
        self._value_at: dict[tuple[int, int], Any] = {}
        self.known_at: dict[int, Any] = {}  # offset -> the value some read or ack saw there

    def initial(self) -> Hashable:
        return 0

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        if f == "append":
            if outcome == "fail":
                return DROP
            offset = completed.get("offset") if outcome == "ok" and isinstance(completed, dict) else None
            if outcome == "ok" and offset is None:  # (the workload records such an append as info)
                raise ValueError(f"an acknowledged append names no offset (its completion holds {_shown(completed)})")
            if offset is not None and (type(offset) is not int or offset < 0):
                raise ValueError(f"an offset is a whole number from 0, not {_shown(offset)}")
            if offset is not None and (disagreement := acknowledgement_problem(invoked, completed)):
                raise ValueError(disagreement)  # (which partition or value it was cannot be told)
            value = invoked["value"]
            return ("append", value if type(value) is str else canonical(value), offset)
        if f == "read":
            if outcome != "ok":
                return DROP
            if not isinstance(completed, dict):
                raise ValueError(f"a read's completion is a map with the value read, not {_shown(completed)}")
            if "value" not in completed:  # (absent is not nil: a misspelt field passed as a read of nothing)
                raise ValueError(f"a read's completion holds the value read (null for nothing), not "
                                 f"{_shown(completed)}")
            offset, value = invoked["offset"], completed["value"]
            if type(offset) is not int or offset < 0:
                raise ValueError(f"an offset is a whole number from 0, not {_shown(offset)}")
            if disagreement := read_problem(invoked, completed):
                raise ValueError(disagreement)
            return ("read", offset, value if type(value) is str else canonical(value))
        if f == FINAL_READ:
            return DROP if outcome != "ok" else ("final-read", _whole_log(invoked, completed))
        raise ValueError(f"the log model has only append/read/{FINAL_READ}, not {f!r}")

    def read_only(self, call: tuple[Any, ...]) -> bool:
        return call[0] != "append"

    def anonymize(self, calls: list[tuple[Any, ...]], indeterminate: list[bool]) -> list[tuple[Any, ...]]:
        """An unknown append whose value no read returned is just "some record": its value is
        replaced by :data:`UNOBSERVED`, so all such appends become interchangeable."""
        read = {c[2] for c in calls if c[0] == "read"}.union(*(c[1] for c in calls if c[0] == "final-read"))
        # What each offset must hold, from reads and acknowledged appends: records never move
        # in an append-only log, so an append that would put anything else there is doomed.
        for c in calls:
            if c[0] == "final-read":
                for offset, value in enumerate(c[1]):
                    self.known_at.setdefault(offset, value)
            elif c[0] == "read" and c[2] is not None:
                self.known_at.setdefault(c[1], c[2])
            elif c[0] == "append" and c[2] is not None:
                self.known_at.setdefault(c[2], c[1])
        return [("append", UNOBSERVED, None) if unknown and c[0] == "append" and c[2] is None and c[1] not in read
                else c for c, unknown in zip(calls, indeterminate)]

    keyed = True

    def split(self, value: Any, extra: dict[str, Any]) -> tuple[Hashable, Any]:
        if not isinstance(value, dict) or "topic" not in value or "partition" not in value:
            raise ValueError(f"log op value must name its topic and partition, got {_shown(value)}")
        return (value["topic"], value["partition"]), value

    def child(self, state: int, value: Any) -> int:
        key = (state, value)
        found = self.children.get(key)
        if found is None:
            found = len(self.parent)
            self.parent.append(state)
            self.last.append(value)
            self.length.append(self.length[state] + 1)
            self.children[key] = found
        return found

    def value_at(self, state: int, offset: int) -> Any:
        key = (state, offset)
        if key not in self._value_at:
            node = state
            while self.length[node] > offset + 1:
                node = self.parent[node]
            self._value_at[key] = self.last[node]
        return self._value_at[key]

    def step(self, state: Any, call: tuple[Any, ...]) -> Any:
        if call[0] == "append":
            length = self.length[state]
            if call[2] is not None and length != call[2]:
                return INCONSISTENT
            if self.known_at.get(length, call[1]) != call[1]:
                return INCONSISTENT
            return self.child(state, call[1])
        if call[0] == "final-read":
            values = call[1]
            if self.length[state] != len(values):
                return INCONSISTENT
            node = state
            for value in reversed(values):  # (from the tail, where logs that differ mostly differ)
                if self.last[node] != value:
                    return INCONSISTENT
                node = self.parent[node]
            return state
        offset, value = call[1], call[2]
        if value is None:
            return state if self.length[state] <= offset else INCONSISTENT
        if self.length[state] <= offset:
            return INCONSISTENT
        return state if self.value_at(state, offset) == value else INCONSISTENT



def _whole_log(invoked: Any, completed: Any) -> tuple[Any, ...]:
    """A final read's records as the log they say, offset by offset from 0."""
    if not isinstance(completed, dict) or not isinstance(completed.get("records"), list):
        raise ValueError(f"a final read's completion is a map with the records read, not {_shown(completed)}")
    if invoked.get("offset") != 0 or completed.get("offset", 0) != 0:
        raise ValueError("a final read reads from offset 0")
    values = []
    for expected, record in enumerate(completed["records"]):
        if not ordered(record) or len(record) != 2 or record[0] != expected or type(record[0]) is not int:
            raise ValueError(f"a final read's records run from offset 0 without a gap: record {expected} is "
                             f"{_shown(record)}")
        values.append(record[1] if type(record[1]) is str else canonical(record[1]))
    return tuple(values)
