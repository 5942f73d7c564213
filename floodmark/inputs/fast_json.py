"""JSON parsed fast and exactly: orjson where it gives what the standard library gives.

The harness, the wire codec and the Spark pipeline parse millions of JSON lines and frames;
orjson does it several times faster than :mod:`json`, but not always identically: it reads an
integer literal beyond 64 bits as a float, silently, and refuses NaN. So a text with a run of
19 or more digits (every integer beyond 64 bits has one) or that orjson refuses is parsed by
the standard library, which keeps huge integers exact and names the problem of malformed
input in its familiar words. Without orjson installed (a broker image), everything is parsed
by the standard library.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

try:
    import orjson
except ImportError:  # pragma: no cover - a node without orjson uses the standard library
    orjson = None  # type: ignore[assignment]

# A run of 19 digits, sought as 19 zeros once every digit reads as zero: a translation and
# a substring search are C loops over the bytes, many times faster than a regular expression
# (which restarts at every digit of every number).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


_CHUNK = 1 << 24  # bytes of a stream looked at at once: a history may be gigabytes


def fits_orjson(data: bytes) -> bool:
    """No integer literal in ``data`` is too long for orjson (nor is any in a part of it)."""
    return _LONG_RUN not in data.translate(_DIGITS_AS_ZERO)


def stream_fits_orjson(stream: BinaryIO) -> bool:
    """:func:`fits_orjson` for the rest of ``stream``, read in chunks; rewinds it to where it was."""
    start = stream.tell()
    carry = b""  # the end of the previous chunk: a run across the boundary is seen whole
    fits = True
    while chunk := stream.read(_CHUNK):
        window = carry + chunk
        if not fits_orjson(window):
            fits = False
            break
        carry = window[-(len(_LONG_RUN) - 1):]
    stream.seek(start)
    return fits


def parse(raw: bytes | str) -> tuple[Any, bool]:
    """(value, whether orjson parsed it); raises :class:`json.JSONDecodeError` for malformed
    JSON and :class:`UnicodeDecodeError` for bytes that are not UTF-8, as :mod:`json` does."""
    data = raw.encode() if isinstance(raw, str) else raw
    if orjson is not None and fits_orjson(data):
        try:
            return orjson.loads(data), True
        except orjson.JSONDecodeError:
            pass
    return json.loads(data.decode("utf-8")), False


def loads(raw: bytes | str) -> Any:
    """The value of a JSON text, exactly as :func:`json.loads` would give it."""
    return parse(raw)[0]
