"""The multi-register model (``multi-register``): transactions over several named registers.

Knossos's multi-register model: a transaction ``[[f key value] ...]`` reads and writes a
few registers at once, and is linearizable only if all of its micro-ops take effect at one
point. Its states are kept in one canonical form, whatever order registers were written in,
so that the search's cache recognises a state it has already explored.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final

from floodmark.checkers.linearizability.models.contract import DROP, INCONSISTENT, Model, Outcome
from floodmark.checkers.linearizability.values import canonical, canonical_name, ordered
from floodmark.checkers.linearizability.values import shown as _shown

_ABSENT: Final = object()  # a register the state does not hold (it has its initial value)


class MultiRegister(Model):
    """Registers named by key, read and written in transactions ``[[f key value] ...]``.

    ``initial``: every register's initial value, or a map of the registers' initial values
    (a key it does not name starts at nil). The nil reads of a transaction whose result is
    unknown constrain nothing (an invocation's placeholders); with ``nil_reads_unknown``
    neither does any read of nil (Knossos's model), else nil is a value like any other.

    A state holds only the registers whose value differs from their initial one, as a
    frozenset of (key, value) pairs: one form per state, whatever order the registers were
    written in, so equal states are equal for the search's cache (a write of the initial
    value gives back the very state nothing was written in).
    """

    name = "multi-register"
    one_object = "the registers"
    uses_result = frozenset(("txn",))

    def __init__(self, initial: Any = None, *, nil_reads_unknown: bool = False) -> None:
        if isinstance(initial, dict):
            self.defaults = {canonical_name(k): canonical(v) for k, v in initial.items()}
            self.default = None
        else:
            self.defaults = {}
            self.default = canonical(initial)
        self.nil_reads_unknown = nil_reads_unknown

    def initial(self) -> Hashable:
        return frozenset()

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        if f != "txn":
            raise ValueError(f"the multi-register model has only txn, not {f!r}")
        if outcome == "fail":
            return DROP
        micro_ops = completed if outcome == "ok" else invoked
        if not ordered(micro_ops):
            raise ValueError(f"txn value must be a list of [f key value], got {_shown(micro_ops)}")
        prepared = []
        nil_reads_unknown = self.nil_reads_unknown
        for micro in micro_ops:
            if not ordered(micro) or len(micro) != 3 or micro[0] not in ("read", "write"):
                raise ValueError(f"txn micro-op must be [read|write key value], got {_shown(micro)}")
            f, key, value = micro
            # A read of nil in an invocation is its placeholder for the value to come, so an
            # unknown transaction's nil reads constrain nothing; a read that names a value is
            # checked like any other (Knossos steps an unknown op's invocation as it is).
            if f == "read" and value is None and (outcome != "ok" or nil_reads_unknown):
                continue
            # (the common keys and values first, as they are: this runs for every micro-op)
            prepared.append((f == "write", key if type(key) is str or type(key) is int else canonical_name(key),
                             value if type(value) is int else canonical(value)))
        return ("txn", tuple(prepared)) if prepared else DROP

    def anonymize(self, calls: list[tuple[Any, ...]], indeterminate: list[bool]) -> list[tuple[Any, ...]]:
        """An unknown transaction that writes no value any read returned (of that register)
        becomes an empty one, which the search never linearizes (its never happening is
        allowed).

        Had it happened, each register it wrote would hold a value no read saw until that
        register's next write, so no read of it can come in between: without the
        transaction the same order is legal, and from those writes on the states are the
        same. A crashed client's transactions could otherwise be tried at every point after
        their invocation."""
        if True not in indeterminate:
            return calls
        observed = {(key, value) for call in calls for is_write, key, value in call[1] if not is_write}
        return [("txn", ()) if unknown and not any(is_write and (key, value) in observed
                                                  for is_write, key, value in call[1]) else call
                for call, unknown in zip(calls, indeterminate)]

    def read_only(self, call: tuple[Any, ...]) -> bool:
        return not any(is_write for is_write, _, _ in call[1])

    def step(self, state: Any, call: tuple[Any, ...]) -> Any:
        registers = dict(state)
        defaults, default = self.defaults, self.default
        changed = False
        for is_write, key, value in call[1]:
            held = registers.get(key, _ABSENT)
            if is_write:
                if value == defaults.get(key, default):
                    if held is not _ABSENT:
                        del registers[key]
                        changed = True
                elif held != value:
                    registers[key] = value
                    changed = True
            elif (defaults.get(key, default) if held is _ABSENT else held) != value:
                return INCONSISTENT
        # (a txn that changes nothing gives back the same state, which the search then knows)
        return frozenset(registers.items()) if changed else state

    def registers(self, state: Any) -> dict[Any, Any]:
        """Every register the state or the initial value names, with its value."""
        return {**self.defaults, **dict(state)}
