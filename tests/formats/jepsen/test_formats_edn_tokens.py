"""EDN tokens by line (floodmark.formats.edn_tokens): the fast split of plain lines gives
exactly the tokens, and the lines, that matching TOKEN over the whole text gives."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.formats import edn_tokens
from floodmark.formats.edn_tokens import TOKEN, tokens_by_line

# Pieces that exercise every way of splitting: separators of all kinds, brackets, atoms of
# several lengths (to straddle small windows), strings with escapes and newlines in them,
# an unclosed string, comments, characters, tags and discards, and Unicode whitespace.
PIECES = ["[", "]", "(", ")", "{", "}", "#{", "#_", "#inst", "#", "##Inf", "\\", "\\a", "\\newline", "\\u0041",
          '"a"', '"a\\"b"', '"x\ny"', '"', ":k", ":key/name", "nil", "123", "-4.5e6", "abcdefgh", "a#b", "a\\b",
          ";note\n", ";", " ", "  ", ",", ",,", "\n", "\r\n", "\t", "\u00a0", "\u2028", "\x1c",
          "\x85", "\u2007", "\u202f", "\u3000"]


def reference(text: str) -> list[tuple[int, str]]:
    """TOKEN matched over the whole text, each token with the line it starts on."""
    found = []
    for m in TOKEN.finditer(text):
        group = m.lastindex
        if group is None:
            break
        found.append((text.count("\n", 0, m.start(group)) + 1, m[group]))
        if group == 2:  # an unclosed string: nothing after it is a token
            break
    return found


def flattened(text: str) -> list[tuple[int, str]]:
    return [(line, token) for line, tokens in tokens_by_line(text) for token in tokens]


def test_a_no_break_space_past_a_window_stays_in_its_atom(monkeypatch: pytest.MonkeyPatch) -> None:
    # (found by the property below once no-break spaces became part of atoms, 2026-11-28)
    monkeypatch.setattr(edn_tokens, "WINDOW", 2)
    assert flattened(":knil\u00a0") == reference(":knil\u00a0") == [(1, ":knil\u00a0")]


@pytest.mark.parametrize(("window", "batch"), [(edn_tokens.WINDOW, edn_tokens.BATCH), (1, 1), (2, 2), (5, 3)])
def test_tokens_and_their_lines_are_those_of_the_token_pattern(monkeypatch: pytest.MonkeyPatch,
                                                               window: int, batch: int) -> None:
    # Tiny windows and batches put their edges everywhere: inside atoms, between a string
    # and what follows it, on a newline.
    monkeypatch.setattr(edn_tokens, "WINDOW", window)
    monkeypatch.setattr(edn_tokens, "BATCH", batch)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(PIECES), max_size=40))
    def check(pieces: list[str]) -> None:
        text = "".join(pieces)
        assert flattened(text) == reference(text)

    check()


def test_a_line_with_nothing_but_separators_gives_no_group() -> None:
    assert list(tokens_by_line(" ,\n\n;c\n[1]\n")) == [(4, ["[", "1", "]"])]


def test_the_rest_of_the_line_a_string_ends_on_has_that_lines_number() -> None:
    assert list(tokens_by_line('[1 "a\nb" 2]\n3')) == [(1, ["[", "1", '"a\nb"']), (2, ["2", "]"]), (3, ["3"])]


def test_a_long_line_is_never_split_whole_into_memory() -> None:
    text = "[" * 2_000_000
    tracemalloc.start()
    groups = tokens_by_line(text)
    line, first = next(groups)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert line == 1 and len(first) <= edn_tokens.WINDOW
    assert peak < 4 * edn_tokens.WINDOW * 8  # a window's tokens and text, not the line's


def test_a_run_of_comment_lines_is_skipped_in_constant_memory_and_linear_time() -> None:
    # Matched from every line of the run, it was quadratic; with a repeat that kept a state
    # per comment line, it took memory in proportion (360 MB for two million lines).
    text = "; a comment\n" * 200_000 + "[1]"
    tracemalloc.start()
    groups = list(tokens_by_line(text))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert groups == [(200_001, ["[", "1", "]"])]
    assert peak < 1_000_000
