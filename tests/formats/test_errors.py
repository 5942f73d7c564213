"""One-line messages: whatever a name or a value holds, a message quoting it stays one line
and cannot drive the terminal (floodmark.errors.printable)."""

from __future__ import annotations

import os
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from floodmark.errors import printable


@given(st.text())
def test_a_printable_text_is_one_line_without_controls(text: str) -> None:
    shown = printable(text)
    assert len(shown.splitlines()) <= 1
    assert not any(unicodedata.category(c) in ("Cc", "Cf") and c != "\t" for c in shown)
    assert "\u2028" not in shown and "\u2029" not in shown


def test_what_ends_a_line_or_moves_the_terminal_is_escaped_and_the_rest_kept() -> None:
    # \x85 (NEL) ended a report's warning line (found by the report's property test); \x9b is
    # a terminal's CSI as much as \x1b[ is.
    assert printable("a\x85b\u2028c\x9b[2J\x1b\n\tz é") == "a\\x85b\\u2028c\\x9b[2J\\x1b\\n\tz é"


@given(st.text(alphabet=st.characters(categories=["Cs", "L", "Cc", "Zl", "Zp", "N"])) | st.binary().map(os.fsdecode))
def test_a_name_with_bytes_that_are_not_utf8_can_be_written_anywhere(text: str) -> None:
    """A file name os.fsdecode made of bytes that are not UTF-8 holds lone surrogates, which
    no stream can write: a message quoting it ended in UnicodeEncodeError (found by the audit
    of analyze and serve). Shown, each such byte is ``\\xff``; any other lone surrogate ``\\udxxx``."""
    shown = printable(text)
    shown.encode("utf-8")  # strict: whatever the text held
    assert len(shown.splitlines()) <= 1


def test_a_surrogate_escaped_byte_is_shown_as_the_byte() -> None:
    assert printable(os.fsdecode(b"run-\xff\xfe")) == "run-\\xff\\xfe"
    assert printable("\ud800") == "\\ud800"


def test_what_reorders_or_hides_text_is_escaped() -> None:
    """A bidirectional override showed a name's end first ("Trojan Source", CVE-2021-42574),
    and a zero-width space made two names look alike: each is shown as its code point."""
    assert printable("run-\u202egpj.exe") == "run-\\u202egpj.exe"
    assert printable("a\u2066b\u2069\u200bc\ufeff\U000e0041") == "a\\u2066b\\u2069\\u200bc\\ufeff\\U000e0041"
    assert printable("a\u00a0b\tc é") == "a\u00a0b\tc é"  # shown as it is: it moves nothing
