"""EDN's built-in tags: ``#inst`` and ``#uuid`` are the values they name, whatever their spelling.

(regression, 2026-11-29) Both were kept as text, so a register written ``#inst
"2020-01-01T00:00:00Z"`` and read back as ``#inst "2020-01-01T01:00:00.000+01:00"`` (the
same instant, as Knossos compares Dates) was judged INVALID; an instant or UUID that Clojure
cannot read was accepted.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floodmark.errors import EXIT_BAD_ARGUMENTS, EXIT_INVALID, EXIT_VALID
from floodmark.formats import edn
from floodmark.formats.edn_instants import inst_text, uuid_text

REPO = Path(__file__).resolve().parents[3]


def _check(tmp_path: Path, write: str, read: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "h.edn"
    path.write_text(f"{{:process 0 :type :invoke :f :write :value {write}}}\n"
                    f"{{:process 0 :type :ok :f :write :value {write}}}\n"
                    f"{{:process 1 :type :invoke :f :read :value nil}}\n"
                    f"{{:process 1 :type :ok :f :read :value {read}}}\n")
    return subprocess.run([sys.executable, "-m", "floodmark", "check", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("write", "read", "code"), [
    ('#inst "2020-01-01T00:00:00Z"', '#inst "2020-01-01T01:00:00.000+01:00"', EXIT_VALID),
    ('#inst "2020"', '#inst "2020-01-01T00:00:00.0001Z"', EXIT_VALID),  # (a Date keeps milliseconds)
    ('#inst "2020-01-01T00:00:00Z"', '#inst "2020-01-01T00:00:00.001Z"', EXIT_INVALID),
    ('#uuid "550E8400-E29B-41D4-A716-446655440000"', '#uuid "550e8400-e29b-41d4-a716-446655440000"', EXIT_VALID),
    ('#uuid "550e8400-e29b-41d4-a716-446655440000"', '#uuid "550e8400-e29b-41d4-a716-446655440001"', EXIT_INVALID),
    ('#inst "2020-01-01"', '"2020-01-01T00:00:00.000-00:00"', EXIT_INVALID),  # an instant is no string
])
def test_a_register_compares_instants_and_uuids_as_values(tmp_path: Path, write: str, read: str, code: int) -> None:
    result = _check(tmp_path, write, read)
    assert result.returncode == code, result.stdout + result.stderr


@pytest.mark.parametrize(("value", "problem"), [
    ('#inst "2021-02-29"', "its day 29 is not from 1 to 28"),
    ('#inst "2020-01-01T00:00:60Z"', "its second 60 is not from 0 to 59"),
    ('#inst "yesterday"', "not a timestamp"),
    ('#inst 1577836800000', "is followed by 1577836800000, not a string"),
    ('#uuid "not-a-uuid"', "not a UUID"),
    ("#uuid :k", "is followed by :k, not a string"),
])
def test_what_clojure_cannot_read_is_refused_naming_its_line(tmp_path: Path, value: str, problem: str) -> None:
    result = _check(tmp_path, "1", value)
    assert result.returncode == EXIT_BAD_ARGUMENTS, result.stdout + result.stderr
    assert problem in result.stderr and "h.edn:4:" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


_INSTANTS = st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9999, 12, 30))
_OFFSETS = st.integers(-23 * 60 - 59, 23 * 60 + 59)


@given(_INSTANTS, _OFFSETS)
def test_every_spelling_of_an_instant_reads_as_its_utc_milliseconds(moment: datetime.datetime, offset: int) -> None:
    zone = datetime.timezone(datetime.timedelta(minutes=offset))
    local = moment.replace(tzinfo=datetime.UTC).astimezone(zone)
    sign = "+" if offset >= 0 else "-"
    spelled = f"{_spelled(local)}.{local.microsecond:06d}{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    utc = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    if not 1 <= local.year <= 9999:
        return
    expected = f"{_spelled(utc)}.{utc.microsecond // 1000:03d}-00:00"
    assert inst_text(spelled) == expected
    assert edn.loads(f'#inst "{spelled}"') == edn.loads(f'#inst "{expected}"')


def _spelled(moment: datetime.datetime) -> str:
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
            f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}")


@given(st.uuids())
def test_every_case_of_a_uuid_reads_as_one(value: object) -> None:
    text = str(value)
    assert uuid_text(text.upper()) == uuid_text(text) == text


@given(st.text(alphabet="0123456789-+:.TZabcdefABCDEF", max_size=40) | st.text(max_size=40))
def test_what_is_read_is_its_own_spelling_and_anything_else_a_value_error(text: str) -> None:
    """Any string is either refused with a ValueError or read into a spelling that reads as
    itself: the one spelling is a fixed point."""
    for read in (inst_text, uuid_text):
        try:
            spelling = read(text)
        except ValueError:
            continue
        assert read(spelling) == spelling
