"""Value identity as EDN and JSON mean it: the canonical forms values enter the models in."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from floodmark.checkers.linearizability.values import canonical, display, order_key, same, shown
from floodmark.formats import edn
from floodmark.formats.jepsen_edn import plain


def read(text: str) -> Any:
    """An EDN value as a history holds it, then canonical."""
    return canonical(plain(edn.loads(text)))


@pytest.mark.parametrize(("a", "b"), [
    ("1", "true"), ("0", "false"), ("1", "1.0"), ("0", "0.0"), (":x", '"x"'), ("x", '"x"'), ("x", ":x"),
    ("\\x", '"x"'), ("#{1 2}", "[1 2]"), ("#{}", "[]"), ("#{}", "{}"), ("{}", "[]"), ("nil", "false"),
    ("{1 2}", "{true 2}"), ("{:a 1}", '{"a" 1}'), ("[1 [true]]", "[1 [1]]"), ("#{[:a 1]}", "{:a 1}"),
    ("#t 1", "1"), ("#t 1", "#u 1"), ('[1 "x"]', "[1 :x]"),
])
def test_values_python_takes_for_one_are_distinct(a: str, b: str) -> None:
    assert read(a) != read(b)
    assert len({read(a), read(b)}) == 2


@pytest.mark.parametrize(("a", "b"), [
    ("[1 2]", "(1 2)"), ("#{1 2}", "#{2 1}"), ("{:a 1, :b 2}", "{:b 2, :a 1}"), ("0.0", "-0.0"), ("7N", "7"),
    ("{[1 2] #{:x}}", "{(1 2) #{:x}}"), ("#{{:a 1} [2]}", "#{[2] {:a 1}}"),
])
def test_equal_values_are_equal_whatever_their_spelling(a: str, b: str) -> None:
    assert read(a) == read(b) and hash(read(a)) == hash(read(b))


@pytest.mark.parametrize("text", ["##NaN", "[##NaN]", "{:a ##NaN}", "#{##NaN}"])
def test_a_nan_equals_no_other_nan_as_in_clojure(text: str) -> None:
    # (= ##NaN ##NaN) is false in Clojure, so is (= [##NaN] [##NaN]): two NaNs read apart differ
    assert read(text) != read(text)
    assert canonical(float("nan")) != canonical(float("nan"))
    nan = read(text)
    assert nan == nan and len({nan, nan}) == 1  # (a state holding one still hashes and caches)
    assert shown(nan) == text and sorted([read("1.5"), nan, read("2")], key=order_key)[2] is nan


def test_the_common_values_are_themselves() -> None:
    for value in (None, 0, 7, -3, 2**80, "", "x"):
        assert canonical(value) is value


def test_json_values_keep_true_apart_from_1_and_ints_from_floats() -> None:
    assert canonical(json.loads("true")) != canonical(json.loads("1"))
    assert canonical(json.loads("1.0")) != canonical(json.loads("1"))
    assert canonical(json.loads('{"a": [1, true]}')) == canonical(json.loads('{"a": [1, true]}'))


def test_something_that_is_no_value_is_refused() -> None:
    with pytest.raises(ValueError, match="not an EDN or JSON value"):
        canonical(object())


def test_mixed_types_sort_and_show() -> None:
    forms = [read(t) for t in ("{1 2, \"a\" 3}", ":k", '"s"', "1.5", "1", "true", "nil", "[1]", "#{2 :a}", "\\c")]
    ordered = sorted(forms, key=order_key)
    assert ordered[0] is None and ordered == sorted(reversed(forms), key=order_key)
    assert shown(read('{1 2, "a" 3}')) in ('[[1 2] ["a" 3]]', '[["a" 3] [1 2]]')
    assert shown(read("#{2 :a}")) == "#{2 :a}"
    assert display(read("{:a #{1}}")) == {"a": [1]} and repr(display(read(":x"))) == ":x"


def test_same_never_confuses_an_echo() -> None:
    assert same([1, "x"], [1, "x"]) and not same([1], [True]) and not same(1, 1.0)
    assert not same(edn.Keyword("x"), "x") and same({"a": [1]}, {"a": [1]})


# ------------------------------------------------------------------ property: as EDN means it

# A value's model, independent of the code under test: (kind, payload), with Clojure's
# equality made Python's by normalising (a list is a vector; sets and maps are frozensets).
_INTS = st.sampled_from([0, 1, 2, -1, 2**70])
_FLOATS = st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e20])
_NAMES = st.sampled_from(["x", "a", "ok"])
_scalars = st.one_of(
    st.just(("nil", None)), st.booleans().map(lambda b: ("bool", b)), _INTS.map(lambda i: ("int", i)),
    _FLOATS.map(lambda f: ("float", f)), st.sampled_from(["x", "a", "", "1", "true"]).map(lambda s: ("str", s)),
    _NAMES.map(lambda n: ("keyword", n)), _NAMES.map(lambda n: ("symbol", n)), _NAMES.map(lambda n: ("char", n[0])),
)


def _collections(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    items = st.lists(inner, max_size=3)
    return st.one_of(
        items.map(lambda xs: ("vector", tuple(xs))), items.map(lambda xs: ("list", tuple(xs))),
        items.map(lambda xs: ("set", tuple(xs))), st.lists(st.tuples(inner, inner), max_size=3).map(
            lambda kvs: ("map", tuple(kvs))), st.tuples(st.sampled_from(["t", "u"]), inner).map(
            lambda tv: ("tagged", tv)),
    )


VALUES = st.recursive(_scalars, _collections, max_leaves=6)


def norm(value: Any) -> Any:
    kind, payload = value
    if kind in ("vector", "list"):
        return ("seq", tuple(map(norm, payload)))
    if kind == "set":
        return ("set", frozenset(map(norm, payload)))
    if kind == "map":
        return ("map", frozenset((norm(k), norm(v)) for k, v in payload))
    if kind == "tagged":
        return ("tagged", payload[0], norm(payload[1]))
    if kind == "float":
        return ("float", payload + 0.0)  # (-0.0 is 0.0, as in Clojure)
    return value


def to_edn(value: Any, order: Any = None) -> str:
    kind, payload = value
    if kind == "nil":
        return "nil"
    if kind == "bool":
        return "true" if payload else "false"
    if kind in ("int", "float"):
        return repr(payload)
    if kind == "str":
        return json.dumps(payload)
    if kind == "keyword":
        return ":" + payload
    if kind == "symbol":
        return payload
    if kind == "char":
        return "\\" + payload
    if kind == "tagged":
        return f"#{payload[0]} {to_edn(payload[1], order)}"
    parts = list(payload)
    if order is not None and kind in ("set", "map"):
        parts = order(parts)
    if kind == "map":
        return "{" + ", ".join(f"{to_edn(k, order)} {to_edn(v, order)}" for k, v in parts) + "}"
    inner = " ".join(to_edn(v, order) for v in parts)
    return {"vector": "[{}]", "list": "({})", "set": "#{{{}}}"}[kind].format(inner)


def read_model(value: Any, order: Any = None) -> Any:
    """The value through the EDN reader and a history's plain values, canonical; a value the
    reader refuses (a set holding the same member twice, or 1 and true) is not drawn."""
    try:
        return read(to_edn(value, order))
    except edn.EdnError as e:
        assert "twice" in e.problem or "cannot hold them apart" in e.problem, e.problem
        reject()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(VALUES, VALUES)
def test_canonical_keeps_distinct_edn_values_distinct_and_equal_ones_equal(a: Any, b: Any) -> None:
    ca, cb = read_model(a), read_model(b)
    assert (ca == cb) == (norm(a) == norm(b)), (to_edn(a), to_edn(b))
    if ca == cb:
        assert hash(ca) == hash(cb)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(VALUES, st.randoms(use_true_random=False))
def test_a_value_written_in_another_order_is_the_same_value(a: Any, rng: Any) -> None:
    def shuffled(parts: list[Any]) -> list[Any]:
        rng.shuffle(parts)
        return parts

    assert read_model(a) == read_model(a, shuffled)
    assert sorted([read_model(a)], key=order_key)  # (any value has a sort key)


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, 2]), st.sampled_from([0.0, 1.0, 2.5]),
              st.sampled_from(["", "a", "1"])),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=5)


def json_norm(value: Any) -> Any:
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        return ("float", value)
    if isinstance(value, list):
        return ("seq", tuple(map(json_norm, value)))
    if isinstance(value, dict):
        return ("map", frozenset((k, json_norm(v)) for k, v in value.items()))
    return (type(value).__name__, value)


@settings(max_examples=300, deadline=None)
@given(_json_values, _json_values)
def test_canonical_keeps_distinct_json_values_distinct_and_equal_ones_equal(a: Any, b: Any) -> None:
    ca, cb = canonical(json.loads(json.dumps(a))), canonical(json.loads(json.dumps(b)))
    assert (ca == cb) == (json_norm(a) == json_norm(b))
