"""The register models: one value read, written and (``cas-register``) compared-and-set.

A register is the simplest object whose histories are worth checking, and the one Knossos
and Jepsen's etcd test judge; ``register`` is the same model without compare-and-set, so a
history that has one is refused rather than judged by a model it does not fit. With
``independent``, Jepsen's ``[key value]`` ops are one register per key. The key-value model
(:mod:`.kv`) holds one of these registers per key.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from floodmark.checkers.linearizability.independent import independent_split
from floodmark.checkers.linearizability.models.contract import DROP, INCONSISTENT, Model, Outcome
from floodmark.checkers.linearizability.values import canonical
from floodmark.checkers.linearizability.values import shown as _shown


class CasRegister(Model):
    """A register with read, write and compare-and-set ``[expected new]``.

    ``failed_cas_observed``: a failed cas is an observed compare failure (the register did
    not hold the expected value at some point in the op's interval), as Jepsen's 2014 etcd
    client reported it; otherwise a failed op simply never happened (Knossos).
    ``nil_reads_unknown``: a read that returned nil tells nothing (Knossos's register
    model); otherwise nil is a value like any other (the etcd client's absent key).
    ``independent``: one register per key, every op's value a ``[key value]`` pair
    (:mod:`floodmark.checkers.linearizability.independent`).
    """

    name = "cas-register"
    uses_result = frozenset(("read",))  # (a write or a cas returns nothing the model uses)

    def __init__(
        self, initial: Any = None, *, failed_cas_observed: bool = False, nil_reads_unknown: bool = False,
        independent: bool = False,
    ) -> None:
        self._initial = canonical(initial)
        self.failed_cas_observed = failed_cas_observed
        self.nil_reads_unknown = nil_reads_unknown
        self.independent = self.keyed = independent

    def initial(self) -> Hashable:
        return self._initial  # type: ignore[no-any-return]

    def split(self, value: Any, extra: dict[str, Any]) -> tuple[Hashable, Any]:
        return independent_split(value) if self.independent else (None, value)

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        if f == "read":
            if outcome != "ok" or (completed is None and self.nil_reads_unknown):
                return DROP
            return ("read", canonical(completed))
        if f == "write":
            return DROP if outcome == "fail" else ("write", canonical(invoked))
        if f == "cas":
            if not isinstance(invoked, list | tuple) or len(invoked) != 2:
                raise ValueError(f"cas value must be [expected new], got {_shown(invoked)}")
            expected, new = canonical(invoked[0]), canonical(invoked[1])
            if outcome == "ok":
                return ("cas", expected, new)
            if outcome == "info":
                return ("cas?", expected, new)
            return ("cas-failed", expected) if self.failed_cas_observed else DROP
        raise ValueError(f"the {self.name} model has no operation {f!r}")

    def read_only(self, call: tuple[Any, ...]) -> bool:
        return call[0] in ("read", "cas-failed")

    def step(self, state: Any, call: tuple[Any, ...]) -> Any:
        kind = call[0]
        if kind == "read":
            return state if state == call[1] else INCONSISTENT
        if kind == "write":
            return call[1]
        if kind == "cas":
            return call[2] if state == call[1] else INCONSISTENT
        if kind == "cas?":  # unknown outcome: swapped if it compared equal, else no effect
            return call[2] if state == call[1] else state
        return state if state != call[1] else INCONSISTENT  # cas-failed


class Register(CasRegister):
    """A register with read and write only: a history with a cas does not fit it."""

    name = "register"

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        if f == "cas":
            raise ValueError("the register model has no cas; use --model cas-register")
        return super().prepare(f, invoked, completed, outcome)
