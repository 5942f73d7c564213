"""floodmark.inputs.fast_json: orjson's speed, the standard library's results."""

import io
import json
import re

import pytest

from floodmark.inputs import fast_json


@pytest.mark.parametrize("text", [
    '{"a": 123456789012345678901234567890}', '[-9223372036854775809, 18446744073709551616]',
    '[1.5, -7, "x", null, true]', '{"n": NaN}', '{"s": "ünïcode"}',
])
def test_parses_exactly_as_the_standard_library(text: str) -> None:
    for raw in (text, text.encode()):
        assert repr(fast_json.loads(raw)) == repr(json.loads(text))


def test_says_which_parser_read_it() -> None:
    assert fast_json.parse(b'{"a": 1}') == ({"a": 1}, True)
    assert fast_json.parse(b"[123456789012345678901234567890]") == ([123456789012345678901234567890], False)


def test_malformed_json_gets_the_standard_message() -> None:
    with pytest.raises(json.JSONDecodeError) as fast:
        fast_json.loads(b'{"a": }')
    with pytest.raises(json.JSONDecodeError) as standard:
        json.loads('{"a": }')
    assert str(fast.value) == str(standard.value)
    with pytest.raises(UnicodeDecodeError):
        fast_json.loads(b'"\xff\xfe"'.decode("unicode_escape").encode("latin-1"))


@pytest.mark.parametrize("data", [b"", b"123456789012345678", b"x 0123456789012345678", b"1234567890123456789",
                                  b'{"a": 12345678901234567890}', b"9" * 40])
def test_fits_orjson_is_the_absence_of_a_19_digit_run(data: bytes) -> None:
    assert fast_json.fits_orjson(data) == (re.search(rb"[0-9]{19}", data) is None)


@pytest.mark.parametrize("data", [b"", b"x" * 30, b"ab 12345678901234567890 cd", b"1234567890123456789",
                                  b'{"t": 123456789012345678, "u": 1234567890123456789}', b"9" * 18 + b"x" + b"9" * 18])
def test_a_stream_fits_orjson_as_its_whole_text_does_whatever_the_chunks(
        data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    for chunk in (1, 5, 8, 1 << 24):  # runs of digits across chunk boundaries are seen whole
        monkeypatch.setattr(fast_json, "_CHUNK", chunk)
        stream = io.BytesIO(b"skip" + data)
        stream.read(4)
        assert fast_json.stream_fits_orjson(stream) == fast_json.fits_orjson(data)
        assert stream.read() == data  # rewound to where it was
