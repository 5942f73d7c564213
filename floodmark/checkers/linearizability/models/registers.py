"""The register models: one value read, written and (``cas-register``) compared-and-set.

A register is the simplest object whose histories are worth checking, and the one Knossos
and Jepsen's etcd test judge; ``register`` is the same model without compare-and-set, so a
history that has one is refused rather than judged by a model it does not fit. With
``independent``, Jepsen's ``[key value]`` ops are one register per key, and with
``keys_beside`` so are ops that name their key beside their value. The key-value model
(:mod:`.kv`) holds one of these registers per key.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from floodmark.checkers.linearizability.independent import PerKey
from floodmark.checkers.linearizability.models.contract import DROP, INCONSISTENT, Model, Outcome
from floodmark.checkers.linearizability.values import canonical, ordered
from floodmark.checkers.linearizability.values import shown as _shown


class CasRegister(PerKey, Model):
    """A register with read, write and compare-and-set ``[expected new]``.

    ``failed_cas_observed``: a failed cas is an observed compare failure (the register did
    not hold the expected value at some point in the op's interval), as Jepsen's 2014 etcd
    client reported it; otherwise a failed op simply never happened (Knossos).
    ``nil_reads_unknown``: a read that returned nil tells nothing (Knossos's register
    model); otherwise nil is a value like any other (the etcd client's absent key).
    ``independent``: one register per key, every op's value a ``[key value]`` pair
    (:mod:`floodmark.checkers.linearizability.independent`); ``keys_beside``: one register
    per key, every op naming its key beside its value (a ``:key`` field, a ``{"key",
    "value"}`` map).
    """

    name = "cas-register"
    operations = frozenset(("read", "write", "cas"))  # what prepare takes
    # (a write's or a cas's completion is looked at too: what it says it did is what happened)
    uses_result = frozenset(("read", "write", "cas"))

    def __init__(
        self, initial: Any = None, *, failed_cas_observed: bool = False, nil_reads_unknown: bool = False,
        independent: bool = False, keys_beside: bool = False,
    ) -> None:
        self._initial = canonical(initial)
        self.failed_cas_observed = failed_cas_observed
        self.nil_reads_unknown = nil_reads_unknown
        PerKey.__init__(self, independent=independent, keys_beside=keys_beside)

    def initial(self) -> Hashable:
        return self._initial  # type: ignore[no-any-return]

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        if f == "read":
            if outcome != "ok" or (completed is None and self.nil_reads_unknown):
                return DROP
            return ("read", canonical(completed))
        # An ok write or cas did what its completion says, as Knossos completes a history:
        # an invocation may leave the value to its completion (a write invoked with nil whose
        # client chose the value), and where the two differ the completion is what the
        # client saw done. A completion that carries no value echoes the invocation's.
        if completed is not None:
            invoked = completed
        if f == "write":
            return DROP if outcome == "fail" else ("write", canonical(invoked))
        if f == "cas":
            if not ordered(invoked) or len(invoked) != 2:
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

    def first_impossible(self, calls: list[tuple[Any, ...]], invoked_at: tuple[int, ...],
                         completed_at: tuple[int | None, ...]) -> tuple[int, str] | None:
        # Where each value first may have been written: a call can only see the initial value
        # or one that a write or cas invoked before it completed may have set.
        # And when the initial value, if nothing writes it, is surely gone: once a write or
        # cas known to have happened completed.
        first: dict[Any, int] = {}
        gone = None
        for call, at, done in zip(calls, invoked_at, completed_at):
            kind = call[0]
            value = call[1] if kind == "write" else call[2] if kind in ("cas", "cas?") else _NONE
            if value is not _NONE and at < first.get(value, at + 1):
                first[value] = at
            if done is not None and kind in ("write", "cas") and (gone is None or done < gone):
                gone = done
        initial = self._initial
        if initial in first:
            gone = None
        for number, (call, done) in enumerate(zip(calls, completed_at)):
            if done is None or call[0] not in ("read", "cas", "cas-failed"):
                continue
            needed = call[1]
            if needed == initial and call[0] != "cas-failed" and gone is not None and gone < invoked_at[number]:
                return number, f"the initial value {_shown(needed)} was overwritten before it was invoked"
            if call[0] == "cas-failed":  # it saw anything but its expected value
                if initial != needed or any(at < done for value, at in first.items() if value != needed):
                    continue
                return number, f"no value but {_shown(needed)} can have been written before it completed"
            if needed != initial and first.get(needed, done) >= done:
                return number, f"no write or cas invoked before it completed can have written {_shown(needed)}"
        return None


_NONE = object()  # (not a value)


class Register(CasRegister):
    """A register with read and write only: a history with a cas does not fit it."""

    name = "register"

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        if f == "cas":
            raise ValueError("the register model has no cas; use --model cas-register")
        return super().prepare(f, invoked, completed, outcome)
