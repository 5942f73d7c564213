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
from floodmark.checkers.linearizability.values import canonical, canonical_name
from floodmark.checkers.linearizability.values import shown as _shown

_ABSENT: Final = object()  # a register the state does not hold (it has its initial value)


class MultiRegister(Model):
    """Registers named by key, read and written in transactions ``[[f key value] ...]``.

    ``initial``: every register's initial value, or a map of the registers' initial values
    (a key it does not name starts at nil). The reads of a transaction whose result is
    unknown constrain nothing; with ``nil_reads_unknown`` neither does a read of nil
    (Knossos's model), else nil is a value like any other.

    A state holds only the registers whose value differs from their initial one, as a
    frozenset of (key, value) pairs: one form per state, whatever order the registers were
    written in, so equal states are equal for the search's cache (a write of the initial
    value gives back the very state nothing was written in).
    """

    name = "multi-register"
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
        if not isinstance(micro_ops, list):
            raise ValueError(f"txn value must be a list of [f key value], got {_shown(micro_ops)}")
        prepared = []
        nil_reads_unknown = self.nil_reads_unknown
        for micro in micro_ops:
            if not isinstance(micro, list | tuple) or len(micro) != 3 or micro[0] not in ("read", "write"):
                raise ValueError(f"txn micro-op must be [read|write key value], got {_shown(micro)}")
            f, key, value = micro
            if f == "read" and (outcome != "ok" or (value is None and nil_reads_unknown)):
                continue
            # (the common keys and values first, as they are: this runs for every micro-op)
            prepared.append((f == "write", key if type(key) is str or type(key) is int else canonical_name(key),
                             value if type(value) is int else canonical(value)))
        return ("txn", tuple(prepared)) if prepared else DROP

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
