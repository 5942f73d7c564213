"""Sequential models: what a single correct copy of an object would do.

Linearizability is judged against a model: a deterministic state machine whose ``step``
takes a state and one completed operation and answers the next state, or
:data:`INCONSISTENT` when the operation could not have returned what it returned from
that state. Knossos and Porcupine use the same idea.

Each model first *prepares* a history operation into a compact call tuple (or drops it:
a failed op never happened, and a read whose result is unknown constrains nothing), and
says which independent object (partition) the operation touches, so the search can check
objects one at a time (P-compositionality).

Indeterminate operations (``info``, or no completion) are prepared with what was attempted;
the search may linearize them anywhere after their invocation, or not at all.

Values enter a model through :func:`~floodmark.checkers.linearizability.values.canonical`, so states, calls
and keys compare as EDN and JSON values do (``1`` is not ``true`` nor ``1.0``, ``:x`` is not
``"x"``), not as Python's ``==`` would.

Models: ``register`` (read/write), ``cas-register`` (plus compare-and-set), ``kv`` (one
string register per key with get/put/append, Porcupine's key-value model; Jepsen's
independent ``[key value]`` ops are also accepted), ``multi-register`` (transactions of
reads and writes over several registers), ``mutex`` (acquire/release) and ``log`` (the
append-only log of the ``log-lin`` workload: appends return their offset, reads of an
offset return the record there or nothing past the end).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final

from floodmark.checkers.linearizability.independent import independent_split, kv_key_and_value
from floodmark.checkers.linearizability.values import canonical, canonical_name
from floodmark.checkers.linearizability.values import shown as _shown
from floodmark.checkers.op_agreement import acknowledgement_problem, read_problem

INCONSISTENT: Final = object()  # a step's answer when the op cannot happen in that state
NOTHING_OBSERVED: Final = object()  # Model.observed's answer for a call that reads no whole state
GROWS_ONLY: Final = object()  # Model.resets_to's answer for a call that only extends the state (or keeps it)
ANY_STATE: Final = object()  # Model.resets_to's answer for a call that may leave any state
DROP: Final = None  # prepare's answer for an op that neither happened nor constrains anything

Outcome = str  # "ok" | "fail" | "info" (info also covers ops that never completed)

UNOBSERVED: Final = "<a record no read returned>"  # stands for the value of an unobserved unknown append

MODEL_NAMES: tuple[str, ...] = ("cas-register", "register", "kv", "multi-register", "mutex", "log")


class Model:
    """A sequential specification. Subclasses define prepare, step and initial."""

    name = "model"

    def initial(self) -> Hashable:
        raise NotImplementedError

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        raise NotImplementedError

    def step(self, state: Any, call: tuple[Any, ...]) -> Any:
        raise NotImplementedError

    def split(self, value: Any, extra: dict[str, Any]) -> tuple[Hashable, Any]:
        """(which independent object an op value touches, the value for that object).
        Ops on different objects commute, so each object is checked on its own."""
        return None, value

    keyed = False  # True if split finds keys in ops (else every op is the one object's, key None)

    def read_only(self, call: tuple[Any, ...]) -> bool:
        """True if the call leaves every state unchanged (it only observes)."""
        return call[0] == "read"

    def anonymize(self, calls: list[tuple[Any, ...]], indeterminate: list[bool]) -> list[tuple[Any, ...]]:
        """One object's prepared calls, with details no call can observe made identical, so
        the search can treat such calls as interchangeable. By default, nothing changes."""
        return calls

    # The op functions whose prepare reads what the op returned (None: any may); for the
    # others, prepare is given None, and the history's completions need not be looked at.
    uses_result: frozenset[str] | None = None

    def unfit(self, calls: list[tuple[Any, ...]]) -> tuple[int, str] | None:
        """(the number of a call, what is wrong) if one object's calls, as this model prepared
        them, do not fit it together though each fits alone (a string appended to a number);
        checked before the search, so its steps never meet a state they cannot step from."""
        return None

    def may_be_unfit(self) -> bool:
        """False if :meth:`unfit` can find nothing in what this model prepared (asked first)."""
        return False

    # Growth (a lookahead for the search): in some models most calls only ever *extend* the
    # state (an append to a string), so a state that no future read can extend into is a dead
    # end the moment it is reached, not when the search meets that read's completion.
    grows = False  # True if resets_to, observed and may_become below say anything

    def resets_to(self, call: tuple[Any, ...]) -> Any:
        """:data:`GROWS_ONLY` if the call only ever extends the state (or leaves it unchanged);
        the state it sets, if it sets one whatever the state was (a put); else :data:`ANY_STATE`."""
        return ANY_STATE

    def observed(self, call: tuple[Any, ...]) -> Any:
        """The whole state a read-only call saw, or :data:`NOTHING_OBSERVED`."""
        return NOTHING_OBSERVED

    def may_become(self, state: Any, later: Any) -> bool:
        """False if no sequence of extending calls turns ``state`` into ``later``."""
        return True


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
    name = "register"

    def prepare(self, f: str, invoked: Any, completed: Any, outcome: Outcome) -> tuple[Any, ...] | None:
        if f == "cas":
            raise ValueError("the register model has no cas; use --model cas-register")
        return super().prepare(f, invoked, completed, outcome)


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
        call = self.register.prepare(f, invoked, completed, outcome)
        if call is not None and call[0] != "read" and type(call[-1]) is not str:  # (what a write or cas leaves)
            self.puts_non_strings = True
        return call

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
            return call[1] if state is None else state + call[1]
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
            return key if type(key) is str else canonical(key), value.get("value")
        key, inner = kv_key_and_value(value, key)
        return canonical(key), inner


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


_ABSENT: Final = object()





class Mutex(Model):
    """A lock: acquire needs it free, release needs it held."""

    name = "mutex"
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


class Log(Model):
    """The append-only log of one partition.

    States are interned log ids (0 is the empty log) so that the search's cache holds small
    integers, not whole logs: each id remembers its parent, its last record and its length.
    """

    name = "log"

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
            if offset is not None and (type(offset) is not int or offset < 0):
                raise ValueError(f"an offset is a whole number from 0, not {_shown(offset)}")
            if offset is not None and (disagreement := acknowledgement_problem(invoked, completed)):
                raise ValueError(disagreement)  # (which partition or value it was cannot be told)
            value = invoked["value"]
            return ("append", value if type(value) is str else canonical(value), offset)
        if f == "read":
            if outcome != "ok":
                return DROP
            offset, value = invoked["offset"], completed.get("value")
            if type(offset) is not int or offset < 0:
                raise ValueError(f"an offset is a whole number from 0, not {_shown(offset)}")
            if disagreement := read_problem(invoked, completed):
                raise ValueError(disagreement)
            return ("read", offset, value if type(value) is str else canonical(value))
        raise ValueError(f"the log model has only append/read, not {f!r}")

    def anonymize(self, calls: list[tuple[Any, ...]], indeterminate: list[bool]) -> list[tuple[Any, ...]]:
        """An unknown append whose value no read returned is just "some record": its value is
        replaced by :data:`UNOBSERVED`, so all such appends become interchangeable."""
        read = {c[2] for c in calls if c[0] == "read"}
        # What each offset must hold, from reads and acknowledged appends: records never move
        # in an append-only log, so an append that would put anything else there is doomed.
        for c in calls:
            if c[0] == "read" and c[2] is not None:
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
        offset, value = call[1], call[2]
        if value is None:
            return state if self.length[state] <= offset else INCONSISTENT
        if self.length[state] <= offset:
            return INCONSISTENT
        return state if self.value_at(state, offset) == value else INCONSISTENT


_UNSET: Final = object()


def make_model(name: str, initial: Any = _UNSET, *, independent: bool = False, **register_options: bool) -> Model:
    """A fresh model instance (models may keep per-search tables, so one per search).
    ``register_options`` (failed_cas_observed, nil_reads_unknown) apply to register models,
    nil_reads_unknown to kv and multi-register too; ``independent``: one register per key
    of ``[key value]`` ops (register models only). Without ``initial``, registers start at
    nil (and kv's keys at the empty string, as in Porcupine)."""
    if independent and name not in ("cas-register", "register"):
        raise ValueError(f"independent [key value] registers are a register model's, not {name}'s")
    start = None if initial is _UNSET else initial
    if name == "cas-register":
        return CasRegister(start, independent=independent, **register_options)
    if name == "register":
        return Register(start, independent=independent, **register_options)
    if name == "kv":
        return KeyValue("" if initial is _UNSET else initial, **register_options)
    if name == "multi-register":
        return MultiRegister(start, nil_reads_unknown=register_options.get("nil_reads_unknown", False))
    if name == "mutex":
        return Mutex()
    if name == "log":
        return Log()
    raise ValueError(f"unknown model {name!r}; choose one of: {', '.join(MODEL_NAMES)}")
