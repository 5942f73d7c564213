"""The Wing–Gong–Lowe search for a linearization of one object's history.

A history is linearizable if every operation can be given a single instant between its
invocation and its completion such that, taken in the order of those instants, the
operations are a legal run of the sequential model (Herlihy and Wing). Wing and Gong's
search walks the history's invocations and completions in time order, kept as a doubly
linked list. At each point it tries to *linearize* one of the calls that are pending (invoked
and not yet linearized) and whose model step is consistent; a linearized call and its
completion are lifted out of the list and the search restarts from the front. Reaching a
completion whose call has not been linearized means the choices so far were wrong: the
search backtracks, putting the last linearized call back and trying the next candidate.

Lowe's improvement makes it practical: a cache of (set of linearized calls, model state)
configurations already explored. Reaching a configuration a second time can lead nowhere
new, so that branch is cut. The set is a bitset (a Python int). Two refinements: a
configuration that differs from a cached one only by having used up *more* indeterminate
calls is cut too (it is dominated), and a read-only call that fits is linearized at once
with no alternatives (it could be moved to the front of any linearization from there).

Indeterminate calls (outcome unknown) have their completion at the end of time, after
every determinate completion, so they may be linearized anywhere after their invocation;
and the search succeeds as soon as every determinate call is linearized, because an
indeterminate call may also never have happened (Knossos's semantics). For the same reason
an indeterminate call that would leave the state unchanged is never linearized: its never
happening reaches everything it could; nor is a call linearized just after an indeterminate
one whose effect it overwrites unseen (the call alone gets there with that one unused). And
of several identical indeterminate calls only the earliest-invoked unused one is tried, since
any of them can stand in for the others.

Two orderings and a lookahead find a valid history's linearization with little
backtracking: after each step the call due first (the earliest completion not yet
linearized) is tried before the list is scanned, since ops mostly take effect in the order
they complete; and in models whose state only grows between resets (a key-value string
under appends, :attr:`Model.grows`), once a search has backtracked a while, a state that a
soon-completing read can no longer grow into is cut when it is reached.

The search stops with "unknown" at a deadline or when the cache grows past a size that
would exceed the memory budget. For an invalid history it keeps the longest partial
linearizations reached and the calls the search could not linearize next.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from floodmark.checkers.linearizability.models.contract import (
    ANY_STATE,
    GROWS_ONLY,
    INCONSISTENT,
    NOTHING_OBSERVED,
    Model,
)
from floodmark.contracts.results import Validity


class Call(NamedTuple):
    """One operation of one object, ready for the search (a named tuple: histories have
    hundreds of thousands, and a tuple is built several times faster than a dataclass)."""

    op: int  # history index of the invocation
    completion: int | None  # history index of the completion (None: never completed)
    call: tuple[Any, ...]  # the model's prepared call
    invoked_at: int  # position of the invocation in history order
    completed_at: int | None  # position of a determinate completion; None: indeterminate


@dataclass
class SearchResult:
    valid: Validity
    explored: int = 0
    reason: str | None = None
    # For invalid histories: the longest partial linearizations as [(call number, state after)]
    longest: list[list[tuple[int, Any]]] = field(default_factory=list)
    stuck: list[int] = field(default_factory=list)  # call numbers that could not be linearized next


DEFAULT_CACHE_LIMIT = 4_000_000  # configurations
MEMORY_BUDGET = 1_200_000_000  # bytes the cache may take (roughly), well under 2 GB in all
_DEADLINE_CHECK_EVERY = 128  # iterations in a slice of search_steps, between deadline checks
_KEEP_PATHS = 3
_LOOKAHEAD = 24  # list entries the growth lookahead walks past at most


def search(
    model: Model,
    calls: list[Call],
    *,
    deadline: float | None = None,
    cache_limit: int = DEFAULT_CACHE_LIMIT,
    lookahead_after: int | None = None,
) -> SearchResult:
    """Is there a linearization of ``calls`` (one object's operations) under ``model``?

    ``lookahead_after``: backtracks before the growth lookahead starts (default: two per call)."""
    steps = search_steps(model, calls, deadline=deadline, cache_limit=cache_limit, lookahead_after=lookahead_after)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def search_steps(
    model: Model,
    calls: list[Call],
    *,
    deadline: float | None = None,
    cache_limit: int = DEFAULT_CACHE_LIMIT,
    lookahead_after: int | None = None,
    due_first_order: bool = True,
    memory_share: int = 1,
) -> Generator[None, None, SearchResult]:
    """:func:`search` in slices: each ``next`` runs a few thousand steps and the result is
    the generator's return value, so the searches of several objects can be interleaved.

    ``due_first_order``: try the call due first before scanning (else the list order only);
    ``memory_share``: how many searches share the memory budget at once."""
    n = len(calls)
    if n == 0:
        return SearchResult(True)
    # Each cached configuration holds an n-bit set: keep the cache inside the memory budget.
    cache_limit = min(cache_limit, MEMORY_BUDGET // memory_share // (n // 8 + 200))
    # Entries 0..2n-1: call entry of call i is 2i, its completion entry 2i+1. Indeterminate
    # completions sort after every determinate one (their time is infinity).
    _, _, originals, invoked_at, completed_at = zip(*calls)  # (columns: one C-level pass)
    any_indeterminate = None in completed_at
    # Sort keys as ints (a completion at the same instant as an invocation comes first):
    # (instant, 1 for an invocation, entry), packed.
    shift = (2 * n).bit_length()
    keys = [(at * 2 + 1 << shift) | entry for at, entry in zip(invoked_at, range(0, 2 * n, 2))]
    if any_indeterminate:
        determinate = [at is not None for at in completed_at]
        end_of_time = 1 + max(max(invoked_at), max([at for at in completed_at if at is not None], default=0))
        keys += [((end_of_time if at is None else at) * 2 << shift) | entry
                 for at, entry in zip(completed_at, range(1, 2 * n, 2))]
    else:
        determinate = [True] * n
        keys += [(at * 2 << shift) | entry for at, entry in zip(completed_at, range(1, 2 * n, 2))]
    keys.sort()
    mask = (1 << shift) - 1
    order = [k & mask for k in keys]
    head = 2 * n  # sentinel entry
    nxt = [-1] * (2 * n + 1)
    prv = [-1] * (2 * n + 1)
    for previous, e in zip([head, *order], order):
        nxt[previous] = e
        prv[e] = previous

    step = model.step
    prepared = model.anonymize(list(originals), [not sure for sure in determinate] if any_indeterminate else [False] * n)
    read_only = list(map(model.read_only, originals))
    # Identical indeterminate calls are interchangeable, and the one invoked first can go
    # wherever a later one can: only the earliest unused one of each kind is ever tried.
    twin_before = [-1] * n
    latest: dict[Any, int] = {}
    for number in sorted(range(n), key=invoked_at.__getitem__) if any_indeterminate else ():
        if not determinate[number]:
            twin_before[number] = latest.get(prepared[number], -1)
            latest[prepared[number]] = number
    # The growth lookahead (see Model.grows) costs a walk per step, so it starts only once
    # the search has backtracked twice as often as there are calls: a history searched in
    # a straight line never pays for it.
    grows = model.grows
    backtracks_before_looking = 2 * n if lookahead_after is None else lookahead_after
    looking = grows and backtracks_before_looking <= 0
    may_become = model.may_become
    resets_to, observed = _growth_tables(model, prepared, determinate) if looking else ([], [])
    remaining = sum(determinate)
    state: Any = model.initial()
    linearized = 0
    # The cache maps (determinate calls linearized, state) to the sets of indeterminate calls
    # linearized with them. A configuration that used up a superset of another's
    # indeterminate calls can do nothing the other cannot (those calls may also never
    # happen), so it is dominated and cut, like an exact repeat.
    cache: dict[tuple[int, Any], list[int]] = {}
    seen: set[tuple[int, Any]] = set()
    explored = 0
    determinate_mask = sum(1 << i for i, d in enumerate(determinate) if d) if any_indeterminate else 0
    # (entry linearized, state before, first pass, forced, tried before its turn in the list,
    # the due call's index before)
    stack: list[tuple[int, Any, bool, bool, bool, int]] = []
    result = SearchResult(False)
    best_depth = -1
    snapshots: list[tuple[list[tuple[int, Any, bool, bool, bool, int]], Any]] = []  # deepest stacks reached
    iterations = 0

    # Candidates are tried in two passes over the pending calls: determinate calls first,
    # then indeterminate ones. Either order is complete; this one meets a valid history's
    # linearization sooner, since an unknown op rarely needs to take effect early.
    # After each step forward, the call due first (the earliest completion among the
    # determinate calls not linearized) is tried before the list is scanned: ops mostly take
    # effect in the order they complete, so a valid history is met nearly without
    # backtracking. ``due`` indexes ``by_completion`` (the list's completion entries in order,
    # the indeterminate ones cut off the end) and is restored from the stack when backtracking;
    # ``due_first`` is True while that call is being tried ahead of its turn (when it does not
    # fit, the scan starts at the front).
    by_completion = [entry >> 1 for entry in order if entry & 1][:remaining]
    due = 0
    due_first = due_first_order and remaining > 0
    first_pass = True
    # False while every call entry before ``entry`` in the list was inconsistent with the
    # state (so linearizing a read, which keeps the state, need not rescan them)
    retry_before = False
    entry = 2 * by_completion[0] if due_first else nxt[head]
    while remaining:
        iterations += 1
        if iterations % _DEADLINE_CHECK_EVERY == 0:
            yield
            if deadline is not None and time.monotonic() > deadline:
                return SearchResult("unknown", explored, "time limit reached")
            if explored > cache_limit:
                return SearchResult("unknown", explored, f"more than {cache_limit} configurations")
        dead = False
        if not entry & 1:  # a call entry: try to linearize it here
            number = entry >> 1
            if determinate[number] != first_pass or (
                    twin_before[number] >= 0 and not linearized >> twin_before[number] & 1):
                entry = nxt[entry]
                continue
            new_state = step(state, prepared[number])
            # An indeterminate call that would change nothing is dominated by its never
            # happening, which is always allowed: skip it instead of caching a new branch.
            if new_state is not INCONSISTENT and (first_pass or new_state != state) and (
                    not looking or new_state == state or _may_grow_into_reads(
                        new_state, number, nxt[head], nxt, observed, resets_to, may_become)) and not (
                    # An indeterminate call just linearized whose effect this call overwrites
                    # unseen (a write after a write that may not have happened) did nothing this
                    # call could tell: the same call without it, tried from the state before it,
                    # reaches the same state with one indeterminate call fewer used up.
                    stack and not determinate[stack[-1][0] >> 1] and not (first_pass and read_only[number])
                    and step(stack[-1][1], prepared[number]) == new_state):
                # A determinate read-only call that fits the state can be moved to the front
                # of any linearization from here (it changes no state, wherever it sits), so
                # it is linearized now with no alternatives tried: if that fails, this whole
                # configuration fails.
                forced = first_pass and read_only[number]
                new_linearized = linearized | (1 << number)
                if any_indeterminate:
                    key = (new_linearized & determinate_mask, new_state)
                    used = new_linearized & ~determinate_mask
                    known = cache.get(key)
                    # (an exact repeat is the common case: no indeterminate call is linearized)
                    fresh = known is None or (used not in known and all(k & ~used for k in known))
                    if fresh:
                        if known is None:
                            cache[key] = [used]
                        else:
                            # (and the configurations it dominates go: the list stays an antichain,
                            # short, for the check above that every step makes)
                            known[:] = [k for k in known if k & used != used]
                            known.append(used)
                else:  # every call determinate: the cache is a plain set
                    key = (new_linearized, new_state)
                    fresh = key not in seen
                    if fresh:
                        seen.add(key)
                if fresh:
                    explored += 1
                    stack.append((entry, state, first_pass, forced, due_first, due))
                    state = new_state
                    linearized = new_linearized
                    if first_pass:
                        remaining -= 1
                        if by_completion[due] == number:
                            due += 1
                            while due < len(by_completion) and linearized >> by_completion[due] & 1:
                                due += 1
                    # lift the call and its completion out of the list
                    before = prv[entry]
                    after = nxt[entry]
                    nxt[before] = after
                    prv[after] = before
                    match = entry | 1
                    after = nxt[match]
                    nxt[prv[match]] = after
                    if after != -1:
                        prv[after] = prv[match]
                    if forced and not retry_before and not due_first:
                        # The state is unchanged and every call before this one in the list
                        # was found inconsistent with it: they still are, so the scan goes on.
                        entry = nxt[before]
                    else:
                        due_first = due_first_order and remaining > 0
                        entry = 2 * by_completion[due] if due_first else nxt[head]
                        retry_before = False
                        first_pass = True
                    continue
                dead = forced  # its successor was explored already and failed
            if new_state is not INCONSISTENT:
                retry_before = True  # it fits but was cut: with one more call linearized it might not be
            if due_first and not dead:  # the due call does not fit: scan from the front
                due_first = False
                retry_before = False
                entry = nxt[head]
                continue
            if not dead:
                entry = nxt[entry]
                continue
        elif first_pass and any_indeterminate:
            first_pass = False
            entry = nxt[head]
            retry_before = False
            continue
        if not dead:
            # A completion whose call is not linearized: this branch is dead.
            depth = len(stack)
            if depth >= best_depth:
                if depth > best_depth:
                    best_depth = depth
                    snapshots.clear()
                    result.stuck.clear()
                if len(snapshots) < _KEEP_PATHS:
                    snapshots.append((stack[:], state))  # a C-level copy; paths are built at the end
                if (entry >> 1) not in result.stuck and len(result.stuck) < 10:
                    result.stuck.append(entry >> 1)
        if grows and not looking:
            backtracks_before_looking -= 1
            if backtracks_before_looking < 0:
                looking = True
                resets_to, observed = _growth_tables(model, prepared, determinate)
        while True:  # backtrack past every forced step: their configurations are dead too
            if not stack:
                result.explored = explored
                result.longest = [_path(snapshot, last) for snapshot, last in snapshots]
                return result
            entry, state, first_pass, forced, due_first, due = stack.pop()
            number = entry >> 1
            linearized &= ~(1 << number)
            if determinate[number]:
                remaining += 1
            # put the call and its completion back
            match = entry | 1
            nxt[prv[match]] = match
            if nxt[match] != -1:
                prv[nxt[match]] = match
            nxt[prv[entry]] = entry
            prv[nxt[entry]] = entry
            if not forced:
                break
        if due_first:  # tried ahead of its turn: the calls before it in the list are still untried
            due_first = False
            retry_before = False
            entry = nxt[head]
        else:
            retry_before = True
            entry = nxt[entry]
    return SearchResult(True, explored)


def search_either(
    model: Model,
    calls: list[Call],
    second_model: Callable[[], Model],
    *,
    deadline: float | None = None,
    cache_limit: int = DEFAULT_CACHE_LIMIT,
    second_after: int | None = None,
) -> Generator[None, None, tuple[Model, SearchResult]]:
    """Two complete searches of one object, in slices: the due-first one runs alone, and once
    it has taken ``second_after`` slices (default 16 + one per four calls) a list-order one
    starts beside it, slice for slice, with a model of its own (from ``second_model``). On some valid histories
    either order meets the linearization thousands of times sooner than the other, so
    running both bounds a hard object's time by about twice the better one; an easy object
    never starts the second. The first answer wins, except that an "unknown" waits for the
    other's answer. The generator's value is (the model of the winning search, its result)."""
    wait = 16 + len(calls) // 4 if second_after is None else second_after
    searches = [(model, search_steps(model, calls, deadline=deadline, cache_limit=cache_limit,
                                         memory_share=2))]
    slices = 0
    while True:
        for searched, steps in list(searches):
            try:
                next(steps)
            except StopIteration as done:
                result: SearchResult = done.value
                searches.remove((searched, steps))
                if result.valid != "unknown" or not searches:
                    for _, other in searches:
                        other.close()
                    return searched, result
        yield
        slices += 1
        if slices == wait and len(searches) == 1:
            second = second_model()
            searches.append((second, search_steps(second, calls, deadline=deadline, cache_limit=cache_limit,
                                                  due_first_order=False, memory_share=2)))


def _growth_tables(model: Model, prepared: list[tuple[Any, ...]],
                   determinate: list[bool]) -> tuple[list[Any], list[Any]]:
    """Per call: what it may reset the state to (:meth:`Model.resets_to`); and the whole
    state it saw, as ``(state,)``, if it is a determinate read (None otherwise)."""
    observed: list[Any] = []
    for call, sure in zip(prepared, determinate):
        seen = model.observed(call) if sure else NOTHING_OBSERVED
        observed.append(None if seen is NOTHING_OBSERVED else (seen,))
    return [model.resets_to(call) for call in prepared], observed


def _may_grow_into_reads(state: Any, number: int, entry: int, nxt: list[int], observed: list[Any],
                         resets_to: list[Any], may_become: Any) -> bool:
    """Can every read that must come soon still see a growth of ``state`` (just reached by
    linearizing call ``number``)?

    Walking the list from the front, the calls that may be linearized before the read
    whose completion comes next are exactly the pending ones met on the way. That read will
    see a growth of ``state``, or of a state one of those calls may reset it to (a put's
    value); so will the reads completing after it, with the resets met before them, until
    a call that may leave any state is met. The walk stops after a few entries: the reads
    nearest the front decide nearly every dead end."""
    resets: list[Any] | None = None
    for _ in range(_LOOKAHEAD):
        if entry == -1:
            break
        other = entry >> 1
        if other != number:
            if entry & 1:
                seen = observed[other]
                if seen is not None and not may_become(state, seen[0]):
                    if resets is None:
                        return False
                    for reset in resets:
                        if may_become(reset, seen[0]):
                            break
                    else:
                        return False
            else:
                reset = resets_to[other]
                if reset is not GROWS_ONLY:
                    if reset is ANY_STATE:
                        return True
                    if resets is None:
                        resets = [reset]
                    else:
                        resets.append(reset)
        entry = nxt[entry]
    return True


def _path(stack: list[tuple[int, Any, bool, bool, bool, int]], last_state: Any) -> list[tuple[int, Any]]:
    """A partial linearization as (call number, state after it), from a saved search stack."""
    after = [entry[1] for entry in stack[1:]] + [last_state]
    return [(entry[0] >> 1, state) for entry, state in zip(stack, after)]
