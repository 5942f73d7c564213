"""The key-value model (``kv``): one string register per key, with get, put and append.

Porcupine's key-value model, and the shape of Jepsen's independent ``[key value]`` ops too.
Appends concatenate strings, so between puts a key's value only grows: the model says so
(``grows``), and the search can drop a state that no later read can grow into as soon as
it is reached, which is what keeps long append-heavy histories tractable.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from floodmark.checkers.linearizability.independent import kv_key_and_value, map_value
from floodmark.checkers.linearizability.models.contract import (
    ANY_STATE,
    DROP,
    GROWS_ONLY,
    INCONSISTENT,
    NOTHING_OBSERVED,
    Model,
    Outcome,
)
from floodmark.checkers.linearizability.models.registers import CasRegister
from floodmark.checkers.linearizability.values import canonical
from floodmark.checkers.linearizability.values import shown as _shown

# An unknown append whose string nothing observed, as :meth:`KeyValue.anonymize` rewrites it:
# an append of nothing, known by identity so that it leaves a nil key nil.
UNSEEN_APPEND = ("append", "", "unseen")
_OBSERVING = frozenset(("read", "cas", "cas?", "cas-failed"))  # calls whose call[1] is a whole state seen


class KeyValue(Model):
    """One register per key: get, put, append (string concatenation), and read/write/cas.
    A key never written holds ``initial`` (Porcupine's model: the empty string). Appends
    concatenate strings, so a key that is appended to must hold strings (or nil, which an
    append treats as the empty string); anything else does not fit the model."""

    name = "kv"
    uses_result = frozenset(("get", "read"))
    keyed = True

    def __init__(self, initial: Any = "", **register_options: bool) -> None:
        self.register = CasRegister(initial, **register_options)
        self.nil_reads_unknown = self.register.nil_reads_unknown
        # True once prepare has met a put (or cas) of something other than a string: only
        # then can an append meet a key it cannot extend (unfit looks only then)
        self.puts_non_strings = False

    def initial(self) -> Hashable:
        return self.register.initial()

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        # (the common ops first, strings passed as they are: a history has hundreds of thousands)
        if f == "append":
            if type(invoked) is not str:
                raise ValueError(f"an append concatenates strings, and {_shown(invoked)} is not one")
            return DROP if outcome == "fail" else ("append", invoked)
        if f == "get":
            if outcome != "ok" or (completed is None and self.nil_reads_unknown):
                return DROP
            return ("read", completed if type(completed) is str else canonical(completed))
        if f == "put":
            if outcome == "fail":
                return DROP
            if type(invoked) is str:
                return ("write", invoked)
            self.puts_non_strings = True
            return ("write", canonical(invoked))
        if f not in self.register.operations:  # (named as this model's, not the register's it delegates to)
            raise ValueError(f"the {self.name} model has only get/put/append/read/write/cas, not {f!r}")
        call = self.register.prepare(f, invoked, completed, outcome)
        if call is not None and call[0] != "read" and type(call[-1]) is not str:  # (what a write or cas leaves)
            self.puts_non_strings = True
        return call

    def anonymize(self, calls: list[tuple[Any, ...]], indeterminate: list[bool]) -> list[tuple[Any, ...]]:
        """An unknown append whose string is in nothing any call observed becomes an append
        of nothing (which the search never linearizes: its never happening is allowed).

        Had it happened, every get until the key's next put would hold its string, so no
        get (and no cas's expected value) can come after it before a put: without it, the
        same order is legal and leaves the same states from that put on (unless a failed
        cas was observed: an append may be what it saw). Porcupine-style
        histories of many clients lose appends to crashes, and each such append could
        otherwise be tried at every point after its invocation."""
        if True not in indeterminate or any(call[0] == "cas-failed" for call in calls):
            return calls  # (a failed cas saw the key hold anything but a value: an append may explain it)
        observed = "\x00".join(call[1] for call in calls if call[0] in _OBSERVING and type(call[1]) is str)
        return [UNSEEN_APPEND if unknown and call[0] == "append" and call[1] not in observed else call
                for call, unknown in zip(calls, indeterminate)]

    def may_be_unfit(self) -> bool:
        initial = self.initial()
        return self.puts_non_strings or not (initial is None or type(initial) is str)

    def unfit(self, calls: list[tuple[Any, ...]]) -> tuple[int, str] | None:
        appends = [number for number, call in enumerate(calls) if call[0] == "append"]
        initial = self.initial()
        if appends and initial is not None and type(initial) is not str:
            return appends[0], f"an append to the initial value {_shown(initial)}, which is no string"
        for number, call in enumerate(calls if appends else ()):
            held = call[-1] if call[0] in ("write", "cas", "cas?") else None  # (what it leaves)
            if held is not None and type(held) is not str:
                return number, f"{_shown(held)} is put in a key that is appended to, and is no string"
        return None

    def step(self, state: Any, call: tuple[Any, ...]) -> Any:
        kind = call[0]
        if kind == "read":  # the common ops inline: the search calls this millions of times
            return state if state == call[1] else INCONSISTENT
        if kind == "append":  # (unfit has made sure the state is a string or nil)
            if state is None:
                # (an unseen append, anonymized, changes no state: nil stays nil. An append of
                # "" does not: it makes the key hold "", which the append it stands for, of a
                # string no get saw, could never have left)
                return None if call is UNSEEN_APPEND else call[1]
            return state + call[1]
        if kind == "write":
            return call[1]
        return self.register.step(state, call)

    grows = True  # between puts a key's string only grows: appends extend it, gets read it whole

    def resets_to(self, call: tuple[Any, ...]) -> Any:
        kind = call[0]
        if kind == "append" or kind == "read":
            return GROWS_ONLY
        return call[1] if kind == "write" else ANY_STATE

    def observed(self, call: tuple[Any, ...]) -> Any:
        return call[1] if call[0] == "read" else NOTHING_OBSERVED

    def may_become(self, state: Any, later: Any) -> bool:
        # (a state that is not a string yet, such as an initial nil, may become anything)
        return type(state) is not str or type(later) is not str or later.startswith(state)

    def split(self, value: Any, extra: dict[str, Any]) -> tuple[Hashable, Any]:
        key = extra.get("key")
        if type(key) is str:  # Porcupine's ops name their key beside the value
            return key, value
        if key is None and type(value) is dict and "key" in value:  # (our JSONL's {"key", "value"})
            key = value["key"]
            return key if type(key) is str else canonical(key), map_value(value)
        key, inner = kv_key_and_value(value, key)
        return canonical(key), inner
