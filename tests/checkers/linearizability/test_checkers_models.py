"""The sequential models."""

from __future__ import annotations

import pytest

from floodmark.checkers.linearizability.models import INCONSISTENT, Log, MultiRegister, make_model
from floodmark.formats.edn import EdnSet, Keyword


def run(model_name: str, steps: list[tuple[str, object, object, str]], **options: object) -> object:
    model = make_model(model_name, **options)  # type: ignore[arg-type]
    state = model.initial()
    for f, invoked, completed, outcome in steps:
        _, inner = model.split(invoked, {})
        _, done = model.split(completed, {}) if completed is not None and model_name in ("kv",) else (None, completed)
        call = model.prepare(f, inner, done, outcome)
        if call is None:
            continue
        state = model.step(state, call)
        if state is INCONSISTENT:
            return INCONSISTENT
    return state


def test_cas_register_reads_writes_and_swaps() -> None:
    assert run("cas-register", [("write", 1, None, "ok"), ("cas", [1, 2], None, "ok"), ("read", None, 2, "ok")]) == 2
    assert run("cas-register", [("write", 1, None, "ok"), ("cas", [3, 2], None, "ok")]) is INCONSISTENT
    assert run("cas-register", [("read", None, 5, "ok")]) is INCONSISTENT


def test_failed_ops_never_happened_unless_compare_failure_is_observed() -> None:
    assert run("cas-register", [("write", 1, None, "fail"), ("read", None, None, "ok")]) is None
    assert run("cas-register", [("cas", [None, 1], None, "fail")]) is None
    assert run("cas-register", [("cas", [None, 1], None, "fail")], failed_cas_observed=True) is INCONSISTENT
    assert run("cas-register", [("cas", [2, 1], None, "fail")], failed_cas_observed=True) is None


def test_unknown_cas_swaps_only_when_it_compares_equal() -> None:
    assert run("cas-register", [("cas", [None, 3], None, "info")]) == 3
    assert run("cas-register", [("cas", [7, 3], None, "info")]) is None


def test_knossos_nil_reads_tell_nothing() -> None:
    assert run("cas-register", [("write", 1, None, "ok"), ("read", None, None, "ok")]) is INCONSISTENT
    assert run("cas-register", [("write", 1, None, "ok"), ("read", None, None, "ok")], nil_reads_unknown=True) == 1


def test_register_rejects_cas() -> None:
    with pytest.raises(ValueError, match="no cas"):
        run("register", [("cas", [1, 2], None, "ok")])


def test_an_op_the_kv_model_lacks_is_named_as_the_kv_model_s() -> None:
    """A kv history's op of no kv function was refused as the cas-register model's (the one
    each key's register is), naming a model the user never chose."""
    with pytest.raises(ValueError, match="^the kv model has only get/put/append/read/write/cas, not 'frobnicate'$"):
        run("kv", [("frobnicate", ["k", "a"], None, "ok")])


def test_kv_appends_concatenate_and_missing_keys_read_empty() -> None:
    model = make_model("kv")
    assert model.split(["k", "v"], {}) == ("k", "v")
    assert model.split("v", {"key": "k"}) == ("k", "v")
    assert run("kv", [("get", ["k", None], ["k", ""], "ok")]) == ""
    assert run("kv", [("append", ["k", "x"], None, "ok"), ("append", ["k", "y"], None, "ok"),
                      ("get", ["k", None], ["k", "xy"], "ok")]) == "xy"
    assert run("kv", [("put", ["k", "a"], None, "ok"), ("get", ["k", None], ["k", "b"], "ok")]) is INCONSISTENT


def test_multi_register_transactions() -> None:
    txn = [["write", "x", 1], ["read", "y", 0]]
    assert run("multi-register", [("txn", txn, txn, "ok")], initial=0) == frozenset({("x", 1)})
    assert run("multi-register", [("txn", txn, [["write", "x", 1], ["read", "y", 2]], "ok")],
               initial=0) is INCONSISTENT
    assert run("multi-register", [("txn", [["read", "x", 5]], [["read", "x", 5]], "ok")], initial={"x": 5}) is not INCONSISTENT


def test_mutex() -> None:
    assert run("mutex", [("acquire", None, None, "ok"), ("release", None, None, "ok")]) is False
    assert run("mutex", [("acquire", None, None, "ok"), ("acquire", None, None, "ok")]) is INCONSISTENT
    assert run("mutex", [("release", None, None, "ok")]) is INCONSISTENT


def test_log_appends_at_offsets_and_reads() -> None:
    model = Log()
    state = model.initial()
    state = model.step(state, ("append", "a", 0))
    state = model.step(state, ("append", "b", None))  # unknown offset: appends at the end
    assert model.length[state] == 2
    assert model.step(state, ("read", 1, "b")) == state
    assert model.step(state, ("read", 0, "b")) is INCONSISTENT
    assert model.step(state, ("read", 2, None)) == state
    assert model.step(state, ("read", 1, None)) is INCONSISTENT
    assert model.step(state, ("append", "c", 5)) is INCONSISTENT
    # interning: the same log reached twice is the same state
    again = model.step(model.step(model.initial(), ("append", "a", 0)), ("append", "b", 1))
    assert again == state


def test_unknown_model_is_named() -> None:
    with pytest.raises(ValueError, match="choose one of"):
        make_model("queue")


# ----------------------------------------------- values compare as EDN and JSON mean them


@pytest.mark.parametrize(("written", "read"), [
    (1, True), (0, False), (1, 1.0), (Keyword("x"), "x"), (EdnSet([1, 2]), [1, 2]), ([1, True], [1, 1]),
    ({"a": 1}, {Keyword("a"): 1}),
])
def test_a_read_of_a_value_python_takes_for_the_written_one_is_inconsistent(written: object, read: object) -> None:
    assert run("register", [("write", written, None, "ok"), ("read", None, read, "ok")]) is INCONSISTENT
    assert run("register", [("write", written, None, "ok"), ("read", None, written, "ok")]) is not INCONSISTENT


def test_an_initial_0_is_not_false_and_a_cas_compares_exactly() -> None:
    assert run("cas-register", [("read", None, False, "ok")], initial=0) is INCONSISTENT
    assert run("cas-register", [("cas", [True, 2], None, "ok")], initial=1) is INCONSISTENT
    assert run("cas-register", [("cas", [1, 2], None, "ok")], initial=1) == 2


def test_kv_keys_1_and_true_are_different_keys() -> None:
    model = make_model("kv")
    assert model.split([1, "x"], {})[0] != model.split([True, "y"], {})[0]
    assert model.split(["k", "x"], {})[0] != model.split([Keyword("k"), "x"], {})[0]
    assert model.split(["v"], {"key": 1})[0] != model.split(["v"], {"key": True})[0]


def test_a_kv_append_of_something_other_than_a_string_does_not_fit() -> None:
    with pytest.raises(ValueError, match="concatenates strings, and 1 is not one"):
        run("kv", [("append", ["k", 1], None, "ok")])

    def unfit(*steps: tuple[str, object], initial: object = "") -> object:
        model = make_model("kv", initial)
        calls = [model.prepare(f, value, value, "ok") for f, value in steps]
        return model.unfit(calls) if model.may_be_unfit() else None  # type: ignore[arg-type]

    assert unfit(("put", 5), ("append", "x")) == (0, "5 is put in a key that is appended to, and is no string")
    assert unfit(("put", 5), ("get", 5)) is None  # no append: any value may be put
    assert unfit(("append", "x"), ("cas", ["x", 3])) is not None
    assert unfit(("append", "x"), ("put", "y")) is None
    assert unfit(("append", "x"), initial=0) is not None
    assert unfit(("append", "x"), initial=None) is None


def test_kv_nil_reads_tell_nothing_under_knossos_conventions() -> None:
    model = make_model("kv", nil_reads_unknown=True)
    assert model.prepare("read", None, None, "ok") is None and model.prepare("get", None, None, "ok") is None
    assert make_model("kv").prepare("get", None, None, "ok") == ("read", None)


def test_multi_register_states_have_one_form() -> None:
    model = MultiRegister(0)
    x_then_y = model.step(model.step(model.initial(), ("txn", ((True, "x", 1),))), ("txn", ((True, "y", 2),)))
    y_then_x = model.step(model.step(model.initial(), ("txn", ((True, "y", 2),))), ("txn", ((True, "x", 1),)))
    assert x_then_y == y_then_x and hash(x_then_y) == hash(y_then_x)
    # writing a register's initial value leaves the state nothing was written in
    assert model.step(model.initial(), ("txn", ((True, "a", 0),))) == model.initial()
    assert model.step(x_then_y, ("txn", ((True, "x", 0), (True, "y", 0)))) == model.initial()


def test_multi_register_keys_of_mixed_types() -> None:
    model = make_model("multi-register", {Keyword("x"): 0, 1: 0})
    txn = [["read", 1, 0], ["read", Keyword("x"), 0], ["write", True, 5], ["read", 1, 0], ["read", True, 5]]
    state = model.step(model.initial(), model.prepare("txn", txn, txn, "ok"))  # type: ignore[arg-type]
    assert state is not INCONSISTENT
    wrong = [["read", "x", 0]]  # the string "x" is not the keyword :x: it starts at nil
    assert model.step(model.initial(), model.prepare("txn", wrong, wrong, "ok")) is INCONSISTENT  # type: ignore[arg-type]


def test_a_multi_register_key_is_a_name_not_a_collection() -> None:
    with pytest.raises(ValueError, match=r"not \[1 2\]"):
        make_model("multi-register").prepare("txn", [["write", [1, 2], 3]], [["write", [1, 2], 3]], "ok")
    with pytest.raises(ValueError, match="a register's key is a name"):
        make_model("multi-register", {(1, 2): 0})


def test_multi_register_starts_at_nil_and_nil_is_a_value_unless_told_otherwise() -> None:
    read_0, read_nil = [["read", "x", 0]], [["read", "x", None]]
    assert run("multi-register", [("txn", read_0, read_0, "ok")]) is INCONSISTENT
    assert run("multi-register", [("txn", read_nil, read_nil, "ok")]) == frozenset()
    write = [["write", "x", 1]]
    assert run("multi-register", [("txn", write, write, "ok"), ("txn", read_nil, read_nil, "ok")]) is INCONSISTENT
    assert run("multi-register", [("txn", write, write, "ok"), ("txn", read_nil, read_nil, "ok")],
               initial=0, nil_reads_unknown=True) == frozenset({("x", 1)})


def test_a_log_offset_is_a_whole_number() -> None:
    with pytest.raises(ValueError, match="offset"):
        Log().prepare("read", {"offset": True}, {"value": "a"}, "ok")


def test_independent_keys_are_for_register_models() -> None:
    assert make_model("cas-register", independent=True).split([1, [0, 2]], {}) == (1, [0, 2])
    with pytest.raises(ValueError, match="independent"):
        make_model("kv", independent=True)


def test_a_log_op_whose_completion_names_another_partition_or_offset_does_not_fit() -> None:
    """Which partition an append went to, or which offset a read read, cannot be told when the
    completion says otherwise than the invocation: the op does not fit the log model."""
    append = {"topic": "t0", "partition": 0, "value": "a"}
    with pytest.raises(ValueError, match="^acknowledged send names partition t0/1, but the send was to t0/0$"):
        Log().prepare("append", append, {**append, "partition": 1, "offset": 0}, "ok")
    with pytest.raises(ValueError, match="^acknowledged send names value 'b', but the send was of 'a'$"):
        Log().prepare("append", append, {**append, "value": "b", "offset": 0}, "ok")
    read = {"topic": "t0", "partition": 0, "offset": 3}
    with pytest.raises(ValueError, match="^read's completion names t0/0 at offset 4, but the read was of t0/0 at offset 3$"):
        Log().prepare("read", read, {**read, "offset": 4, "value": "a"}, "ok")
    assert Log().prepare("read", read, {**read, "value": "a"}, "ok") == ("read", 3, "a")
    assert Log().prepare("append", append, {**append, "offset": 0}, "ok") == ("append", "a", 0)


@pytest.mark.parametrize("completed", [None, "garbage", [1], {"topic": "t0", "partition": 0, "value": "a"}])
def test_an_acknowledged_append_naming_no_offset_does_not_fit_the_log(completed: object) -> None:
    """The log-lin workload records an append it cannot place as unknown (info), never as ok:
    an ok one whose completion names no offset was damaged, and judging it as an append at
    some offset judged another history (VALID where the offset it lost made it invalid)."""
    append = {"topic": "t0", "partition": 0, "value": "a"}
    with pytest.raises(ValueError, match="^an acknowledged append names no offset"):
        Log().prepare("append", append, completed, "ok")
    assert Log().prepare("append", append, completed, "info") == ("append", "a", None)  # unknown: anywhere


@pytest.mark.parametrize("completed", [None, "garbage", [1], 3])
def test_an_ok_read_whose_completion_is_no_map_is_named_as_such(completed: object) -> None:
    """It was refused with Python's own words ("'str' object has no attribute 'get'")."""
    read = {"topic": "t0", "partition": 0, "offset": 3}
    with pytest.raises(ValueError, match="^a read's completion is a map with the value read, not "):
        Log().prepare("read", read, completed, "ok")


@pytest.mark.parametrize("name", ["kv", "multi-register", "log"])
def test_keyed_ops_are_refused_by_a_model_of_no_keys_naming_those_that_take_them(name):
    for keying in ({"independent": True}, {"keys_beside": True}):
        with pytest.raises(ValueError, match=f"one object per key by the cas-register, register, mutex models, not by {name}$"):
            make_model(name, **keying)
    for keyed in ("cas-register", "register", "mutex"):
        assert make_model(keyed, keys_beside=True).split(1, {"key": "a"}) == ("a", 1)
        assert make_model(keyed, independent=True).split(["a", 1], {}) == ("a", 1)
        assert make_model(keyed).split(1, {"key": "a"}) == (None, 1)
