"""The EDN reader and writer."""

from __future__ import annotations

import re
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floodmark.formats import edn


def test_reads_scalars_collections_and_keywords() -> None:
    form = edn.loads('[nil true false 1 -2 3.5 "a\\"b\\n" :ok sym \\a (1 2) #{1 2} {:k [1]} #inst "2014-01-01" 7N 1/2]')
    assert form[:8] == [None, True, False, 1, -2, 3.5, 'a"b\n', "ok"]
    assert isinstance(form[7], edn.Keyword) and form[7] == "ok"
    assert isinstance(form[8], edn.Symbol)
    assert form[9] == "a" and isinstance(form[9], edn.Char)
    assert form[10] == [1, 2]
    assert form[11] == frozenset({1, 2})
    assert form[12] == {"k": [1]}
    assert form[13] == edn.Tagged("inst", "2014-01-01T00:00:00.000-00:00")
    assert form[14] == 7 and form[15] == "1/2" and isinstance(form[15], edn.Symbol)  # exact, not 0.5


def test_comments_commas_and_discard_are_ignored() -> None:
    forms = list(edn.iter_forms("; a comment\n{:a 1,, :b 2} #_ {:gone 1}\n[3]"))
    assert [f for f, _ in forms] == [{"a": 1, "b": 2}, [3]]
    assert [line for _, line in forms] == [2, 3]


def test_vector_map_keys_are_frozen() -> None:
    assert edn.loads("{[1 2] :x}") == {(1, 2): "x"}


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("[1 2\n", 1, "never closed"),
        ("{:a 1\n :b}", 1, "odd number"),
        ("\n\n[1 )", 3, "expected ']'"),
        ('\n"abc', 2, "string is never closed"),
        ("[1.2.3]", 1, "malformed number"),
        ("]", 1, "no matching opening"),
    ],
)
def test_errors_name_source_line_and_problem(text: str, line: int, problem: str) -> None:
    with pytest.raises(edn.EdnError) as caught:
        edn.loads(text, "h.edn")
    assert caught.value.source == "h.edn"
    assert caught.value.line == line
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"h.edn:{line}: ")


def test_writer_round_trips() -> None:
    value = {"type": edn.Keyword("ok"), "value": [1, "x y", None, True, 2.5], "nested": {"a": ["q\n"]}}
    text = edn.dumps(value)
    assert text.startswith("{:type :ok, :value [1 \"x y\" nil true 2.5]")
    assert edn.loads(text) == value


def test_writer_keeps_strings_that_cannot_be_keywords_as_strings() -> None:
    assert edn.dumps({"has space": 1}) == '{"has space" 1}'
    assert edn.keyword("ok") == ":ok"


# ------------------------------------------------------------------ properties and scale

_names = st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True)
_keywords = _names.map(edn.Keyword)
_symbols = _names.filter(lambda n: n not in ("nil", "true", "false")).map(edn.Symbol)
_hashables = st.one_of(st.integers(-10**30, 10**30), _keywords)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12), _keywords, _symbols)
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(_hashables, inner, max_size=4),
    st.frozensets(_hashables, max_size=4),
    st.builds(edn.Tagged, st.from_regex(r"[a-z][a-z.]{0,5}", fullmatch=True), inner),
), max_leaves=12)


def typed(value: Any) -> Any:
    """``value`` with every type spelled out (a keyword equals its name as a str)."""
    if isinstance(value, edn.Keyword | edn.Symbol):
        return (type(value).__name__, str.__str__(value))
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, dict):
        return ("map", sorted((repr(typed(k)), typed(v)) for k, v in value.items()))
    if isinstance(value, frozenset):
        return ("set", sorted(repr(typed(v)) for v in value))
    if isinstance(value, edn.Tagged):
        return ("tagged", value.tag, typed(value.value))
    return (type(value).__name__, value)


@given(_values)
def test_what_the_writer_writes_reads_back_the_same(value: Any) -> None:
    assert typed(edn.loads(edn.dumps(value))) == typed(value)


@given(st.text())
def test_a_string_is_written_without_control_characters_and_reads_back(text: str) -> None:
    # (regression, 2026-11-28: a NUL in a JSONL value was written raw by --to-edn, and
    # floodmark's own reader then refused the file as binary data)
    written = edn.dumps(text)
    assert not any(ord(c) < 0x20 or c == "\x7f" for c in written)
    assert edn.loads(written) == text


@given(st.lists(st.tuples(_values, st.lists(st.sampled_from([" ", "\n", ",", "\t", "; a comment\n", " #_ 1 "]),
                                            min_size=1, max_size=4)), max_size=6))
def test_every_top_level_form_is_numbered_by_the_line_it_starts_on(forms: list[tuple[Any, list[str]]]) -> None:
    text, expected = "", []
    for value, gaps in forms:
        expected.append((typed(value), text.count("\n") + 1))
        text += edn.dumps(value) + "".join(gaps)
    assert [(typed(form), line) for form, line in edn.iter_forms(text)] == expected


# What metadata may be given to, by its kind in EDN (not by the Python type it reads as: a
# ratio, a BigDecimal and ##Inf read as symbols), and what it may not.
_exact_numbers = st.sampled_from(["1/2", "-3/4", "1.5M", "0M", "1E+400M", "##Inf", "##NaN"]).map(edn.Symbol)
_carriers = st.one_of(st.lists(_values, max_size=3), st.dictionaries(_hashables, _values, max_size=3),
                      st.frozensets(_hashables, max_size=3), _symbols)
_no_carriers = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12), _keywords,
                         _exact_numbers, st.characters(codec="utf-8").map(edn.Char),
                         st.builds(edn.Tagged, st.from_regex(r"[a-z][a-z]{0,5}", fullmatch=True), _values))


@given(st.one_of(_carriers.map(lambda v: (v, True)), _no_carriers.map(lambda v: (v, False))), _values)
def test_metadata_reads_exactly_on_a_form_that_can_carry_it(target: tuple[Any, bool], metadata: Any) -> None:
    """Property: ``^meta form`` reads as the form when it is a symbol, list, vector, map or
    set, and is refused naming the line of its ``^`` otherwise, as Clojure's reader refuses
    it; the metadata itself may be a map, keyword, symbol or string, and nothing else."""
    value, carries = target
    meta_kind = type(metadata)
    meta_ok = meta_kind in (dict, str, edn.Keyword, edn.Symbol)
    text = f"[0\n^{edn.dumps(metadata)} {edn.dumps(value)}]"
    if meta_ok and carries:
        assert typed(edn.loads(text)) == typed([0, value])
        return
    with pytest.raises(edn.EdnError) as refused:
        edn.loads(text, "x.edn")
    what = "must be a map, keyword, symbol or string" if not meta_ok else "which cannot carry it"
    assert str(refused.value).startswith("x.edn:2: metadata (^ on line 2) ") and what in str(refused.value)


def op_maps(count: int) -> str:
    """``count`` op maps as Jepsen writes history.edn: one per line."""
    return "".join(f"{{:index {i}, :time {i * 1_000_003}, :type :{('invoke', 'ok')[i % 2]}, :process {i % 10}, "
                   f":f :write, :value {i % 5}}}\n" for i in range(count))


def test_reading_op_maps_keeps_little_more_than_a_dict_per_op() -> None:
    # Each op's keywords are the history's few distinct ones, shared: what is kept per op is
    # its map and its numbers (about 550 bytes; making every keyword afresh kept 1,300).
    text = op_maps(10_000)
    tracemalloc.start()
    forms = list(edn.iter_forms(text))
    kept = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(forms) == 10_000
    assert kept / len(forms) < 800


def test_reading_a_megabyte_of_op_maps_costs_well_under_the_reference_loop() -> None:
    # CPU time beside the calibration loop, measured together, so that load matters little:
    # a megabyte took 1.2-1.5 loops when each token was matched alone, about 0.3 now.
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    try:
        from calibration import machine_speed
    finally:
        sys.path.pop(0)
    text = op_maps(13_000)
    megabytes = len(text) / 1e6
    times = []
    for _ in range(3):
        started = time.process_time()
        list(edn.iter_forms(text))
        times.append(time.process_time() - started)
    loop = min(machine_speed() for _ in range(3))
    assert min(times) / megabytes < 0.7 * loop, (min(times), megabytes, loop)


def test_characters_are_not_strings_and_write_back() -> None:
    for text in ("\\a", "\\newline", "\\space", "\\u00e9", "\\u000B"):
        char = edn.loads(text)
        assert isinstance(char, edn.Char) and edn.loads(edn.dumps(char)) == char
    assert edn.dumps([edn.Char("a"), "a"]) == '[\\a "a"]'


@pytest.mark.parametrize(("text", "problem"), [
    ("{1 :a, true :b}", "has the keys 1 and true, distinct in EDN but one to Python"),
    ('{:x 1, "x" 2}', 'has the keys :x and "x", distinct in EDN'),
    ("#{1 1.0}", "has the members 1 and 1.0, distinct in EDN"),
    ("#{0 false}", "has the members 0 and false"),
    ("#{{:a 1} #{[:a 1]}}", "has the members {:a 1} and #{[:a 1]}"),
    ("{1 :a, 1 :b}", "has the key 1 twice"),
    ("#{[1 2] (1 2)}", "has the member [1 2] twice"),  # a list is a vector to EDN
])
def test_keys_python_cannot_hold_apart_are_refused_by_name(text: str, problem: str) -> None:
    with pytest.raises(edn.EdnError, match=re.escape(problem)):
        edn.loads(text)


def test_collections_as_map_keys_and_set_members_write_back() -> None:
    for text in ("{{:a 1} 2, [[:a 1]] 3}", "#{#{1} {:b [2]}}", "{#{1} :x}"):
        value = edn.loads(text)
        assert edn.loads(edn.dumps(value)) == value
    assert isinstance(next(iter(edn.loads("{{:a 1} 2}"))), edn.FrozenMap)


def test_writer_can_keep_string_keys_strings() -> None:
    value = {"a": 1, edn.Keyword("b"): {"c": 2}}
    assert edn.dumps(value) == "{:a 1, :b {:c 2}}"
    assert edn.dumps(value, keyword_keys=False) == '{"a" 1, :b {"c" 2}}'
    assert edn.dumps(edn.EdnSet([1, "x"])) == '#{"x" 1}'


@pytest.mark.parametrize("text", ["010", "-010", "+07", "00", "010N", "09", "\u0663", "1\u0663", "\u0661/2",
                                  "1.\u0665", "\uff11"])
def test_integers_readers_disagree_on_and_other_scripts_digits_are_refused(text: str) -> None:
    """Found by the second hostile-input hunt: 010 read as 10 (Clojure reads 8: a write of
    010 and a read of 8 was INVALID, of 10 VALID, the reverse of Knossos), and Arabic-Indic
    '\u0663' as 3 (Clojure refuses it: 'Invalid number')."""
    with pytest.raises(edn.EdnError, match=r"<edn>:1: (integer '.*' starts with 0|malformed number)"):
        edn.loads(f"[1 {text}]")


@given(st.integers(-10**100, 10**100), st.integers(1, 10**12), st.sampled_from(["", "N"]))
def test_an_integer_reads_as_written_and_with_a_leading_zero_is_refused(n: int, m: int, suffix: str) -> None:
    assert edn.loads(f"[{n}{suffix} {-n}{suffix} 0{suffix} -0{suffix}]") == [n, -n, 0, 0]
    assert edn.loads(f"{m}.5") == float(f"{m}.5") and edn.loads(f"0{m}.5") == float(f"{m}.5")  # Clojure agrees
    for text in (f"0{m}{suffix}", f"-0{m}{suffix}", f"+00{m}{suffix}"):
        with pytest.raises(edn.EdnError, match="starts with 0"):
            edn.loads(text)


@pytest.mark.parametrize(("text", "read"), [
    ("[:a\u00a0:b]", [edn.Keyword("a\u00a0:b")]),  # a no-break space is part of the keyword
    ("[:a\u202f1 2]", [edn.Keyword("a\u202f1"), 2]),
    ("[:a\u2007:b]", [edn.Keyword("a\u2007:b")]),
    ("[:a\u3000:b]", [edn.Keyword("a"), edn.Keyword("b")]),  # an ideographic space separates, as in Java
    ("[1\u001f2]", [1, 2]),
])
def test_whitespace_is_clojures_not_pythons(text: str, read: list[Any]) -> None:
    # (the third hunt, 2026-11-28: U+00A0, U+2007, U+202F and U+0085 separated tokens, which
    # Clojure reads as part of an atom: [:a\u00a0:b] is one keyword there)
    assert typed(edn.loads(text)) == typed(read)


def test_a_next_line_control_inside_a_number_is_refused_as_clojure_refuses_it() -> None:
    with pytest.raises(edn.EdnError, match="malformed number"):
        edn.loads("[1\u00851]")
