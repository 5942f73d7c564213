"""EDN text as tokens, line by line: what :mod:`floodmark.formats.edn` reads forms from.

A token is a bracket (``[ ] ( ) { } #{``), a string, a character (``\\a``, ``\\formfeed``:
the backslash and everything up to a delimiter, as Clojure reads one, so that ``\\ab`` is
refused rather than read as ``\\a`` and ``b``), a tag (``#inst``), a discard (``#_``), a
metadata mark (``^``) or an atom (a keyword, symbol or number); whitespace, commas and ``;``
comments only separate them. The tokens come grouped by the line they start on, ``(line
number, tokens)``, because the reader must say on which line a form starts and where a
problem is, and a line is a cheaper unit to count than a token.

Why two ways of splitting. A history is mostly lines of op maps with keywords, numbers and
brackets only (``{:process 0, :type :ok, :f :read, :value 3}``); such a line splits exactly
like whitespace-separated words once its brackets are padded with spaces and its commas
made spaces, which ``str.replace`` and ``str.split`` do in C, about five times faster than a
regular expression matching token by token. A line with a string, a comment, a character,
a tag, a discard or metadata (a ``"``, ``;``, ``\\``, ``#`` or ``^`` anywhere in it) is
matched token by token by :data:`TOKEN`, and a string may run on over the lines after it:
the rest of the line it ends on is the next group, with that line's number.

A ``"`` that opens no string (it is never closed) is given as a token of its own, a lone
``"``, for the reader to refuse when it gets there, after any problem earlier in the text.

Whitespace is Clojure's: Java's ``Character.isWhitespace`` (and the comma). Python's is
wider by four characters, the no-break spaces U+00A0, U+2007 and U+202F and the next-line
control U+0085, which Clojure reads as part of an atom (``:a\u00a0:b`` is one keyword). A
line holding one of them is matched token by token, by a pattern whose whitespace leaves
them out.

Memory stays bounded by the window, not the line: a plain line is split :data:`WINDOW`
characters at a time (never inside an atom), and a line matched token by token is given
:data:`BATCH` tokens at a time, so a one-line file of a hundred million ``[`` is refused at
the hundredth, as the reader's depth limit says, without ever becoming a list of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# One match per token: the whitespace, commas and comments before a token are skipped inside
# the same match, so matching costs one step per token, not one per token and one per gap.
# Every repeat is possessive: a token that fails to match never makes the engine backtrack
# into the gap before it, and the engine keeps no state per repetition (an atomic group
# around the gap still kept one per comment line: 360 MB for two million of them). A string
# is an unrolled loop (runs of plain characters between escapes), so memory stays linear in
# it. The second group takes a '"' that opens no string (the only character no token can
# start with once gaps are skipped).
# Java's whitespace, as a character class's members (Python's \s less U+0085, U+00A0, U+2007
# and U+202F): the gaps between tokens, and what ends an atom.
JAVA_SPACE = "\t\n\x0b\x0c\r\x1c-\x1f \u1680\u2000-\u2006\u2008-\u200a\u2028\u2029\u205f\u3000"
TOKEN = re.compile(
    r"""
    [_S,]*+(?:;[^\n]*+[_S,]*+)*+
    (?:
        (  "[^"\\]*+(?:\\.[^"\\]*+)*+"
         | \#[{_]
         | [\[\](){}]
         | \#[A-Za-z][^_S,\[\](){}"]*+
         | \\[^_S][^_S,\[\](){}"\\;^]*+
         | \^
         | [^_S,\[\](){}";^]++
        )
      | (.)
    )?
    """.replace("_S", JAVA_SPACE),
    re.VERBOSE | re.DOTALL,
)
_PYTHON_ONLY_SPACE = "\x85\xa0\u2007\u202f"  # whitespace to Python, part of an atom to Clojure
# A line with one of these is matched token by token: a string, a comment, a character, a tag,
# a discard, metadata, or a character Python splits at and Clojure does not.
_NOT_PLAIN = re.compile('["#;\\\\^' + _PYTHON_ONLY_SPACE + ']')
WINDOW = 1 << 16  # characters of a plain line split at once
BATCH = 1 << 12  # tokens of a line matched one by one, given at once


def _in_atom(char: str) -> bool:
    """Whether ``char`` can be part of an atom (as in :data:`TOKEN`'s last alternative)."""
    return (not char.isspace() or char in _PYTHON_ONLY_SPACE) and char not in ',[](){}";'



def tokens_by_line(text: str) -> Iterator[tuple[int, list[str]]]:
    """The tokens of ``text`` as (line number from 1, tokens that start on it); a line with
    no token is left out, and a long one comes in several groups, a window at a time (so
    that a line of a hundred million brackets is refused after a hundred, never split whole
    into memory)."""
    match = TOKEN.match
    not_plain = _NOT_PLAIN.search
    length = len(text)
    pos, number = 0, 1
    while pos < length:
        end = text.find("\n", pos)
        if end < 0:
            end = length
        while pos < end:  # plain windows, split
            cut = end if end - pos <= WINDOW else pos + WINDOW
            if not_plain(text, pos, cut) is not None:
                break
            tokens = (text[pos:cut].replace(",", " ").replace("{", " { ").replace("}", " } ")
                      .replace("[", " [ ").replace("]", " ] ").replace("(", " ( ").replace(")", " ) ")
                      .split())
            if cut < end and _in_atom(text[cut - 1]) and _in_atom(text[cut]):
                cut -= len(tokens.pop())  # the window ends inside an atom: it goes to the next one
                if cut == pos:
                    break  # one atom longer than a window: matched whole below
            if tokens:
                yield number, tokens
            pos = cut
        if pos >= end:
            pos, number = end + 1, number + 1
            continue
        tokens = []
        while True:
            m = match(text, pos)
            assert m is not None  # every part of TOKEN is optional: it always matches
            group = m.lastindex
            if group is None:  # only whitespace and comments are left
                if tokens:
                    yield number, tokens
                return
            start = m.start(group)
            if start > end:
                # The rest of the line was whitespace or a comment, and so were the lines up
                # to the token's: go on from the start of its line (from the next line, a run
                # of comment lines would be matched again for each of them: quadratic).
                if tokens:
                    yield number, tokens
                pos = text.rfind("\n", end, start) + 1
                number += text.count("\n", end, pos)
                break
            tokens.append(m[group])
            if group == 2:  # a '"' that opens no string: nothing after it can be read
                yield number, tokens
                return
            pos = m.end(group)
            if pos > end:  # a string with a newline in it: the rest of its last line follows
                yield number, tokens
                tokens = []
                number += text.count("\n", start, pos)
                end = text.find("\n", pos)
                if end < 0:
                    end = length
            elif len(tokens) >= BATCH:
                yield number, tokens
                tokens = []

