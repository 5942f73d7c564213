"""plain_values.json_lines_parser: per line, exactly what parse_json gives or says."""

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floodmark.inputs.plain_values import MAX_DEPTH, json_lines_parser, parse_json

LINES = [
    b'{"index": 0, "time": 5, "type": "invoke", "process": 0, "f": "send", "value": [1, {"a": "b"}]}\n',
    b'"a string"\n', b"17\n", b"null\n", b"true\n",
    b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"\n",  # as deep as allowed
    b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"\n",  # deeper
    b'{"n": NaN}\n', b'{"a": }\n', b'{"s": "\\ud800"}\n', b'{"x": "\xff"}\n', b'{"a": 1} {"b": 2}\n',
    b'{"big": 123456789012345678901234567890}\n', b"1" + b"0" * 500 + b"\n",
]


def outcome(parse: Any, raw: bytes) -> Any:
    try:
        return ("value", repr(parse(raw)))
    except ValueError as e:
        return ("error", str(e))


@pytest.mark.parametrize("others", [[], [b'{"big": 123456789012345678901234567890}\n']])
def test_each_line_reads_as_parse_json_reads_it(others: list[bytes]) -> None:
    # With and without a long integer elsewhere in the text: both ways of reading agree.
    data = b"".join(LINES + others)
    parse = json_lines_parser(data)
    for raw in LINES:
        assert outcome(parse, raw) == outcome(parse_json, raw), raw[:40]


def test_a_refused_line_names_its_problem() -> None:
    parse = json_lines_parser(b"".join(LINES))
    assert outcome(parse, b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))[0] == "error"
    assert outcome(parse, b'{"a": }')[0] == "error"


def test_a_line_cut_short_is_faulted_where_it_ends_not_on_the_line_after() -> None:
    # The standard library places the problem of '{"a": 1' followed by its newline at line 2
    # column 1; a reader naming that line of the file would then say "column 1".
    cut = b'{"index":0,"type":"invoke"'
    with pytest.raises(ValueError, match=r"^not valid JSON \(Expecting ',' delimiter at column 27\)$"):
        parse_json(cut + b"\n")
    with pytest.raises(ValueError, match=r"at line 2 column 7\)$"):  # a text of several lines says which
        parse_json(b'{"a":\n    1,,\n}\n')


@given(st.text(alphabet='{}[]":,0123456789.-eEtrufalsn ', max_size=40), st.sampled_from(["\n", "\r\n", "  \n", ""]))
def test_a_line_terminator_never_moves_the_problem(text: str, terminator: str) -> None:
    # Property: whatever is wrong with a line is said the same with or without its newline.
    assert outcome(parse_json, (text + terminator).encode()) == outcome(parse_json, text.encode())


# ----------------------------------------------------------------------------- a key given twice

TWICE = [
    (b'{"type": "fail", "type": "ok"}', "type"),
    (b'{"value": {"topic": "t0", "partition": 0, "partition": 1}}', "partition"),  # nested
    (b'[{"x": [{"y": 1, "y": 2}]}]', "y"),  # deep in lists
    (b'{"a": 1, "a": "\\u003a"}', "a"),  # the dropped colon given back by an escape in a string
    (b'{"a": 1, "\\u0061": 2}', "a"),  # the same key, written otherwise
    (b'{"a:b": 1, "a:b": 2}', "a:b"),
]


@pytest.mark.parametrize(("raw", "key"), TWICE)
def test_an_object_naming_a_key_twice_is_refused_naming_the_key(raw: bytes, key: str) -> None:
    """orjson and json keep the last of two values silently: an op that says both "fail" and
    "ok" would read as whichever came last."""
    for parse in (parse_json, json_lines_parser(raw)):
        with pytest.raises(ValueError, match=f"^the key {key!r} twice in one object"):
            parse(raw + b"\n")


@pytest.mark.parametrize("raw", [
    b'{"a": "x:y", "b": ":::"}', b'{"a": "\\u003a", "b": 1}', b'{"a": {"a": {"a": 1}}, "b": [{"a": 2}, {"a": 3}]}',
    b'{"index": 0, "error": "t0/1: NOT_LEADER: retry", "value": [{"k": ":"}]}', b'[]', b'{}',
])
def test_colons_in_strings_and_keys_repeated_in_other_objects_are_no_duplicate(raw: bytes) -> None:
    import json

    for parse in (parse_json, json_lines_parser(raw)):
        assert parse(raw) == json.loads(raw)


_KEYS = st.sampled_from(["a", "b", "a:b", ":", "value", "é"])


def _string(draw: Any, text: str) -> str:
    """``text`` as a JSON string, its colons and other characters escaped or not, at random."""
    written = json.dumps(text, ensure_ascii=draw(st.booleans()))
    return written.replace(":", draw(st.sampled_from([":", "\\u003a", "\\u003A"])))


@st.composite
def _json_text(draw: Any, depth: int = 0) -> str:
    """A JSON text whose objects may name a key twice (and strings hold colons, written or escaped)."""
    kind = draw(st.sampled_from(["scalar", "list", "object"] if depth < 3 else ["scalar"]))
    if kind == "scalar":
        return draw(st.sampled_from(["1", "null", "true", "-2.5"])) if draw(st.booleans()) else \
            _string(draw, draw(st.text(alphabet="ab:é\\\"", max_size=4)))
    if kind == "list":
        return "[" + ",".join(draw(st.lists(_json_text(depth + 1), max_size=3))) + "]"
    pairs = draw(st.lists(st.tuples(_KEYS, _json_text(depth + 1)), max_size=4))
    return "{" + ",".join(f"{_string(draw, k)}:{v}" for k, v in pairs) + "}"


def _names_a_key_twice(text: str) -> bool:
    twice = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal twice
        twice = twice or len({k for k, _ in items}) != len(items)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return twice


@given(_json_text())
def test_a_text_is_refused_exactly_when_some_object_names_a_key_twice(text: str) -> None:
    """Property: the colon-counting screen never lets a duplicate through and never refuses a
    text without one, whichever step decides (the standard library's object hook is the judge)."""
    raw = text.encode()
    expected = _names_a_key_twice(text)
    for parse in (parse_json, json_lines_parser(raw)):
        got = outcome(parse, raw)
        assert (got[0] == "error" and "twice in one object" in got[1]) == expected, (text, got)
        if not expected:
            assert got == ("value", repr(json.loads(text)))


@pytest.mark.parametrize("digits", [401, 4301, 20000])
def test_an_integer_too_long_is_named_the_same_however_long(digits: int) -> None:
    """Past Python's own limit of 4,300 digits the refusal was Python's words: 'not a usable
    number (Exceeds the limit (4300 digits) for integer string conversion ...; use
    sys.set_int_max_str_digits() to increase the limit)', advice for a programmer."""
    for raw in (b"1" * digits, b'{"start": -' + b"9" * digits + b"}"):
        assert outcome(parse_json, raw) == ("error", "an integer of more than 400 digits")
        assert outcome(json_lines_parser(raw), raw) == ("error", "an integer of more than 400 digits")
