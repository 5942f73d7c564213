"""Jepsen 2014 text logs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from line_damage import damaged

from floodmark.contracts.history import HistoryError
from floodmark.formats.jepsen_text import parse_text_history, parse_text_log

LOG = """2014-05-01 setting up
INFO  jepsen.util - 3\t:invoke\t:cas\t[1 4]
INFO  jepsen.util - 3\t:fail\t:cas\t[1 4]
some stack trace line
INFO  jepsen.util - 2\t:invoke\t:read\tnil
INFO  jepsen.util - 2\t:fail\t:read\t:timed-out
INFO  jepsen.util - 4\t:invoke\t:write\t2
INFO  jepsen.util - 4\t:info\t:write\t:timed-out
INFO  jepsen.util - :nemesis\t:info\t:start\tnil
"""


def test_only_history_lines_are_read() -> None:
    ops = parse_text_history(LOG)
    assert len(ops) == 7
    assert ops[0].process == 3 and ops[0].f == "cas" and ops[0].value == [1, 4]
    assert ops[1].type == "fail" and ops[1].value == [1, 4]
    assert ops[-1].process == "nemesis"


def test_timeouts_are_unknown_outcomes_not_failures() -> None:
    ops = parse_text_history(LOG)
    assert ops[3].type == "info" and ops[3].error == "timed-out" and ops[3].value is None
    assert ops[5].type == "info" and ops[5].value is None


def test_malformed_line_is_reported_with_its_number() -> None:
    with pytest.raises(HistoryError) as caught:
        parse_text_history("ok\nINFO  jepsen.util - 3\t:invoke\t:cas\t[1 4\n", "e.log")
    assert caught.value.line == 2 and "never closed" in caught.value.problem
    with pytest.raises(HistoryError, match="e.log:1: unknown op type"):
        parse_text_history("INFO  jepsen.util - 3\t:started\t:cas\t[1 4]", "e.log")


# ------------------------------------------------------ which lines are ops (A4 of the audit)

OPS = [(0, "invoke", "write", "1"), (0, "ok", "write", "1"), (1, "invoke", "read", "nil"), (1, "ok", "read", "2"),
       (":nemesis", "info", "start", '"cut off n1"'), (2, "invoke", "cas", "[1 4]"), (2, "info", "cas", ":timed-out")]
CHATTER = [
    "INFO  jepsen.core - Worker 0 starting",
    "INFO  jepsen.os.debian - n1 installing [git-core curl]",
    "WARN  jepsen.util - retrying after a timeout",  # jepsen.util's free text at another level
    "ERROR jepsen.core - Error in worker 3",
    "java.net.SocketTimeoutException: Read timed out",
    "\tat clojure.core$eval.invoke(core.clj:2927)",
    "{:valid? false, :op {:process 1, :type :ok, :f :read, :value 2}}",  # Clojure prints maps with commas
    " :type :ok, :f :read",
    "Ran 1 tests containing 1 assertions.",
    "",
]


def canonical(process: object, op_type: str, f: str, value: str) -> str:
    return f"INFO  jepsen.util - {process}\t:{op_type}\t:{f}\t{value}"


def read(lines: list[str]) -> list[tuple[object, ...]]:
    return [(op.process, op.type, op.f, op.value, op.error) for op in parse_text_history("\n".join(lines) + "\n")]


EXPECTED = read([canonical(*op) for op in OPS])


@st.composite
def spaced(draw: st.DrawFn, process: object, op_type: str, f: str, value: str) -> str:
    """An op line as some Jepsen version, terminal or editor may have spaced it."""
    blanks = st.text(alphabet=" \t", min_size=1, max_size=3)
    prefix = draw(st.sampled_from(["", "2014-05-01 12:00:01,123 ", "  "]))
    after_dash = draw(st.text(alphabet=" \t", max_size=3))
    fields = [str(process), f":{op_type}", f":{f}", value]
    middle = "".join(field + draw(blanks) for field in fields[:-1]) + fields[-1]
    end = draw(st.sampled_from(["", " ", "\t", "\r", " \r"]))
    return f"{prefix}INFO{draw(blanks)}jepsen.util{draw(blanks)}-{after_dash}{middle}{end}"


@given(st.data())
def test_an_op_line_spaced_any_way_reads_as_the_original(data: st.DataObject) -> None:
    lines = []
    for op in OPS:
        lines.append(data.draw(st.sampled_from(CHATTER)))
        lines.append(data.draw(spaced(*op)))
    assert read(lines) == EXPECTED


@pytest.mark.parametrize("line", [
    "INFO  jepsen.util -\t1\t:ok\t:read\t2",  # a tab after the dash
    "INFO  jepsen.util  - 1\t:ok\t:read\t2",  # two spaces before it
    "INFO  jepsen.util -1\t:ok\t:read\t2",  # none after it
    "INFO\tjepsen.util\t-\t1 :ok   :read \t 2  ",
])
def test_the_spacings_the_audit_found_skipped_are_read(line: str) -> None:
    assert read([canonical(1, "invoke", "read", "nil"), line]) == [(1, "invoke", "read", None, None),
                                                                   (1, "ok", "read", 2, None)]


@pytest.mark.parametrize(("line", "problem"), [
    ("INFO  jepsen.uti1", "not a log record"),  # the marker cut (audit case 05d)
    ("INFO  jep", "not a log record"),
    ("INFO", "not a log record"),
    ("INF", "cut short"),
    ("INFO  jepsen.util- 0\t:ok\t:write\t1", "not a log record"),
    ("INFO  jepsen.utl - 0\t:ok\t:write\t1", "a damaged jepsen.util"),  # the logger damaged
    ("INFO  jepsen.utl - 0\t:okk\t:write\t1", "a damaged jepsen.util"),  # and the op
    ("NFO  jepsen.util - 0\t:okk\t:write\t1", "level is damaged"),
    ("jepsen.util - 0\t:ok\t:write\t1", "level is damaged or missing"),
    ("WARN  jepsen.util - 0\t:ok\t:write\t1", "not on an op line"),  # an op at another level
    ("WARN  jepsen.ut - \t:ok\t:write\t1", "not on an op line"),  # the process lost too
    ("0\t:ok\t:write\t1", "not on an op line"),  # printed by a report, not logged
    ("INFO  jepsen.util 0\t:ok\t:write\t1", "not ' - process"),  # no dash
    ("INFO  jepsen.util", "not ' - process"),
    ("INFO  jepsen.util - 0\t:ok", "not ' - process"),
    ("INFO  jepsen.util - 0\t:ok\t:write", "no value"),
    ("INFO  jepsen.util - 0\t:okay\t:write\t1", "unknown op type :okay"),
    ("INFO  jepsen.util - zero\t:ok\t:write\t1", "process must be an integer or a keyword"),
    ("INFO  jepsen.util - 0\t:ok\t:\"write\"\t1", ":f must be a keyword"),
    ("INFO  jepsen.util - 0\t:ok\t:write\t[1", "never closed"),
    ("INFO  jepsen.util - 0\t:ok\t:write\t1 :timed-out", "not one EDN form"),  # an error after spaces
])
def test_a_damaged_op_line_is_refused_with_its_line(line: str, problem: str) -> None:
    text = "\n".join([CHATTER[0], canonical(0, "invoke", "write", "1"), line, CHATTER[1]]) + "\n"
    with pytest.raises(HistoryError) as caught:
        parse_text_history(text, "h.log")
    assert caught.value.line == 3 and problem in caught.value.problem, caught.value
    assert str(caught.value).startswith("h.log:3: ") and "\n" not in str(caught.value)


def test_an_error_after_a_tab_is_the_ops_error() -> None:
    # As later Jepsen versions print it: (str \tab err), free text.
    ops = read([canonical(2, "invoke", "cas", "[0 4]"), canonical(2, "ok", "cas", "[0 4]") + "\tsql: OK 1 row val 0",
                canonical(3, "invoke", "write", '"a\\tb"'), canonical(3, "info", "write", '"a\\tb"') + "\t:timed-out"])
    assert ops == [(2, "invoke", "cas", [0, 4], None), (2, "ok", "cas", [0, 4], "sql: OK 1 row val 0"),
                   (3, "invoke", "write", "a\tb", None), (3, "info", "write", "a\tb", ":timed-out")]


def test_chatter_is_skipped() -> None:
    assert read(CHATTER + [canonical(*op) for op in OPS] + CHATTER) == EXPECTED


def test_a_last_op_line_without_its_line_break_is_refused() -> None:
    # Cut short inside its value it still reads, wrongly: ':ok :read 12' as 1.
    lines = [canonical(1, "invoke", "read", "nil"), canonical(1, "ok", "read", "1")]
    with pytest.raises(HistoryError, match="h.log:2: the last op line has no line break"):
        parse_text_history("\n".join(lines), "h.log")
    assert len(parse_text_history("\n".join(lines) + "\r\n")) == 2
    assert len(parse_text_history("\n".join(lines) + "\nINFO  jepsen.core - done")) == 2  # chatter may end it


@given(st.integers(0, len(OPS) - 1), st.data())
def test_one_damaged_character_before_an_ops_value_never_hides_the_op(which: int, data: st.DataObject) -> None:
    # Property: a character deleted, replaced or inserted anywhere in an op line's level,
    # logger, process, type or f, or the line cut there, either is refused or still reads
    # as an op: the log never reads with an op fewer.
    lines = [canonical(*op) for op in OPS]
    line = lines[which]
    lines[which] = damaged(data, line, len(line) - len(OPS[which][3]), "\t \n:-.0x\x00I")
    try:
        ops = parse_text_history("\n".join(CHATTER[:2] + lines + CHATTER[:2]) + "\n")
    except HistoryError:
        return
    assert len(ops) == len(OPS), lines[which]


@given(st.lists(st.tuples(st.sampled_from(["\n", "\r\n", "\r"]), st.booleans()), min_size=len(OPS),
                max_size=len(OPS)))
def test_a_log_whatever_ends_its_lines_never_reads_with_an_op_fewer(endings: list[tuple[str, bool]]) -> None:
    # Property: each line ended by a line feed, CRLF or a lone carriage return (as classic
    # Mac OS and some converters leave a log), some ops with an error after a tab, the log
    # reads as all its ops or is refused. Before, a log of lone carriage returns was one
    # line, and every op after the first one's tab its error: an invalid history valid.
    text = "".join(canonical(*op) + ("\tsome error" if error else "") + end
                   for op, (end, error) in zip(OPS, endings, strict=True))
    try:
        ops = parse_text_history(text, "h.log")
    except HistoryError as e:
        assert str(e).startswith("h.log:") and "\n" not in str(e)
        return
    assert [(op.process, op.type, op.f, op.value) for op in ops] == [expected[:4] for expected in EXPECTED]


# ----------------------------------------------------------- bytes that are not UTF-8 (A6)

def test_a_byte_that_is_not_utf8_in_an_op_line_is_refused_naming_it() -> None:
    # Decoded with replacement, "\xff" and "\xfe" both became U+FFFD, one value.
    log = b'INFO  jepsen.util - 0\t:invoke\t:write\t"\xff"\nINFO  jepsen.util - 0\t:ok\t:write\t"\xff"\n'
    with pytest.raises(HistoryError, match=r"^h.log:1: not UTF-8 text \(byte 0xff\)$"):
        parse_text_log(log, "h.log")
    with pytest.raises(HistoryError, match=r"^h.log:2: not UTF-8 text \(byte 0xe9\)$"):
        parse_text_log(b"INFO  jepsen.core - start\nINFO  jepsen.ut\xe9l - 0\t:ok\t:write\t1\n", "h.log")


def test_bytes_that_are_not_utf8_in_chatter_are_skipped_with_it() -> None:
    log = b"INFO  jepsen.control - n1: Connexion refus\xe9e\n" + canonical(0, "invoke", "read", "nil").encode() + b"\n"
    assert [op.f for op in parse_text_log(log, "h.log")] == ["read"]


def test_a_byte_order_mark_is_not_part_of_the_first_line() -> None:
    assert len(parse_text_log(b"\xef\xbb\xbf" + canonical(0, "invoke", "read", "nil").encode() + b"\n")) == 1


def test_ops_with_the_same_line_text_do_not_share_a_value() -> None:
    # Each distinct op text is read once; a list or map is then copied for every op that has it.
    line = canonical(3, "info", "cas", "[1 {:a [4]}]") + "\n"
    first, second = parse_text_history(line * 2)
    assert first.value == second.value == [1, {"a": [4]}]
    assert first.value is not second.value and first.value[1]["a"] is not second.value[1]["a"]


@pytest.mark.parametrize(("whole", "at"), [
    ("1\t:ok\t:read\t:xy", -1), ("1\t:ok\t:read\tnil", -1), (":nemesis\t:info\t:kill\t:majority\t[:error :crash]", -20),
    ("1   :ok     :read   :xy  ", -3),  # space-aligned, blanks after the value
])
def test_an_op_line_broken_in_two_is_refused_not_read_with_its_value_cut_short(whole: str, at: int) -> None:
    # The first part read (:x, the symbol ni, :majo) and the rest was chatter.
    broken = f"INFO  jepsen.util - {whole[:at]}\n{whole[at:]}"
    with pytest.raises(HistoryError, match="h.log:3: the rest of the op line 2"):
        parse_text_history("\n".join([CHATTER[0], broken, canonical(*OPS[0])]) + "\n", "h.log")


def test_a_line_after_an_op_that_cannot_be_the_rest_of_its_value_is_chatter() -> None:
    lines = [canonical(1, "invoke", "read", "nil"), "java.net.SocketTimeoutException: Read timed out",
             canonical(1, "ok", "read", "1"), "done.", canonical(2, "invoke", "read", "nil"), "[...]"]
    assert len(parse_text_history("\n".join(lines) + "\n")) == 3
    # (after an op with an error, a word is the error's next line, not the rest of an earlier value)
    lines = [canonical(1, "invoke", "read", "nil"), canonical(1, "info", "read", "nil") + "\tconnection", "reset"]
    assert len(parse_text_history("\n".join(lines) + "\n")) == 2
