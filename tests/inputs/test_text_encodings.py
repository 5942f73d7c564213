"""A text input saved as UTF-16 or UTF-32 is named for what it is, by every reader.

Some editors (and PowerShell's ``>``) save text as UTF-16. Such a file was refused as
"binary data (a NUL byte)", or as a bad UTF-8 byte, which sends its user looking for a
corrupted file; it is named as UTF-16/32 text to save as UTF-8 (by its byte order mark, or by
the NUL bytes of ASCII text without one), and what is not certainly such text keeps its old
message.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from floodmark.cli import main
from floodmark.contracts.history import read_history
from floodmark.errors import SourceError
from floodmark.inputs.sources import other_encoding, read_source, read_text

MARKED = ["utf-16", "utf-32", "utf-16-le-bom", "utf-16-be-bom", "utf-32-be-bom"]
UNMARKED = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
PROPERTY = settings(max_examples=200, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
ASCII_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("\t\n\r"), min_size=2)


def encode(text: str, encoding: str) -> bytes:
    if encoding.endswith("-bom"):
        encoding = encoding.removesuffix("-bom")
        return ("\ufeff" + text).encode(encoding)
    return text.encode(encoding)


def family(encoding: str) -> str:
    return encoding[:6].upper()  # "UTF-16" or "UTF-32"


@PROPERTY
@given(st.text(), st.sampled_from(MARKED))
@example(text="\x00", encoding="utf-16")  # found by the clean-clone CI: FF FE 00 00 is UTF-32 LE's mark
def test_any_text_with_a_byte_order_mark_is_named_by_its_encoding(tmp_path: Path, text: str,
                                                                  encoding: str) -> None:
    path = tmp_path / "input"
    data = encode(text, encoding)
    path.write_bytes(data)
    with pytest.raises(SourceError) as refused:
        read_text(path)
    # (UTF-16 LE text beginning with U+0000 begins with UTF-32 LE's byte order mark, FF FE 00 00:
    # the bytes cannot tell the two apart, and it is named by the longer mark, as decoders take it)
    named = "UTF-32" if data.startswith(b"\xff\xfe\x00\x00") else family(encoding)
    assert str(refused.value).startswith(f"{path}: {named} text (byte order mark "), refused.value
    assert "save it as UTF-8" in str(refused.value) and "\n" not in str(refused.value)


@PROPERTY
@given(ASCII_TEXT, st.sampled_from(UNMARKED))
def test_ascii_text_without_a_mark_is_named_by_its_encoding(tmp_path: Path, text: str, encoding: str) -> None:
    path = tmp_path / "input"
    path.write_bytes(encode(text, encoding))
    with pytest.raises(SourceError, match=f"^{path}: {family(encoding)} {encoding[-2:].upper()} text "):
        read_source(path)


@PROPERTY
@given(st.text(), st.sampled_from(MARKED + UNMARKED))
def test_any_text_in_these_encodings_is_read_or_refused_in_one_line(tmp_path: Path, text: str,
                                                                   encoding: str) -> None:
    path = tmp_path / "input"
    path.write_bytes(encode(text, encoding))
    try:
        read_text(path)  # (without a mark, some non-ASCII text is valid UTF-8 too)
    except SourceError as e:
        assert "\n" not in str(e) and str(e).startswith(f"{path}"), e


@pytest.mark.parametrize("data", [b"\0" * 64, bytes(range(256)), b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0",
                                  b"a\0", b"ab\0\0\0\0\0\0"])
def test_what_is_not_certainly_such_text_is_still_binary(tmp_path: Path, data: bytes) -> None:
    assert other_encoding(data) is None
    path = tmp_path / "input"
    path.write_bytes(data)
    with pytest.raises(SourceError, match="binary data"):
        read_source(path)


def refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line a command refused its input with (exit 254)."""
    code = main(args)
    lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert code == 254 and len(lines) == 1, (code, lines)
    return lines[0]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_every_reader_names_the_encoding(tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str) -> None:
    store = tmp_path / "store"
    assert main(["run", "--cluster", "sim", "--time-limit", "2", "--seed", "1", "--store", str(store)]) == 0
    run = (store / "latest").resolve()
    capsys.readouterr()
    named = f"{family(encoding)} "

    def saved(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_bytes(text.encode(encoding))
        return str(path)

    history = (run / "history.jsonl").read_text(encoding="utf-8")
    inputs = {
        "schedule": ["run", "--cluster", "sim", "--store", str(store), "--schedule",
                     saved("schedule.json", (run / "schedule.json").read_text(encoding="utf-8"))],
        "config": ["run", "--store", str(store), "-f", saved("test.yaml", (run / "test.yaml").read_text("utf-8"))],
        "jsonl history": ["check", saved("h.jsonl", history)],
        "edn history": ["check", saved("h.edn", "{:process 0 :type :invoke :f :read :value nil}\n")],
    }
    for what, args in inputs.items():
        assert named in refused(args, capsys), what
    os.remove(run / "digest.json")  # (else the edited history is refused as not the run's)
    (run / "history.jsonl").write_bytes(history.encode(encoding))
    for command in ("check", "report"):
        assert f"history.jsonl: {named}" in refused([command, str(run)], capsys), command
    with pytest.raises(SourceError, match=f"history.jsonl: {named}"):
        read_history(run / "history.jsonl")
