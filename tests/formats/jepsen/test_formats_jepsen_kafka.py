"""Jepsen kafka histories: read as queue ops and judged by the queue checker as Jepsen would.

Hand-written histories go through the command line (exit codes 0 valid, 1 invalid, 2
unknown, 254 bad input); the translation's choices (positions per key, assigns, subscribes,
final rounds as drains) are tested one by one; and random histories of a simulated log
(``jepsen_kafka_histories``) must get the verdict an independent brute-force version of
Jepsen's analysis gives them.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jepsen_kafka_histories import jepsen_errors, read_then_missing, simulate

from floodmark.checkers import queue_index
from floodmark.checkers.api import CheckInput
from floodmark.checkers.queue import QueueChecker
from floodmark.contracts.history import HistoryError
from floodmark.errors import EXIT_BAD_ARGUMENTS, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID
from floodmark.formats.detect import load_history
from floodmark.formats.jepsen_edn import parse_edn_history
from floodmark.formats.jepsen_kafka import is_jepsen_kafka, translate

REPO = Path(__file__).resolve().parents[3]


def floodmark(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "floodmark", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def edn(*ops: str) -> str:
    """Ops written briefly, ``P TYPE F VALUE [more fields]``, as Jepsen's op maps."""
    lines = []
    for op in ops:
        process, type_, f, rest = op.split(" ", 3)
        value, _, more = rest.partition(" :")
        lines.append(f"{{:process {process}, :type :{type_}, :f :{f}, :value {value}"
                     + (f", :{more}" if more else "") + "}")
    return "\n".join(lines) + "\n"


def send(process: int, key: int, value: int, offset: int | None, outcome: str = "ok") -> list[str]:
    said = f"[[:send {key} [{offset} {value}]]]" if offset is not None else f"[[:send {key} {value}]]"
    return [f"{process} invoke send [[:send {key} {value}]]", f"{process} {outcome} send {said}"]


def poll(process: int, read: str, outcome: str = "ok") -> list[str]:
    return [f"{process} invoke poll [[:poll]]", f"{process} {outcome} poll [[:poll {read}]]"]


def assign(process: int, keys: str, *, seek: bool = False) -> list[str]:
    more = " :seek-to-beginning? true" if seek else ""
    return [f"{process} invoke assign {keys}{more}", f"{process} ok assign {keys}{more}"]


def final_round(process: int, keys: str, *reads: str) -> list[str]:
    """Jepsen's final polls: a crash, a fresh client assigned every key from the beginning."""
    ops = [f"{process} invoke crash nil", f"{process} info crash nil",
           f"{process + 10} invoke debug-topic-partitions {keys}", f"{process + 10} ok debug-topic-partitions {{}}",
           *assign(process + 10, keys, seek=True)]
    for read in reads:
        ops += poll(process + 10, read)
    return ops


# Two keys; process 1 sends, process 0 polls, process 10 (after 0's crash) reads everything again.
WRITES = [*send(1, 1, 10, 0), *send(1, 1, 11, 1), *send(1, 2, 20, 0)]
VALID = edn(*assign(0, "[1 2]"), *WRITES, *poll(0, "{1 [[0 10] [1 11]] 2 [[0 20]]}"),
            *final_round(0, "[1 2]", "{1 [[0 10]] 2 [[0 20]]}", "{1 [[1 11]]}"))
HANDWRITTEN = {
    "valid": (VALID, EXIT_VALID, "VALID", []),
    # 10 was acknowledged at offset 0, and nobody read it, though every read passed over it
    "lost-write": (edn(*assign(0, "[1 2]"), *WRITES, *poll(0, "{1 [[1 11]] 2 [[0 20]]}"),
                       *final_round(0, "[1 2]", "{1 [[1 11]] 2 [[0 20]]}")),
                   EXIT_INVALID, "INVALID", ["lost-write"]),
    # process 0 read 10 at offset 0, and the final round, seeking to the beginning, starts at
    # offset 1: Jepsen reports nothing (10 was read once; the round's first read is compared
    # with no earlier one), floodmark a lost write, since the log no longer holds a record read
    "read-then-missing": (edn(*assign(0, "[1 2]"), *WRITES, *poll(0, "{1 [[0 10] [1 11]] 2 [[0 20]]}"),
                              *final_round(0, "[1 2]", "{1 [[1 11]] 2 [[0 20]]}")),
                          EXIT_INVALID, "INVALID", ["lost-write"]),
    # the final round reads 11 where 10 was acknowledged
    "inconsistent-offsets": (edn(*assign(0, "[1 2]"), *WRITES, *poll(0, "{1 [[0 10] [1 11]] 2 [[0 20]]}"),
                                 *final_round(0, "[1 2]", "{1 [[0 11]] 2 [[0 20]]}", "{1 [[1 11]]}")),
                             EXIT_INVALID, "INVALID", ["inconsistent-offsets", "duplicate"]),
    # 10 at offsets 0 and 2
    "duplicate": (edn(*assign(0, "[1 2]"), *WRITES, *poll(0, "{1 [[0 10] [1 11] [2 10]] 2 [[0 20]]}"),
                      *final_round(0, "[1 2]", "{1 [[0 10] [1 11] [2 10]] 2 [[0 20]]}")),
                  EXIT_INVALID, "INVALID", ["duplicate"]),
    # process 0 reads offset 0, then offset 2: 11 at offset 1 was skipped
    "poll-skip": (edn(*assign(0, "[1 2]"), *WRITES, *send(1, 1, 12, 2), *poll(0, "{1 [[0 10]]}"),
                      *poll(0, "{1 [[2 12]] 2 [[0 20]]}"),
                      *final_round(0, "[1 2]", "{1 [[0 10] [1 11] [2 12]] 2 [[0 20]]}")),
                  EXIT_INVALID, "INVALID", ["poll-skip"]),
    # process 0's poll of 10 completed before 10's send began (Jepsen's cycle search: G1c-realtime)
    "read-the-future": (edn(*assign(0, "[1]"), *poll(0, "{1 [[0 10]]}"), *send(1, 1, 10, 0),
                            *final_round(0, "[1]", "{1 [[0 10]]}")),
                        EXIT_INVALID, "INVALID", ["G1c-realtime"]),
    # one op sends to two keys at once: Jepsen's transactions, whose anomalies floodmark does not check
    "transactional": (edn("1 invoke send [[:send 1 10] [:send 2 20]]", "1 ok send [[:send 1 [0 10]] [:send 2 [0 20]]]",
                          *poll(0, "{1 [[0 10]] 2 [[0 20]]}"),
                          *final_round(0, "[1 2]", "{1 [[0 10]] 2 [[0 20]]}")),
                      EXIT_UNKNOWN, "UNKNOWN", []),
    "transactional-invalid": (edn("1 invoke txn [[:send 1 10] [:poll]]", "1 ok txn [[:send 1 [0 10]] [:poll {}]]",
                                  *send(1, 1, 11, 1), *poll(0, "{1 [[0 10] [0 11]]}")),
                              EXIT_INVALID, "INVALID", ["duplicate", "inconsistent-offsets", "nonmonotonic-poll"]),
}


@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
def test_a_handwritten_history_gets_jepsens_verdict(name: str, tmp_path: Path) -> None:
    text, code, word, anomalies = HANDWRITTEN[name]
    history = tmp_path / "history.edn"
    history.write_text(text)
    done = floodmark("check", str(history))
    assert done.returncode == code, done.stdout + done.stderr
    line = done.stdout.splitlines()[0]
    assert line.startswith(f"{word:8} {history}  queue {word.lower()}"), line
    assert "[Jepsen kafka history: key K is partition key/K]" in line
    counts = QueueChecker().check(CheckInput(load_history(history).ops)).stats["anomalies"]
    assert sorted(counts) == sorted(anomalies)
    if name == "transactional":
        assert "transaction" in line and "G1c" in line


@pytest.mark.parametrize(("ops", "problem"), [
    ([*poll(0, "[1 [[0 10]]]")], "micro-op [:poll [1 [[0 10]]]] is no [:poll {key [[offset value] ...]}]"),
    (["1 invoke send [[:send :k 10]]"], "key :k is not an integer from 0 (each key is a topic-partition)"),
    (["1 invoke send [[:send -1 10]]"], "key -1 is not an integer from 0"),
    (["1 invoke send [[:send 1 10]]", "1 ok send {:offset 0}"],
     "a Jepsen kafka :send's value is a vector of micro-ops ([:send key value], [:poll]), got {:offset 0}"),
    (["1 invoke send [[:send 1 10]]", "1 ok send [[:poll {}]]"],
     "the :send completion's micro-ops ([[:poll {}]]) are not its invocation's (:send)"),
    (["1 invoke send [[:send 1]]"], "micro-op [:send 1] is no [:send key value]"),
    (["1 invoke send [[:read 1 1]]"], "micro-op [:read 1 1] of a :send is neither [:send key value] nor [:poll]"),
    (["0 invoke poll [[:poll]]", "0 ok poll [[:poll {:a [[0 1]]}]]"], "key :a is not an integer from 0"),
    (["0 invoke poll [[:poll]]", "0 ok poll nil"], "got nil"),
    (["0 invoke poll [[:poll {}]]"], "micro-op [:poll {}] is no [:poll]"),
    (["0 invoke assign {1 2}"], "an :assign's value is a vector of keys, got {1 2}"),
])
def test_a_malformed_op_is_refused_naming_file_and_line(ops: list[str], problem: str, tmp_path: Path) -> None:
    """The op at fault is the last one (the lines before it are one good send)."""
    history = tmp_path / "history.edn"
    history.write_text(edn(*send(1, 1, 10, 0), *ops))
    done = floodmark("check", str(history))
    assert done.returncode == EXIT_BAD_ARGUMENTS, done.stdout + done.stderr
    error = done.stderr.strip()
    assert error.startswith(f"floodmark check: error: {history}:{2 + len(ops)}: "), error
    assert problem in error and "\n" not in error and "Traceback" not in error


def judged(text: str) -> Any:
    ops: list[int] = []
    parsed = parse_edn_history(text, "h.edn", check_pairs=True, lines=ops)
    queue_index._cache.clear()
    return QueueChecker().check(CheckInput(translate(parsed, "h.edn", ops).ops))


def test_keys_are_partitions_and_anomalies_name_the_jepsen_ops() -> None:
    text = edn(*assign(0, "[3]"), *send(1, 3, 10, 0), *send(1, 3, 11, 1), *poll(0, "{3 [[1 11]]}"),
               *final_round(0, "[3]", "{3 [[1 11]]}"))
    result = judged(text)
    (lost,) = result.anomalies
    assert (lost.type, lost.topic, lost.partition, lost.offsets) == ("lost-write", "key", 3, (0,))
    assert lost.ops == (2, 3)  # the send's invocation and completion, as the file numbers its ops


def test_an_assign_forgets_only_the_keys_it_leaves_out() -> None:
    """Jepsen compares a process's successive reads of a key across an assign that keeps it."""
    writes = [*send(1, 1, 10, 0), *send(1, 1, 11, 1), *send(1, 1, 12, 2), *send(1, 2, 20, 0)]
    then = [*poll(0, "{1 [[2 12]]}"), *final_round(0, "[1 2]", "{1 [[0 10] [1 11] [2 12]] 2 [[0 20]]}")]
    kept = judged(edn(*assign(0, "[1]"), *writes, *poll(0, "{1 [[0 10]]}"), *assign(0, "[1 2]"), *then))
    assert [a.type for a in kept.anomalies] == ["poll-skip"]
    left_out = judged(edn(*assign(0, "[1]"), *writes, *poll(0, "{1 [[0 10]]}"), *assign(0, "[2]"),
                          *assign(0, "[1 2]"), *then))
    assert left_out.valid is True
    failed_between = judged(edn(*assign(0, "[1]"), *writes, *poll(0, "{1 [[0 10]]}"), *poll(0, "{}", "fail"), *then))
    assert [a.type for a in failed_between.anomalies] == ["poll-skip"]  # (a failed poll moved nothing)


def test_a_process_s_sends_to_a_key_are_compared_until_an_assign_leaves_the_key_out() -> None:
    """Jepsen forgets a process's last send to a key as it forgets its last read (an assign
    or subscribe that leaves the key out)."""
    reads = final_round(0, "[1]", "{1 [[3 11] [5 10]]}")
    backwards = judged(edn(*send(1, 1, 10, 5), *send(1, 1, 11, 3), *reads))
    assert [a.type for a in backwards.anomalies] == ["nonmonotonic-send"]
    forgotten = judged(edn(*send(1, 1, 10, 5), *assign(1, "[2]"), *send(1, 1, 11, 3), *reads))
    assert forgotten.valid is True


def test_process_1_and_process_keyword_1_are_two_consumers_and_two_producers() -> None:
    """Process ``:1`` is named "1" once read, and the consumers and producers made of a
    process are named after it: they were once one consumer (a false nonmonotonic-poll) and,
    after an assign, one producer (a false nonmonotonic-send)."""
    final = final_round(0, "[1]", "{1 [[0 10] [1 11] [2 12] [3 13]]}")
    writes = [*send(5, 1, 10, 0), *send(5, 1, 11, 1)]
    reads = judged(edn(*assign(1, "[1]"), *assign(":1", "[1]"), *writes, *poll(1, "{1 [[1 11]]}"),
                       *poll(":1", "{1 [[0 10]]}"), *send(5, 1, 12, 2), *send(5, 1, 13, 3), *final))
    assert reads.valid is True, reads.anomalies
    sends = judged(edn(*send(1, 1, 10, 0), *send(":1", 1, 11, 1), *assign(1, "[2]"), *assign(":1", "[2]"),
                       *send(1, 1, 13, 3), *send(":1", 1, 12, 2), *final))
    assert sends.valid is True, sends.anomalies


def test_with_subscribes_a_consumer_may_skip_between_polls_but_not_within_one() -> None:
    writes = [*send(1, 1, 10, 0), *send(1, 1, 11, 1), *send(1, 1, 12, 2)]
    final = final_round(0, "[1]", "{1 [[0 10] [1 11] [2 12]]}")
    between = judged(edn("0 invoke subscribe [1]", "0 ok subscribe [1]", *writes, *poll(0, "{1 [[0 10]]}"),
                         *poll(0, "{1 [[2 12]]}"), *final))
    assert between.valid is True
    within = judged(edn("0 invoke subscribe [1]", "0 ok subscribe [1]", *writes, *poll(0, "{1 [[0 10] [2 12]]}"),
                        *final))
    assert [a.type for a in within.anomalies] == ["poll-skip"]
    rebalanced = judged(edn("0 invoke subscribe [1]", "0 ok subscribe [1]", *writes,
                            "0 invoke poll [[:poll]]", "0 ok poll [[:poll {1 [[0 10] [2 12]]}]] :rebalance-log [{:keys [1]}]",
                            *final))
    assert rebalanced.valid is True


def test_unread_sends_are_judged_only_where_a_final_round_read_to_the_end() -> None:
    """A round that read a key as far as anyone had seen it is a drain: a send no one read is
    lost. Where the round fell short (a cut history: Jepsen polls until it does not), the
    sends no read passed leave the verdict unknown, where Jepsen says unseen."""
    writes = [*send(1, 1, 10, 0), *send(1, 1, 11, 1)]
    reached = judged(edn(*writes, *final_round(0, "[1]", "{1 [[1 11]]}")))
    assert [a.type for a in reached.anomalies] == ["lost-write"]
    short = judged(edn(*writes, *final_round(0, "[1]", "{1 [[0 10]]}")))
    assert short.valid == "unknown" and "no successful drain" in short.stats["unjudged_because"]
    no_round = judged(edn(*writes, *poll(0, "{1 [[0 10]]}")))
    assert no_round.valid == "unknown"
    without_seek = judged(edn(*writes, *assign(5, "[1]"), *poll(5, "{1 [[1 11]]}")))
    assert without_seek.valid == "unknown"


def test_a_final_round_that_starts_past_a_record_read_before_it_lost_that_record() -> None:
    """The round sought to the beginning of key 1 and read it as far as anyone had seen it,
    but from offset 1: 10, which process 0 read at offset 0 before the round began, is gone.
    Jepsen's lost write is a value below the highest read that *nobody* read, and its poll
    skips compare a process's reads with its own earlier ones, so Jepsen reports nothing
    (``jepsen.tests.kafka``: ``lost-write-cases``, ``poll-skip+nonmonotonic-cases``). No
    retention can have moved the log's start: the history states none, and Jepsen creates its
    topics with the broker's defaults. A record read was committed: floodmark's lost write."""
    writes = [*assign(0, "[1]"), *send(1, 1, 10, 0), *send(1, 1, 11, 1)]
    lost = judged(edn(*writes, *poll(0, "{1 [[0 10] [1 11]]}"), *final_round(0, "[1]", "{1 [[1 11]]}")))
    (anomaly,) = lost.anomalies
    assert (anomaly.type, anomaly.offsets, anomaly.details["how"]) == ("lost-write", (0,), "read-then-missing")
    assert anomaly.ops == (7, 15)  # the poll that read it and the round's last poll, as the file numbers them
    unread = judged(edn(*writes, *poll(0, "{1 [[1 11]]}"), *final_round(0, "[1]", "{1 [[1 11]]}")))
    assert [(a.type, a.details.get("how")) for a in unread.anomalies] == [("lost-write", None)]  # Jepsen's, once
    indefinite = judged(edn(*assign(0, "[1]"), "1 invoke send [[:send 1 10]]", "1 info send [[:send 1 10]]",
                            *send(2, 1, 11, 1), *poll(0, "{1 [[0 10] [1 11]]}"),
                            *final_round(0, "[1]", "{1 [[1 11]]}")))
    assert [a.type for a in indefinite.anomalies] == ["lost-write"]  # (read, so committed, timed out or not)
    kept = judged(edn(*writes, *poll(0, "{1 [[0 10] [1 11]]}"), *final_round(0, "[1]", "{1 [[0 10]]}", "{1 [[1 11]]}")))
    assert kept.valid is True


@pytest.mark.parametrize(("ops", "final", "said"), [
    (["0 invoke poll [[:poll]]", "0 fail poll [[:poll {1 [[0 10]]}]]"], "{1 [[0 10]]}", "a fail :poll, returned records"),
    (["1 invoke send [[:send 1 11]]", "1 info send [[:send 1 [1 11]]]"], "{1 [[0 10] [1 11]]}",
     "states the offset of a send"),
    (["1 invoke txn [[:send 1 11]]", "1 ok txn [[:send 1 [1 11]]]"], "{1 [[0 10] [1 11]]}",
     "is a transaction (1 micro-ops, :txn)"),
    (["2 invoke send [[:send 1 11] [:send 1 12]]"], "{1 [[0 10]]}", "op 2 is a transaction (2 micro-ops)"),
])
def test_what_floodmark_does_not_judge_keeps_the_verdict_from_valid(ops: list[str], final: str, said: str,
                                                                      tmp_path: Path) -> None:
    history = tmp_path / "history.edn"
    history.write_text(edn(*send(1, 1, 10, 0), *ops, *final_round(0, "[1]", final)))
    loaded = load_history(history)
    assert len(loaded.unjudged) == 1 and said in loaded.unjudged[0]
    done = floodmark("check", str(history))
    assert done.returncode == EXIT_UNKNOWN, done.stdout + done.stderr
    assert said in done.stdout
    if ":txn" in said:  # unknown for another reason as well (11 unread): both are said
        history.write_text(history.read_text().replace(final, "{1 [[0 10]]}"))
        done = floodmark("check", str(history))
        assert done.returncode == EXIT_UNKNOWN and said in done.stdout and "no successful drain" in done.stdout


def test_an_op_of_no_kafka_kind_is_named_and_leaves_the_verdict_unknown(tmp_path: Path) -> None:
    history = tmp_path / "history.edn"
    history.write_text(edn(*send(1, 1, 10, 0), "2 invoke frobnicate 1", "2 ok frobnicate 1",
                           *final_round(0, "[1]", "{1 [[0 10]]}")))
    done = floodmark("check", str(history))
    assert done.returncode == EXIT_UNKNOWN
    assert "malformed op 2: op 'frobnicate' is no op of a queue or log workload" in done.stdout


def test_to_edn_writes_the_history_as_the_file_holds_it_and_model_is_refused(tmp_path: Path) -> None:
    history = tmp_path / "history.edn"
    history.write_text(VALID)
    out = tmp_path / "out.edn"
    done = floodmark("check", "--to-edn", str(out), str(history))
    assert done.returncode == EXIT_VALID, done.stderr
    assert parse_edn_history(out.read_text()) == parse_edn_history(VALID)
    refused = floodmark("check", "--model", "register", str(history))
    assert refused.returncode == EXIT_BAD_ARGUMENTS
    assert "a Jepsen kafka history, judged by queue, stats, none of which takes a model" in refused.stderr


def test_only_micro_op_histories_are_jepsen_kafka() -> None:
    ours = '{:process 0 :type :invoke :f :send :value {:topic "t" :partition 0 :value 1}}\n'
    assert not is_jepsen_kafka(parse_edn_history(ours))
    assert not is_jepsen_kafka(parse_edn_history('{:process 0 :type :invoke :f :send :value [["send" 1 2]]}'))
    assert is_jepsen_kafka(parse_edn_history(VALID))
    with pytest.raises(HistoryError, match=r"^h\.edn:3: a Jepsen kafka :send's value is a vector of micro-ops"):
        translate(parse_edn_history(edn(*send(1, 1, 10, 0), "2 invoke send 5")), "h.edn", [1, 2, 3])


def _judged_history(data: bytes, tmp_path: Path) -> Any:
    history = tmp_path / "history.edn"
    history.write_bytes(data)
    queue_index._cache.clear()
    return QueueChecker().check(CheckInput(load_history(history).ops))


@given(rnd=st.randoms(use_true_random=False))
@settings(max_examples=int(os.environ.get("FLOODMARK_KAFKA_EXAMPLES", "150")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_a_simulated_history_gets_the_verdict_of_jepsens_analysis(rnd: random.Random, tmp_path: Path) -> None:
    """Property: a history of the simulated log, broken or not, is INVALID with the anomaly
    types Jepsen's analysis (done by brute force over the Jepsen ops) reports, VALID where it
    reports none. Three differences, by design: a value at two offsets makes Jepsen's order of
    a key ambiguous (a write it calls unseen floodmark may call lost), a write no read
    passed (Jepsen: unseen) is unknown to floodmark, and a record read before a final round
    that the round no longer returns below its first record is a lost write to floodmark
    (Jepsen reports nothing: :func:`~jepsen_kafka_histories.read_then_missing`)."""
    simulated = simulate(rnd)
    result = _judged_history(simulated.edn(), tmp_path)
    want = jepsen_errors(simulated.ops) | ({"lost-write"} if read_then_missing(simulated.ops) else set())
    got = {a.type for a in result.anomalies}
    if not any(op["f"] in (":send", ":poll") for op in simulated.ops):
        assert result.valid == "unknown"  # (nothing sent or read: nothing tested)
        return
    want_known, got_known = want - {"unseen"}, got - {"unseen"}
    if "duplicate" in want:
        want_known, got_known = want_known - {"lost-write"}, got_known - {"lost-write"}
    if not want:
        assert result.valid is True, (simulated.mutations, result.anomalies, result.stats)
    elif not want - {"unseen"}:
        assert result.valid is not True, simulated.mutations
    else:
        assert result.valid is False and got_known == want_known, (simulated.mutations, want, got)


_GARBAGE = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([":send", ":poll", ":k", '"s"', "1.5", "2N"]),
    lambda inner: st.lists(inner, max_size=4).map(lambda xs: "[" + " ".join(map(str, xs)) + "]")
    | st.lists(st.tuples(inner, inner), max_size=3).map(lambda kv: "{" + ", ".join(f"{k} {v}" for k, v in kv) + "}"),
    max_leaves=12).map(lambda v: "nil" if v is None else str(v).lower() if isinstance(v, bool) else str(v))


@given(slots=st.lists(_GARBAGE, min_size=6, max_size=6), f=st.sampled_from(["send", "poll", "txn", "assign"]),
       outcome=st.sampled_from(["ok", "fail", "info"]))
@settings(max_examples=int(os.environ.get("FLOODMARK_KAFKA_EXAMPLES", "150")), deadline=None, database=None)
def test_garbage_in_a_kafka_history_is_refused_in_one_line_or_judged_without_a_crash(
        slots: list[str], f: str, outcome: str) -> None:
    """Property: any value where micro-ops, keys, offsets or records go is refused with its
    line (HistoryError) or judged, never with a traceback or a checker's crash."""
    a, b, c, d, e, g = slots
    text = edn(*send(1, 1, 10, 0), f"2 invoke {f} [[:send {a} {b}]]", f"2 {outcome} {f} [[:send {a} [{c} {b}]]]",
               "3 invoke poll [[:poll]]", f"3 {outcome} poll [[:poll {{1 [[0 10] [{d} {e}]]}}]]",
               f"4 invoke assign {g}", f"4 ok assign {g}")
    try:
        result = judged(text)
    except HistoryError as error:
        assert "\n" not in str(error) and str(error).startswith("h.edn:")
        return
    assert "error" not in result.stats, result.stats
