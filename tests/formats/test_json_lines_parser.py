"""plain_values.json_lines_parser: per line, exactly what parse_json gives or says."""

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
