"""Later Jepsen's ``jepsen.log`` layout (``time{GMT} LEVEL [thread] logger: message``).

Its op lines are the 2014 log's op messages behind another header; the same rule holds: no
op is ever skipped, so a damaged op line, or a line whose header was cut short, is refused.
"""

from __future__ import annotations

import contextlib
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from line_damage import damaged

from floodmark.checkers.registry import judge_history
from floodmark.contracts.history import HistoryError
from floodmark.formats.detect import format_of, load_history
from floodmark.formats.jepsen_text import later_layout, parse_text_history, parse_text_log

STAMP = "2021-02-26 23:39:01,300{GMT}"
OPS = [(0, "invoke", "write", "1"), (0, "ok", "write", "1"), (1, "invoke", "read", "nil"), (1, "ok", "read", "2"),
       (":nemesis", "info", "start", '{"n1" :disconnected}'), (2, "invoke", "cas", "[1 4]"),
       (2, "fail", "cas", "[1 4]\t[:not-found]")]
CHATTER = [
    f"{STAMP}\tINFO\t[jepsen test runner] jepsen.core: Running test",
    f"{STAMP}\tINFO\t[n1 stderr] maelstrom.process: Got: Please echo 125",
    f"{STAMP}\tWARN\t[jepsen worker 0] jepsen.generator.interpreter: Process 0 crashed",
    "java.net.SocketTimeoutException: Read timed out",
    "\tat clojure.core$eval.invoke(core.clj:2927)",
    "{:valid? false, :op {:process 1, :type :ok, :f :read, :value 2}}",
    "",
]


def line(process: object, op_type: str, f: str, value: str) -> str:
    thread = "nemesis" if process == ":nemesis" else process
    return f"{STAMP}\tINFO\t[jepsen worker {thread}] jepsen.util: {process}\t:{op_type}\t:{f}\t{value}"


def read(lines: list[str]) -> list[tuple[object, ...]]:
    return [(op.process, op.type, op.f, op.value, op.error) for op in parse_text_history("\n".join(lines) + "\n")]


EXPECTED = [(0, "invoke", "write", 1, None), (0, "ok", "write", 1, None), (1, "invoke", "read", None, None),
            (1, "ok", "read", 2, None), ("nemesis", "info", "start", {"n1": "disconnected"}, None),
            (2, "invoke", "cas", [1, 4], None), (2, "fail", "cas", [1, 4], "[:not-found]")]


def test_the_ops_are_read_and_the_chatter_skipped() -> None:
    lines = [CHATTER[i % len(CHATTER)] + "\n" + line(*op) for i, op in enumerate(OPS)]
    assert read(lines) == EXPECTED


def test_it_is_told_apart_from_the_2014_layout_and_judged_by_later_jepsens_conventions(tmp_path) -> None:
    # A read of nil tells nothing (Knossos's cas-register, which Jepsen's tests use); in a
    # 2014 etcd log it read the absent register, after a write of 1: not linearizable.
    ops = [(0, "invoke", "write", "1"), (0, "ok", "write", "1"), (1, "invoke", "read", "nil"), (1, "ok", "read", "nil")]
    later = tmp_path / "jepsen.log"
    later.write_text("\n".join([CHATTER[0], *(line(*op) for op in ops)]) + "\n")
    older = tmp_path / "etcd.log"
    older.write_text("".join(f"INFO  jepsen.util - {p}\t:{t}\t:{f}\t{v}\n" for p, t, f, v in ops))
    assert format_of(later.read_bytes(), str(later)) == "jepsen-log"
    assert format_of(older.read_bytes(), str(older)) == "jepsen-text"
    verdicts = {}
    for path in (later, older):
        loaded = load_history(path)
        judged = judge_history(loaded.ops, checkers=["linearizable"], conventions=loaded.format)
        verdicts[loaded.format] = judged["linearizable"].valid
    assert verdicts == {"jepsen-log": True, "jepsen-text": False}


@pytest.mark.parametrize(("damaged", "problem"), [
    (f"{STAMP}\tINFO\t[jepsen worker 1] jepsen.ut", "cut short or damaged before its message"),
    (f"{STAMP}\tINFO\t[jepsen wor", "cut short or damaged before its message"),
    (f"{STAMP}\tINF", "cut short or damaged before its message"),
    (f"{STAMP}\tINFO\t[jepsen worker 1] jepsen.uti1: 1\t:ok\t:read\t2", "a damaged jepsen.util"),
    (f"{STAMP}\tNFO\t[jepsen worker 1] jepsen.util: 1\t:ok\t:read\t2", "level is damaged or missing"),
    (f"{STAMP}\tWARN\t[jepsen worker 1] jepsen.util: 1\t:ok\t:read\t2", "an op that is not on an op line"),
])
def test_a_damaged_op_line_is_refused_with_its_line(damaged: str, problem: str) -> None:
    with pytest.raises(HistoryError, match=problem) as refused:
        parse_text_history("\n".join([CHATTER[0], line(*OPS[0]), damaged, line(*OPS[1])]) + "\n", "j.log")
    assert refused.value.line == 3


def test_a_last_op_line_without_its_line_break_is_refused() -> None:
    with pytest.raises(HistoryError, match="j.log:2: the last op line has no line break"):
        parse_text_history("\n".join([line(*OPS[0]), line(*OPS[1])]), "j.log")


@settings(max_examples=300)
@given(st.integers(0, len(OPS) - 1), st.data())
def test_one_damaged_character_before_an_ops_value_never_hides_the_op(which: int, data: st.DataObject) -> None:
    # Property: a character deleted, replaced or inserted anywhere in an op line's header,
    # process, type or f, or the line cut there, either is refused or still reads as an op.
    lines = [line(*op) for op in OPS]
    text = lines[which]
    lines[which] = damaged(data, text, len(text) - len(OPS[which][3]), "\t \n:-.0x\x00I[]{")
    try:
        ops = parse_text_history("\n".join(CHATTER[:2] + lines + CHATTER[:2]) + "\n")
    except HistoryError:
        return
    assert len(ops) == len(OPS), lines[which]


@pytest.mark.parametrize(("whole", "at"), [
    ("1\t:ok\t:read\t:xy", -1), ("1\t:ok\t:read\tnil", -1), ("1\t:ok\t:read\ttrue", -2),
    ("1\t:info\t:write\t13\tindeterminate: Read timed out", 16), ("1\t:ok\t:write\tfalse", -2),
])
def test_an_op_line_broken_in_two_is_refused_not_read_with_its_value_cut_short(whole: str, at: int) -> None:
    # A value ending in a symbol's characters still reads when cut (:xy as :x, nil as the
    # symbol ni), and the rest of the line looked like chatter: the read was of a value never
    # written, and a valid history was INVALID.
    broken = f"{STAMP}\tINFO\t[jepsen worker 1] jepsen.util: {whole[:at]}\n{whole[at:]}"
    with pytest.raises(HistoryError, match="j.log:3: the rest of the op line 2") as refused:
        parse_text_history("\n".join([CHATTER[0], broken, line(*OPS[0])]) + "\n", "j.log")
    assert "\n" not in str(refused.value)


def test_a_line_break_in_an_ops_error_and_lines_no_value_continues_after_an_op_are_read() -> None:
    text = "\n".join([line(2, "fail", "cas", "[1 4]\tdb said:\nno such key"), line(*OPS[0]), "", "  ",
                      line(*OPS[1]), "\tat clojure.core$eval.invoke(core.clj:2927)", line(*OPS[2]), "[...]",
                      line(*OPS[3])]) + "\n"
    assert [(op.type, op.value, op.error) for op in parse_text_history(text)] == [
        ("fail", [1, 4], "db said:"), ("invoke", 1, None), ("ok", 1, None), ("invoke", None, None), ("ok", 2, None)]


def test_a_log_with_op_lines_of_both_layouts_is_refused() -> None:
    # Each layout's ops are judged by its own conventions (a nil read tells nothing in one,
    # reads the absent register in the other): a log mixing them, which no Jepsen writes, was
    # judged whole by the later one's.
    older = "INFO  jepsen.util - 1\t:ok\t:read\tnil"
    with pytest.raises(HistoryError, match="j.log:4: an op line of the 2014 layout.*on line 2: two logs in one"):
        parse_text_history("\n".join([CHATTER[0], line(*OPS[2]), CHATTER[0], older]) + "\n", "j.log")


@pytest.mark.parametrize("chatter", ["x [ " * 25_000 + "jepsen.util: x", "INFO [ " * 25_000 + "jepsen.util"])
def test_a_long_line_of_brackets_is_read_in_linear_time(chatter: str) -> None:
    # A thread in brackets was matched from every ' [' of a line to its end: this line of
    # 100 kB took seconds, one of a few MB hours.
    text = "\n".join([line(*OPS[0]), f"{STAMP}\tINFO\t[jepsen worker 1] jepsen.core: {chatter}", line(*OPS[1])])
    started = time.perf_counter()
    with contextlib.suppress(HistoryError):
        parse_text_log((text + "\n").encode(), "j.log")
    assert later_layout(text.encode())
    assert time.perf_counter() - started < 0.5


BREAKABLE = [*OPS, (3, "invoke", "write", ":xy"), (3, "ok", "write", ":xy"), (4, "invoke", "read", "nil"),
             (4, "ok", "read", "true"), (5, "info", "write", "-12\tindeterminate: timed out")]


@settings(max_examples=300)
@given(st.integers(0, len(BREAKABLE) - 1), st.data())
def test_an_op_line_broken_in_two_anywhere_is_refused_or_read_as_written(which: int, data: st.DataObject) -> None:
    # Property: a line break put anywhere in an op line either is refused or leaves every
    # op's process, type, f and value as written (a broken error is the error cut short).
    lines = [line(*op) for op in BREAKABLE]
    at = data.draw(st.integers(1, len(lines[which]) - 1))
    lines[which] = lines[which][:at] + "\n" + lines[which][at:]
    try:
        ops = parse_text_history("\n".join([CHATTER[0], *lines]) + "\n")
    except HistoryError:
        return
    expected = parse_text_history("\n".join(line(*op) for op in BREAKABLE) + "\n")
    assert [(op.process, op.type, op.f, op.value) for op in ops] == [
        (op.process, op.type, op.f, op.value) for op in expected], lines[which]


@pytest.mark.parametrize("text", ["Waiting for port 2379 ...", "Waiting for jepsen.control.util$fn__1@2a...",
                                  "{:nodes [\"n1\" \"n2\"],", "[{:process 0, :type :ok, :f :read, :value 1}]"])
def test_jepsen_utils_own_text_at_info_is_chatter(text: str) -> None:
    # Later Jepsen's await-fn and spy log at INFO through jepsen.util: a real jepsen.log of a
    # test that waits for its database was refused whole ('not process :type :f value').
    own = f"{STAMP}\tINFO\t[jepsen node n1] jepsen.util: {text}"
    assert read([line(*OPS[0]), own, " :nodes-ready true}", line(*OPS[1])]) == EXPECTED[:2]
    assert len(parse_text_history(f"INFO  jepsen.util - {text}\nINFO  jepsen.util - 0\t:invoke\t:read\tnil\n")) == 1


@pytest.mark.parametrize("damaged", ["x\t:ok\t:write\t1", "nemesis\t:info\t:start\tnil", "\t:ok\t:write\t1",
                                     "1\tok\t:write\t1", "W1\t:ok\t:write\t1"])
def test_an_op_message_damaged_is_refused_not_taken_for_jepsen_utils_own_text(damaged: str) -> None:
    with pytest.raises(HistoryError, match="j.log:2:"):
        parse_text_history("\n".join([line(*OPS[0]), f"{STAMP}\tINFO\t[jepsen worker 1] jepsen.util: {damaged}",
                                      line(*OPS[1])]) + "\n", "j.log")


def test_jepsen_utils_own_text_in_the_later_layout_does_not_make_a_2014_log_a_later_one(tmp_path) -> None:
    # The format decides the conventions (a 2014 log's nil read is the absent register's):
    # a line of text is no op, so it must not decide them either.
    log = tmp_path / "etcd.log"
    log.write_text(f"{STAMP}\tINFO\t[jepsen node n1] jepsen.util: Waiting for port 2379 ...\n"
                   "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:ok\t:read\tnil\n")
    assert format_of(log.read_bytes(), str(log)) == "jepsen-text"
    assert load_history(log).format == "jepsen-text"


def test_a_fail_that_timed_out_stays_a_failure_unlike_in_a_2014_log() -> None:
    # 2014's etcd client logged a timeout as ':fail ... :timed-out' (an unknown outcome);
    # later Jepsen's checkers take any :fail as definite, so a failed write of 2 cannot
    # explain a read of 2: taken as unknown, the read's anomaly was hidden.
    ops = [(0, "invoke", "write", "2"), (0, "fail", "write", ":timed-out"), (1, "invoke", "read", "nil"),
           (1, "ok", "read", "2")]
    later = parse_text_history("\n".join(line(*op) for op in ops) + "\n")
    older = parse_text_history("".join(f"INFO  jepsen.util - {p}\t:{t}\t:{f}\t{v}\n" for p, t, f, v in ops))
    assert [(op.type, op.value, op.error) for op in later[1:2]] == [("fail", None, "timed-out")]
    assert [(op.type, op.value, op.error) for op in older[1:2]] == [("info", None, "timed-out")]
    judged = judge_history(later, checkers=["linearizable"], conventions="jepsen-log")
    assert judged["linearizable"].valid is False
    assert judge_history(older, checkers=["linearizable"], conventions="jepsen-text")["linearizable"].valid is True
