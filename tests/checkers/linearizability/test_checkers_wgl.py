"""The Wing–Gong–Lowe search, checked against brute force on small random histories."""

from __future__ import annotations

import itertools
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.checkers.linearizability.models import (
    INCONSISTENT,
    CasRegister,
    KeyValue,
    Model,
    Mutex,
)
from floodmark.checkers.linearizability.wgl import Call, SearchResult, search, search_either


def brute_force(model: Model, calls: list[Call]) -> bool:
    """Try every subset of indeterminate calls and every order respecting real time."""
    determinate = [c for c in calls if c.completed_at is not None]
    optional = [c for c in calls if c.completed_at is None]
    for k in range(len(optional) + 1):
        for chosen in itertools.combinations(optional, k):
            ops = determinate + list(chosen)
            for order in itertools.permutations(ops):
                if _respects_real_time(order) and _legal(model, order):
                    return True
    return False


def _respects_real_time(order: tuple[Call, ...]) -> bool:
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if b.completed_at is not None and b.completed_at < a.invoked_at:
                return False  # b finished before a began, yet is ordered after it
    return True


def _legal(model: Model, order: tuple[Call, ...]) -> bool:
    state = model.initial()
    for call in order:
        state = model.step(state, call.call)
        if state is INCONSISTENT:
            return False
    return True


@st.composite
def register_histories(draw: st.DrawFn) -> list[Call]:
    n = draw(st.integers(1, 5))
    calls = []
    for i in range(n):
        start = draw(st.integers(0, 20))
        length = draw(st.integers(1, 8))
        kind = draw(st.sampled_from(["read", "write", "cas", "cas?", "write?", "cas-failed"]))
        a, b = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        call = {"read": ("read", a), "write": ("write", a), "cas": ("cas", a, b), "cas?": ("cas?", a, b),
                "write?": ("write", a), "cas-failed": ("cas-failed", a)}[kind]
        indeterminate = kind.endswith("?")
        calls.append(Call(i, None, call, 2 * start, None if indeterminate else 2 * (start + length) + 1))
    return calls


@settings(max_examples=400, deadline=None)
@given(register_histories())
def test_search_agrees_with_brute_force(calls: list[Call]) -> None:
    model = CasRegister(0)
    assert search(model, calls).valid is brute_force(model, calls)


@st.composite
def kv_histories(draw: st.DrawFn) -> list[Call]:
    """One key's gets, appends and puts, some of unknown outcome; the values are short and
    repeat, so a get can often be explained in more than one way."""
    n = draw(st.integers(1, 6))
    calls = []
    for i in range(n):
        start = draw(st.integers(0, 20))
        length = draw(st.integers(1, 8))
        kind = draw(st.sampled_from(["get", "get", "append", "append", "put", "append?", "put?"]))
        if kind == "get":
            call: tuple[object, ...] = ("read", draw(st.sampled_from(["", "a", "b", "ab", "ba", "aa", "abb"])))
        else:
            call = ("append" if kind.startswith("append") else "write", draw(st.sampled_from(["a", "b"])))
        indeterminate = kind.endswith("?")
        calls.append(Call(i, None, call, 2 * start, None if indeterminate else 2 * (start + length) + 1))
    return calls


@settings(max_examples=600, deadline=None)
@given(kv_histories(), st.sampled_from([0, None]))
def test_kv_search_with_growth_lookahead_agrees_with_brute_force(calls: list[Call], after: int | None) -> None:
    # (lookahead from the first step, and only after backtracking once per call)
    model = KeyValue()
    assert search(model, calls, lookahead_after=after).valid is brute_force(model, calls)


@settings(max_examples=300, deadline=None)
@given(kv_histories(), st.sampled_from([0, 1, 3]))
def test_two_searches_in_two_orders_agree_with_brute_force(calls: list[Call], second_after: int) -> None:
    steps = search_either(KeyValue(), calls, KeyValue, second_after=second_after)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            model, result = done.value
            break
    assert isinstance(model, KeyValue) and isinstance(result, SearchResult)
    assert result.valid is brute_force(KeyValue(), calls)


def test_stale_read_has_no_linearization_and_names_the_stuck_op() -> None:
    calls = [Call(0, 1, ("write", 1), 0, 1), Call(2, 3, ("read", 0), 2, 3)]
    result = search(CasRegister(0), calls)
    assert result.valid is False
    assert result.stuck == [1]
    assert result.longest == [[(0, 1)]]


def test_concurrent_ops_may_take_effect_in_either_order() -> None:
    calls = [Call(0, 3, ("write", 1), 0, 3), Call(1, 2, ("read", 1), 1, 2), Call(4, 5, ("read", 1), 4, 5)]
    assert search(CasRegister(0), calls).valid is True


def test_indeterminate_op_may_never_happen() -> None:
    # a pending acquire that never completed must not block a later acquire/release pair
    calls = [Call(0, None, ("acquire",), 0, None), Call(1, 2, ("acquire",), 1, 2), Call(3, 4, ("release",), 3, 4)]
    assert search(Mutex(), calls).valid is True
    # ...but a determinate double acquire is invalid
    calls = [Call(0, 1, ("acquire",), 0, 1), Call(2, 3, ("acquire",), 2, 3)]
    assert search(Mutex(), calls).valid is False


def test_deadline_answers_unknown() -> None:
    # many concurrent writes and reads of distinct values: a large search space
    calls = [Call(i, None, ("write", i), i, None) for i in range(60)]
    calls += [Call(100 + i, 200 + i, ("read", (i * 7) % 60), 61 + i, 1000 + i) for i in range(60)]
    calls.append(Call(999, 1999, ("read", -1), 2000, 2001))  # impossible: forces exhaustive search
    result = search(CasRegister(0), calls, deadline=time.monotonic() + 0.2)
    assert result.valid == "unknown"
    assert result.reason == "time limit reached"


def test_cache_limit_answers_unknown() -> None:
    calls = [Call(i, None, ("write", i), i, None) for i in range(30)]
    calls += [Call(100 + i, 200 + i, ("read", (i * 7) % 30), 31 + i, 1000 + i) for i in range(30)]
    calls.append(Call(999, 1999, ("read", -1), 2000, 2001))
    result = search(CasRegister(0), calls, cache_limit=100)
    assert result.valid == "unknown"
    assert "configurations" in (result.reason or "")
