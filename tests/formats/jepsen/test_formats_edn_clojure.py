"""EDN as Jepsen's Clojure writes it: records, characters, metadata, namespaced maps, exact numbers.

Each case here was misread before (split into two forms, merged with another value, refused
while Jepsen writes it), which could give a wrong verdict or refuse a real history.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from floodmark.checkers.linearizability.values import canonical
from floodmark.contracts.history import HistoryError
from floodmark.errors import EXIT_INVALID, EXIT_VALID
from floodmark.formats import edn
from floodmark.formats.detect import format_of
from floodmark.formats.jepsen_edn import parse_edn_history

REPO = Path(__file__).resolve().parents[3]


def _register(write: str, read: str) -> str:
    return (f"{{:process 0 :type :invoke :f :write :value {write}}}\n{{:process 0 :type :ok :f :write :value {write}}}\n"
            f"{{:process 1 :type :invoke :f :read :value nil}}\n{{:process 1 :type :ok :f :read :value {read}}}\n")


def _check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "h.edn"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "floodmark", "check", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("tag", ["jepsen.history.Op", "knossos.op.Op"])
def test_ops_printed_as_records_are_their_maps(tag: str) -> None:
    plain = _register("1", "1")
    records = "".join(f"#{tag}{line}\n" for line in plain.splitlines())
    assert parse_edn_history(records) == parse_edn_history(plain)
    vector = "[" + records + "]"
    assert parse_edn_history(vector) == parse_edn_history(plain)


def test_a_tagged_map_that_is_no_record_is_still_no_op() -> None:
    with pytest.raises(HistoryError, match="expected an op map, got #jepsen"):
        parse_edn_history("#jepsen {:process 0 :type :invoke :f :read :value nil}")
    with pytest.raises(HistoryError, match="#inst on line 1 is followed by {:process 0,"):  # (Clojure: no string, no Date)
        parse_edn_history("#inst {:process 0 :type :invoke :f :read :value nil}")


@pytest.mark.parametrize(("text", "char"), [
    ("\\formfeed", "\f"), ("\\backspace", "\b"), ("\\o101", "A"), ("\\o0", "\0"), ("\\u00e9", "é"), ("\\(", "("),
])
def test_characters_clojure_writes_are_one_form(text: str, char: str) -> None:
    assert edn.loads(f"[{text}]") == [char]
    assert isinstance(edn.loads(text), edn.Char)


@pytest.mark.parametrize("text", ["\\ab", "\\u12", "\\u00e9x", "\\o400", "\\formfeedx"])
def test_a_character_that_runs_on_is_refused_not_split(text: str) -> None:
    with pytest.raises(edn.EdnError, match="unsupported character"):
        edn.loads(f"[{text}]", "x.edn")


@pytest.mark.parametrize("text", ["[#1]", "[# 1]", "[#?(:clj 1)]", "[##Foo]", "[\\ ]"])
def test_a_dispatch_edn_does_not_define_is_refused_not_read_as_a_symbol(text: str) -> None:
    with pytest.raises(edn.EdnError):
        edn.loads(text, "x.edn")


def test_special_floats_stay_the_symbols_they_are_spelled_as() -> None:
    assert edn.loads("[##Inf ##-Inf ##NaN]") == ["##Inf", "##-Inf", "##NaN"]
    assert edn.dumps(edn.loads("[##Inf]")) == "[##Inf]"


def test_metadata_is_dropped_and_its_form_kept() -> None:
    assert edn.loads("^{:a 1} [^:m x ^String y 1]") == ["x", "y", 1]
    assert edn.loads("#t ^:m [1]") == edn.Tagged("t", [1])
    assert edn.loads("[#_ ^:m [1] 2]") == [2]
    text = "^{:doc \"h\"} [" + _register("1", "1") + "]"
    assert format_of(text.encode(), "h.edn") == "edn"
    assert parse_edn_history(text) == parse_edn_history(_register("1", "1"))


@pytest.mark.parametrize(("text", "problem"), [
    ("^:m", "^ on line 1 has no form after it"), ("[1 ^:m]", "is followed by ']'"), ("^1 [1]", "metadata"),
])
def test_metadata_without_its_form_is_refused(text: str, problem: str) -> None:
    with pytest.raises(edn.EdnError, match=problem.replace("^", "\\^").replace("[", "\\[")):
        edn.loads(text, "x.edn")


@pytest.mark.parametrize("target", ["1", '"s"', ":k", "nil", "true", "1.5", "1/2", "-3/4", "1.5M", "##Inf", "\\a",
                                    '#inst "2014-01-01"'])
def test_metadata_on_a_form_that_cannot_carry_it_is_refused_naming_its_line(tmp_path: Path, target: str) -> None:
    """(regression, 2026-11-28) Clojure's reader refuses metadata on what cannot carry it
    (only a symbol, list, vector, map or set can): ``^:m 1`` was read as 1, and a register
    history whose read said ``:value ^:m 1`` was judged (VALID). A ratio or a BigDecimal is
    read as a symbol here, yet is refused as the number it is."""
    text = _register("1", f"^:m {target}")
    with pytest.raises(HistoryError) as caught:
        parse_edn_history(text, "h.edn")
    assert str(caught.value).startswith("h.edn:4: metadata (^ on line 4) is given to ")
    assert str(caught.value).endswith(", which cannot carry it (only a symbol, list, vector, map or set can)")
    done = _check(tmp_path, text)
    assert done.returncode == 254 and done.stderr.count("\n") == 1 and "h.edn:4: metadata" in done.stderr, done


@pytest.mark.parametrize("metadata", ["1/2", "1.5M", "##NaN", "1", "nil", "[1]"])
def test_metadata_that_is_a_number_even_one_read_as_a_symbol_is_refused(metadata: str) -> None:
    with pytest.raises(edn.EdnError, match=r"^x.edn:1: metadata \(\^ on line 1\) must be a map, keyword, symbol or string"):
        edn.loads(f"^{metadata} [1]", "x.edn")
    assert edn.loads("^{:m 1} ^:k ^sym ^\"s\" [1]") == [1]


def test_a_namespaced_map_qualifies_its_keys() -> None:
    assert edn.loads("#:a{:b 1 :c/d 2 :_/e 3}") == {"a/b": 1, "c/d": 2, "e": 3}
    for text, problem in [("#:a{:b 1 :a/b 2}", "twice"), ("#:a [1]", "not a map"), ("#::{:a 1}", "namespace")]:
        with pytest.raises(edn.EdnError, match=problem):
            edn.loads(text, "x.edn")


def test_ratios_and_decimals_are_exact_as_in_clojure() -> None:
    values = edn.loads("[1/2 2/4 4/2 0.5 1.5M 1.50M 1.5 0.1000000000000000000001M 0.1M 1e400M -0.0M 0M]")
    same = [canonical(v) for v in values]
    assert same[0] == same[1] and same[0] != same[3]  # 2/4 is 1/2; 1/2 is not 0.5
    assert values[2] == 2 and type(values[2]) is int  # a whole ratio is an integer
    assert same[4] == same[5] and same[4] != same[6]  # 1.5M is 1.50M, not the double 1.5
    assert same[7] != same[8]  # decimals that one double would merge
    assert values[9] == "1E+400M" and same[10] == same[11]
    assert edn.dumps(values) == "[1/2 1/2 2 0.5 1.5M 1.5M 1.5 0.1000000000000000000001M 0.1M 1E+400M 0M 0M]"


@pytest.mark.parametrize(("write", "read", "code"), [
    ("0.1000000000000000000001M", "0.1M", EXIT_INVALID), ("1/2", "0.5", EXIT_INVALID),
    ("1.5M", "1.50M", EXIT_VALID), ("4/2", "2", EXIT_VALID),
])
def test_a_register_of_exact_numbers_is_judged_as_knossos_would(tmp_path: Path, write: str, read: str,
                                                                code: int) -> None:
    done = _check(tmp_path, _register(write, read))
    assert done.returncode == code, (done.stdout, done.stderr)


@pytest.mark.parametrize("process", ["1/2", "1.5M", "foo"])
def test_a_process_that_is_a_symbol_is_refused(process: str) -> None:
    with pytest.raises(HistoryError, match=":process must be"):
        parse_edn_history(f"{{:process {process} :type :invoke :f :read :value nil}}")


def test_an_op_in_a_history_vector_is_named_by_its_own_line() -> None:
    text = "[{:process 0 :type :invoke :f :read :value nil}\n {:process 0 :type :ok :f :read :value 0}\n" \
           " {:process 0 :type :done :f :read :value 0}]\n"
    with pytest.raises(HistoryError) as caught:
        parse_edn_history(text, "h.edn")
    assert caught.value.line == 3 and ":type must be" in caught.value.problem


def test_only_a_vector_or_list_is_a_history_of_ops() -> None:
    with pytest.raises(HistoryError, match="expected an op map, got #{"):
        parse_edn_history("#{{:process 0 :type :invoke :f :read :value nil}}")
    assert len(parse_edn_history("({:process 0 :type :invoke :f :read :value nil})")) == 1


def test_ops_of_a_vector_carry_the_same_values_as_a_stream() -> None:
    stream = _register("[1 #{2} {:k \\a}]", "[1 #{2} {:k \\a}]")
    assert parse_edn_history("[" + stream + "]") == parse_edn_history(stream)
    with pytest.raises(HistoryError, match="unexpected form after the history vector"):
        parse_edn_history("[" + stream + "] {:x 1}")


@pytest.mark.parametrize("value", [edn.Keyword("a:b"), edn.Keyword("é"), edn.Char("\U00010d3a"), edn.Char("\f"),
                                   edn.Symbol("1/2"), edn.Symbol("1.5M")])
def test_what_the_reader_reads_is_written_back_as_the_same_value(value: str) -> None:
    back = edn.loads(edn.dumps([value, value]))
    assert [type(v) for v in back] == [type(value)] * 2 and back == [value, value]
