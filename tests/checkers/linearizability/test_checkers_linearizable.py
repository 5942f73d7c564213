"""The linearizability checker: history preparation, per-object search, verdicts and reports."""

from __future__ import annotations

import pytest
from checkers_fixtures import History

from floodmark.checkers.api import CheckInput
from floodmark.checkers.linearizability.checker import (
    Interpretation,
    LinearizableChecker,
    ModelMismatch,
    format_conventions,
    infer_model,
    prepare_history,
)
from floodmark.checkers.linearizability.independent import looks_independent
from floodmark.checkers.linearizability.models import make_model
from floodmark.checkers.linearizability.synthetic import illegal_gets, kv_run, log_lin_run
from floodmark.checkers.registry import check_history
from floodmark.contracts.results import CheckerResult
from floodmark.contracts.run_config import TestConfig
from floodmark.formats.edn import EdnSet, Keyword
from floodmark.formats.jepsen_edn import parse_edn_history


def register_history() -> History:
    h = History()
    h.call(0, "write", 1)
    h.invoke(1, "write", 2)  # never completes: indeterminate
    h.call(2, "read", None, 2)
    h.add("invoke", "nemesis", "kill")
    return h


def test_prepare_pairs_calls_and_drops_what_cannot_matter() -> None:
    h = register_history()
    h.call(3, "cas", [5, 6], outcome="fail")  # did not happen
    h.invoke(4, "read")
    h.info(4, "read")  # unknown read: constrains nothing
    objects = prepare_history(h.ops, make_model("cas-register"))
    assert len(objects) == 1
    calls = objects[0].calls
    assert [(c.op, c.call) for c in calls] == [(0, ("write", 1)), (2, ("write", 2)), (3, ("read", 2))]
    assert calls[1].completed_at is None and calls[0].completed_at == 1


def test_indeterminate_write_explains_a_later_read() -> None:
    result = LinearizableChecker(model="cas-register").check(CheckInput(register_history().ops))
    assert result.valid is True
    assert result.stats["calls"] == 3


def test_stale_read_is_reported_with_partial_linearization_and_stuck_op() -> None:
    h = History()
    h.call(0, "write", 1)
    h.call(1, "write", 2)
    h.call(0, "read", None, 1)
    result = LinearizableChecker(model="cas-register").check(CheckInput(h.ops))
    assert result.valid is False
    anomaly = result.anomalies[0]
    assert anomaly.type == "nonlinearizable"
    assert anomaly.details["stuck"] == [4]
    path = anomaly.details["partial_linearizations"][0]
    assert [step["op"] for step in path] == [0, 2]
    assert path[-1]["state"] == 2
    assert "op 4 (read 1" in anomaly.explanation
    assert anomaly.ops == (4, 5)


def test_an_explanation_writes_values_and_states_as_edn() -> None:
    # Python's repr said None for nil and 'a' for "a", in a history that has neither.
    h = History()
    h.call(0, "read", None, "a")
    anomaly = LinearizableChecker(model="cas-register").check(CheckInput(h.ops)).anomalies[0]
    assert anomaly.explanation.endswith('op 0 (read "a", process 0) cannot take effect from state nil.'), \
        anomaly.explanation


def test_kv_is_checked_per_key_and_fails_fast() -> None:
    h = History()
    for key in ("a", "b", "c"):
        h.call(0, "put", [key, "x"])
        h.call(0, "get", [key, None], [key, "x"])
    h.call(1, "get", ["b", None], ["b", "stale"])
    result = LinearizableChecker(model="kv").check(CheckInput(h.ops))
    assert result.valid is False
    assert result.stats["objects"] == 3
    assert result.anomalies[0].details["key"] == "'b'"


@pytest.mark.parametrize("seed", [1, 2])
def test_kv_with_fifty_clients_is_linearizable_until_early_gets_are_made_illegal(seed: int) -> None:
    run = kv_run(seed, ops=800, processes=50)
    good = LinearizableChecker(model="kv").check(CheckInput(run.history, time_limit=60))
    assert good.valid is True
    bad_run = illegal_gets(run, seed)
    corrupted = {op.value["key"] for op, was in zip(bad_run.history, run.history) if op != was}
    assert len(corrupted) == 3
    bad = LinearizableChecker(model="kv").check(CheckInput(bad_run.history, time_limit=60))
    assert bad.valid is False
    assert len(bad.anomalies) == 1  # fail-fast: the first illegal key found ends the check
    assert bad.anomalies[0].details["key"] in {repr(key) for key in corrupted}
    every = LinearizableChecker(model="kv", every_object=True).check(CheckInput(bad_run.history, time_limit=60))
    assert every.valid is False
    assert {a.details["key"] for a in every.anomalies} == {repr(key) for key in corrupted}
    assert every.stats["objects_checked"] == every.stats["objects"] - len(corrupted)


def test_log_model_on_log_lin_ops_is_per_partition() -> None:
    h = History()
    h.call(0, "append", {"topic": "t0", "partition": 0, "value": "a"}, {"topic": "t0", "partition": 0, "value": "a", "offset": 0})
    h.call(1, "append", {"topic": "t0", "partition": 1, "value": "b"}, {"topic": "t0", "partition": 1, "value": "b", "offset": 0})
    h.call(2, "read", {"topic": "t0", "partition": 0, "offset": 0}, {"topic": "t0", "partition": 0, "offset": 0, "value": "a"})
    h.call(2, "read", {"topic": "t0", "partition": 1, "offset": 1}, {"topic": "t0", "partition": 1, "offset": 1, "value": None})
    assert infer_model(h.ops) == "log"
    ok = LinearizableChecker().check(CheckInput(h.ops, config=TestConfig(workload="log-lin")))
    assert ok.valid is True and ok.stats["objects"] == 2
    h.call(3, "read", {"topic": "t0", "partition": 1, "offset": 0}, {"topic": "t0", "partition": 1, "offset": 0, "value": None})
    bad = LinearizableChecker().check(CheckInput(h.ops, config=TestConfig(workload="log-lin")))
    assert bad.valid is False
    assert (bad.anomalies[0].topic, bad.anomalies[0].partition) == ("t0", 1)


def test_a_final_read_is_the_whole_log_from_offset_0() -> None:
    p = {"topic": "t0", "partition": 0}
    h = History()
    h.call(0, "append", {**p, "value": "a"}, {**p, "value": "a", "offset": 0})
    h.call(1, "final-read", {**p, "offset": 0}, {**p, "offset": 0, "records": [[0, "a"], [1, "b"]]})
    result = LinearizableChecker().check(CheckInput(h.ops, config=TestConfig(workload="log-lin")))
    assert result.valid is False  # b was never appended (nor is it an unknown append's)
    gap = History()
    gap.call(1, "final-read", {**p, "offset": 0}, {**p, "offset": 0, "records": [[0, "a"], [2, "b"]]})
    with pytest.raises(ModelMismatch, match=r"run from offset 0 without a gap: record 1 is \[2 \"b\"\]"):
        prepare_history(gap.ops, make_model("log"))
    failed = History()
    failed.call(1, "final-read", {**p, "offset": 0}, {**p, "offset": 0}, "fail")
    assert [o.calls for o in prepare_history(failed.ops, make_model("log"))] == []


def test_a_failed_append_holding_its_offset_does_not_fit_the_log_model() -> None:
    """A hand edit of an acknowledged append's ``ok`` to ``fail`` kept its offset: the append
    was dropped as failed while reads returned its record, and a valid run read INVALID
    (nonlinearizable). Failed and acknowledged at once is no op the workload writes: the
    history does not fit the model (unknown), naming the op. A failed append as the workload
    writes it, without an offset, is still dropped."""
    a = {"topic": "t0", "partition": 0, "value": "a"}
    h = History()
    h.call(0, "append", a, {**a, "offset": 0}, "fail")
    h.call(1, "read", {"topic": "t0", "partition": 0, "offset": 0}, {"topic": "t0", "partition": 0, "offset": 0,
                                                                     "value": "a"})
    with pytest.raises(ModelMismatch, match=r"op 1 \(append .*\): append op failed, yet its completion holds an "
                                            r"acknowledgement's offset \(0\)"):
        prepare_history(h.ops, make_model("log"))
    result = check_history(h.ops, {}, TestConfig(workload="log-lin"), checkers=["linearizable"])["checkers"]
    assert result["linearizable"]["valid"] == "unknown" and "failed, yet its completion holds" in str(result)
    failed = History()
    failed.call(0, "append", a, a, "fail")
    assert [o.calls for o in prepare_history(failed.ops, make_model("log"))] == []


def test_time_limit_gives_unknown_not_a_guess() -> None:
    run = log_lin_run(1, ops=3000, processes=40, partitions=1)
    result = LinearizableChecker().check(CheckInput(run.history, config=run.config, time_limit=0.0))
    assert result.valid == "unknown"
    assert "time limit" in result.stats["unknown_because"][0]
    # and the verdict line says so, as every checker says why it is unknown
    assert result.stats["unjudged_because"].startswith("the search stopped before a verdict: partition t0/0: "
                                                       "time limit reached"), result.stats
    assert result.stats["unjudged_because"].endswith("(a longer time limit may decide it)")


def test_an_unknown_verdict_line_names_the_first_objects_and_counts_the_rest() -> None:
    from floodmark.checkers.linearizability.checker import unknown_reason

    said = unknown_reason([f"key {k}: more than 10 configurations" for k in range(5)])
    assert said == ("the search stopped before a verdict: key 0: more than 10 configurations; key 1: more than "
                    "10 configurations; key 2: more than 10 configurations; and 2 more objects")


def test_model_mismatch_is_an_error_naming_the_op() -> None:
    h = History()
    h.call(0, "acquire", None)
    with pytest.raises(ModelMismatch, match="op 0"):
        LinearizableChecker(model="cas-register").check(CheckInput(h.ops))


def test_model_inference() -> None:
    h = History()
    h.call(0, "txn", [["read", "x", None]], [["read", "x", 0]])
    assert infer_model(h.ops) == "multi-register"
    assert infer_model(History().ops, "log-lin") == "log"
    assert infer_model(register_history().ops) == "cas-register"
    # A log history of final reads alone (found by a differential hunt: it was guessed to be
    # a cas register, and refused as bad input).
    finals = History()
    finals.call(0, "final-read", {"topic": "t0", "partition": 0, "offset": 0},
                {"topic": "t0", "partition": 0, "offset": 0, "records": [[0, "a"]]})
    assert infer_model(finals.ops) == "log"


def test_format_conventions() -> None:
    assert format_conventions("edn", "cas-register") == {"initial": 0, "nil_reads_unknown": True}
    assert format_conventions("jepsen-text", "cas-register")["failed_cas_observed"] is True
    assert format_conventions("edn", "kv") == {"nil_reads_unknown": True}  # Knossos: a nil read tells nothing
    assert format_conventions("edn", "log") == {}
    # our JSONL: every register model starts at nil with nil a value, the models' defaults
    assert format_conventions("jsonl", "multi-register") == format_conventions("jsonl", "cas-register") == {}


def verdict(h: History, **options: object) -> object:
    return LinearizableChecker(**options).check(CheckInput(h.ops)).valid  # type: ignore[arg-type]


def sequential(*calls: tuple[str, object, object]) -> History:
    """One process, one op at a time: the only order is the history's."""
    h = History()
    for f, invoked, completed in calls:
        h.call(0, f, invoked, completed)
    return h


@pytest.mark.parametrize(("written", "read"), [(1, True), (0, False), (1, 1.0), (Keyword("x"), "x"),
                                               (EdnSet([1, 2]), [1, 2]), ({"a": 1}, {"a": True})])
def test_a_read_of_a_value_python_merges_with_the_written_one_is_invalid(written: object, read: object) -> None:
    assert verdict(sequential(("write", written, None), ("read", None, read)), model="register") is False
    assert verdict(sequential(("write", written, None), ("read", None, written)), model="register") is True


_NAN_HISTORY = """{:type :invoke, :f :write, :value ##NaN, :process 0}
{:type :ok, :f :write, :value ##NaN, :process 0}
{:type :invoke, :f :read, :value nil, :process 0}
{:type :ok, :f :read, :value %s, :process 0}
"""


@pytest.mark.parametrize(("read", "initial", "code"), [
    ("##NaN", None, 1), ("nil", None, 0), ("##Inf", None, 1), ("##NaN", "##NaN", 1), ("nil", "##NaN", 0),
])
def test_a_read_of_nan_is_illegal_whatever_the_register_holds(tmp_path, read: str, initial: str | None,
                                                              code: int) -> None:
    # Knossos's register reads are legal if (= value read), and (= ##NaN ##NaN) is false
    from floodmark.cli import main

    path = tmp_path / "history.edn"
    lines = _NAN_HISTORY % read
    path.write_text(lines if initial is None else lines.split("\n", 2)[2])
    assert main(["check", *(["--initial", initial] if initial else []), str(path)]) == code


def test_kv_keys_1_and_true_are_checked_apart() -> None:
    h = sequential(("put", [1, "x"], None), ("put", [True, "y"], None), ("get", [1, None], [1, "x"]))
    result = LinearizableChecker(model="kv").check(CheckInput(h.ops))
    assert result.valid is True and result.stats["objects"] == 2


def test_a_read_invoked_with_true_that_returns_1_read_1() -> None:
    assert verdict(sequential(("write", 1, None), ("read", True, 1)), model="register") is True
    # (where the completion is split by key, it is not taken for an echo of the invocation)
    assert verdict(sequential(("put", ["k", 1], None), ("get", ["k", True], ["k", 1])), model="kv") is True
    assert verdict(sequential(("put", ["k", 1], None), ("get", ["k", 1], ["k", True])), model="kv") is False


def test_a_register_value_may_be_a_map_with_keys_of_mixed_types() -> None:
    value = {1: 2, "a": 3}
    assert verdict(sequential(("write", value, None), ("read", None, {"a": 3, 1: 2})), model="register") is True
    assert verdict(sequential(("write", value, None), ("read", None, {"a": 3, True: 2})), model="register") is False


def independent_history() -> History:
    return sequential(("write", [1, 3], None), ("write", [2, 4], None), ("read", [1, None], [1, 3]),
                      ("cas", [2, [4, 5]], None), ("read", [2, None], [2, 5]))


def test_jepsen_independent_ops_are_detected_and_checked_per_key() -> None:
    h = independent_history()
    assert looks_independent(h.ops)
    result = LinearizableChecker().check(CheckInput(h.ops))
    assert result.valid is True and result.stats["objects"] == 2 and result.stats["independent"] is True
    assert "per key of jepsen.independent [key value] ops (detected)" in result.stats["interpretation"]
    # taken as one register holding pairs, the same history is invalid
    assert verdict(h, independent=False) is False
    h.call(1, "read", [1, None], [1, 4])  # key 1 never held 4
    bad = LinearizableChecker().check(CheckInput(h.ops))
    assert bad.valid is False and bad.anomalies[0].details["key"] == "1"


def test_independent_registers_follow_the_formats_conventions() -> None:
    h = sequential(("read", [3, None], [3, None]), ("cas", [4, [0, 1]], None), ("read", [5, None], [5, None]))
    assert verdict(h, conventions="edn") is True  # EDN: start at 0, a nil read tells nothing
    assert verdict(h, conventions="jsonl") is False  # JSONL: start at nil, so cas 0 -> 1 cannot happen
    assert verdict(h, conventions="edn", initial=None) is False  # Jepsen's (cas-register): nil


def test_a_plain_register_history_does_not_look_independent() -> None:
    assert not looks_independent(register_history().ops)
    pairs = sequential(("write", [1, 3], None), ("read", None, [1, 3]))  # a register holding pairs
    assert not looks_independent(pairs.ops) and verdict(pairs) is True
    writes_only = sequential(("write", [1, 3], None), ("write", [2, 4], None))
    assert not looks_independent(writes_only.ops)  # no read to tell: ambiguous
    assert not looks_independent(sequential(("read", [1, None], [1, 3]), ("get", [1, None], [1, 3])).ops)


KEYED = ('{:process 0 :type :invoke :f :write :key "a" :value 1}\n{:process 0 :type :ok :f :write :key "a" :value 1}\n'
         '{:process 1 :type :invoke :f :write :key "b" :value 2}\n{:process 1 :type :ok :f :write :key "b" :value 2}\n'
         '{:process 0 :type :invoke :f :read :key "a" :value nil}\n{:process 0 :type :ok :f :read :key "a" :value %s}\n')


def test_register_ops_that_name_their_key_beside_their_value_are_one_register_per_key() -> None:
    """(regression, 2026-11-29, found by crafting Porcupine-style ``:key`` fields onto a
    register history) The key was ignored and every op judged as one register's: a read of
    key a returning 2, which only key b was given, was VALID, and a read of a's own 1 INVALID."""
    def check(read: str) -> CheckerResult:
        ops = parse_edn_history(KEYED % read, "keyed.edn", check_pairs=True)
        return LinearizableChecker(conventions="edn").check(CheckInput(ops))

    assert check("2").valid is False
    good = check("1")
    assert good.valid is True and good.stats["objects"] == 2
    assert "per key its ops name beside their value" in good.stats["interpretation"]
    # our JSONL's {"key", "value"} maps, on every op, name the key too
    maps = sequential(("write", {"key": "a", "value": 1}, None), ("write", {"key": "b", "value": 2}, None),
                      ("read", {"key": "a", "value": None}, {"key": "a", "value": 1}))
    assert verdict(maps) is True
    maps.call(0, "read", {"key": "a", "value": None}, {"key": "a", "value": 2})
    assert verdict(maps) is False
    # an op that names no key among ops that do is refused, naming it; told, one register it is
    mixed = parse_edn_history(KEYED.replace(':key "b" ', "") % "1", "keyed.edn", check_pairs=True)
    with pytest.raises(ModelMismatch, match=r"^op 2 \(write 2\): it names no key"):
        LinearizableChecker(conventions="edn").check(CheckInput(mixed))
    ops = parse_edn_history(KEYED % "1", "keyed.edn", check_pairs=True)
    assert LinearizableChecker(conventions="edn", independent=False).check(CheckInput(ops)).valid is False


LOCKS = ('{:process 0 :type :invoke :f :acquire %(a)s}\n{:process 0 :type :ok :f :acquire %(a)s}\n'
         '{:process 0 :type :invoke :f :release %(b)s}\n{:process 0 :type :ok :f :release %(b)s}\n'
         '{:process 1 :type :invoke :f :acquire %(a)s}\n{:process 1 :type :ok :f :acquire %(a)s}\n')


@pytest.mark.parametrize(("a", "b", "how"), [(':key "a"', ':key "b"', "per key its ops name beside their value"),
                                             (':value ["a" nil]', ':value ["b" nil]', "per key of jepsen.independent")])
def test_lock_ops_that_name_their_lock_are_one_mutex_per_key(a: str, b: str, how: str) -> None:
    """(regression, 2026-11-29, found crafting lock histories with keys) A mutex's ops were
    judged as one mutex whatever lock they named: acquire a, release b, acquire a was VALID
    (lock a held twice), and two clients holding locks a and b at once INVALID."""
    def check(text: str, **options: object) -> CheckerResult:
        ops = parse_edn_history(text, "locks.edn", check_pairs=True)
        return LinearizableChecker(conventions="edn", **options).check(CheckInput(ops))  # type: ignore[arg-type]

    result = check(LOCKS % {"a": a, "b": b})
    assert result.valid is False and how in result.stats["interpretation"]
    apart = "".join(line for line in (LOCKS % {"a": a, "b": b}).splitlines(keepends=True) if "process 1" not in line)
    assert check(apart.replace(":release", ":acquire")).valid is True  # two locks, each held once
    assert check(apart.replace(":release", ":acquire"), independent=False).valid is False  # told: one mutex


def test_explicit_independent_ops_must_be_pairs() -> None:
    with pytest.raises(ModelMismatch, match=r"op 0 \(read nil\): an independent op's value is \[key value\]"):
        verdict(sequential(("read", None, 3)), independent=True)


def test_multi_register_in_jsonl_starts_at_nil_like_the_register() -> None:
    h = History()
    h.call(0, "txn", [["read", "x", None]], [["read", "x", 0]])
    assert verdict(h, model="multi-register") is False
    assert verdict(h, model="multi-register", conventions="edn") is True
    assert verdict(h, model="multi-register", initial={Keyword("x"): 0, 1: 0}) is False  # :x is not "x"
    assert verdict(h, model="multi-register", initial={"x": 0, 1: 0}) is True


def test_calls_that_do_not_fit_together_name_the_op() -> None:
    h = sequential(("put", ["k", 5], None), ("append", ["k", "x"], None))
    with pytest.raises(ModelMismatch, match=r"op 0 \(put \[\"k\" 5\]\): 5 is put in a key that is appended to"):
        verdict(h, model="kv")
    with pytest.raises(ModelMismatch, match="a register's key is a name"):
        verdict(History(), model="multi-register", initial={(1, 2): 0})


def test_a_history_with_only_fault_ops_is_vacuously_linearizable_and_says_so() -> None:
    # As Knossos judges it (knossos/cas-register/good/mongodb-v0-ack-rollback-.edn is such a history).
    from floodmark.checkers.api import CheckInput
    from floodmark.checkers.linearizability.checker import LinearizableChecker
    from floodmark.contracts.history import Op

    faults = [Op(0, 0, "invoke", "nemesis", "start", None), Op(1, 1, "info", "nemesis", "start", None)]
    result = LinearizableChecker(model="register").check(CheckInput(faults))
    assert result.valid is True and "no client op" in result.stats["note"]


def test_a_floodmark_run_that_recorded_no_client_op_tested_nothing() -> None:
    # The audit's F01: a log-lin run whose history.jsonl was emptied was judged valid. A run
    # (it states a configuration) always has clients; a foreign history keeps Knossos's reading.
    from floodmark.checkers.linearizability.checker import LinearizableChecker
    from floodmark.contracts.history import Op

    config = TestConfig(workload="log-lin")
    for history in ([], [Op(0, 0, "invoke", "nemesis", "start", None), Op(1, 1, "info", "nemesis", "start", None)]):
        result = LinearizableChecker(model="log").check(CheckInput(history, config=config))
        assert result.valid == "unknown" and "no client op" in result.stats["unjudged_because"]


def test_an_initial_value_given_to_a_model_without_one_is_said_to_be_ignored() -> None:
    h = History()
    h.call(0, "acquire", None)
    given = LinearizableChecker(model="mutex", initial=0).check(CheckInput(h.ops))
    assert given.valid is True
    assert given.stats["interpretation"] == "mutex; an initial value does not apply, a mutex starts free"
    assert LinearizableChecker(model="mutex").check(CheckInput(h.ops)).stats["interpretation"] == "mutex"
    log = Interpretation("log", independent=False, detected=False, options={"initial": 0})
    assert log.describe() == "log; an initial value does not apply, a log starts empty"


@pytest.mark.parametrize(("model", "calls"), [
    ("kv", [("put", {"key": "x", "value": None}, None), ("get", {"key": "x", "value": None}, {"key": "x", "vaule": "z"})]),
    ("kv", [("put", {"key": "x"}, None)]),
    ("log", [("read", {"topic": "t0", "partition": 0, "offset": 5}, {"topic": "t0", "partition": 0, "offset": 5,
                                                                       "vaule": "z"})]),
])
def test_a_value_map_or_a_read_without_its_value_does_not_fit(model: str, calls: list[tuple[str, object, object]]) -> None:
    """(regression, 2026-11-28) An absent value is not nil, in any format: a get completed as
    ``{"key": "x", "vaule": "z"}`` was a get of nil (after a put of nil: VALID), and a log read
    completed without its value a read of nothing (VALID past the log's end). The JSONL reader
    refuses them with their line; a history read otherwise (EDN, the Python API) names the op."""
    with pytest.raises(ModelMismatch, match=r"^op [02] \(.*(has no value|holds the value read)"):
        verdict(sequential(*calls), model=model)
