"""The EDN reader and writer."""

from __future__ import annotations

import pytest

from floodmark.formats import edn


def test_reads_scalars_collections_and_keywords() -> None:
    form = edn.loads('[nil true false 1 -2 3.5 "a\\"b\\n" :ok sym \\a (1 2) #{1 2} {:k [1]} #inst "x" 7N 1/2]')
    assert form[:8] == [None, True, False, 1, -2, 3.5, 'a"b\n', "ok"]
    assert isinstance(form[7], edn.Keyword) and form[7] == "ok"
    assert isinstance(form[8], edn.Symbol)
    assert form[9] == "a"
    assert form[10] == [1, 2]
    assert form[11] == frozenset({1, 2})
    assert form[12] == {"k": [1]}
    assert form[13] == edn.Tagged("inst", "x")
    assert form[14] == 7 and form[15] == 0.5


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
