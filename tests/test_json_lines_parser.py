"""plain_values.json_lines_parser: per line, exactly what parse_json gives or says."""

from typing import Any

import pytest

from floodmark.plain_values import MAX_DEPTH, json_lines_parser, parse_json

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
