"""What a sequential model is: the contract every model keeps, and the search relies on.

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

The search (:mod:`floodmark.checkers.linearizability.wgl`) knows models only through this
contract, so it lives apart from the models themselves.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final

INCONSISTENT: Final = object()  # a step's answer when the op cannot happen in that state
NOTHING_OBSERVED: Final = object()  # Model.observed's answer for a call that reads no whole state
GROWS_ONLY: Final = object()  # Model.resets_to's answer for a call that only extends the state (or keeps it)
ANY_STATE: Final = object()  # Model.resets_to's answer for a call that may leave any state
DROP: Final = None  # prepare's answer for an op that neither happened nor constrains anything

Outcome = str  # "ok" | "fail" | "info" (info also covers ops that never completed)


class Model:
    """A sequential specification. Subclasses define prepare, step and initial."""

    name = "model"
    one_object = "the register"  # what an anomaly calls the history's object when ops name no key

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
    # True if a failed op of this model's workload never holds what only a successful one
    # returns (an append's offset): one that does was edited, and is refused, not dropped.
    failures_hold_nothing = False

    def unfit(self, calls: list[tuple[Any, ...]]) -> tuple[int, str] | None:
        """(the number of a call, what is wrong) if one object's calls, as this model prepared
        them, do not fit it together though each fits alone (a string appended to a number);
        checked before the search, so its steps never meet a state they cannot step from."""
        return None

    def may_be_unfit(self) -> bool:
        """False if :meth:`unfit` can find nothing in what this model prepared (asked first)."""
        return False

    def first_impossible(self, calls: list[tuple[Any, ...]], invoked_at: tuple[int, ...],
                         completed_at: tuple[int | None, ...]) -> tuple[int, str] | None:
        """(the number of a determinate call, why) if that call needs a state that neither the
        initial state nor any call invoked before it completed can produce (a read of a value
        nobody wrote), so no linearization exists whatever the other calls do; else None.
        Asked before the search, which would otherwise have to try every order of the calls
        before it to find that out. By default, nothing is found."""
        return None

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
