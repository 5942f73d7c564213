"""EDN's two built-in tagged elements, ``#inst`` and ``#uuid``, read as the values they are.

EDN defines two tags every reader must know: ``#inst "..."`` is an instant (Clojure reads
a ``java.util.Date``) and ``#uuid "..."`` a UUID. Kept as text, two spellings of one value
would be two values: ``#inst "2020-01-01T00:00:00Z"`` and ``#inst
"2020-01-01T01:00:00.000+01:00"`` are the same instant, and a register written with one and
read with the other would be judged a wrong read, where Knossos (comparing Dates) says the
read is fine. So each is read into one spelling, the one Clojure prints:

- an instant as ``yyyy-mm-ddThh:mm:ss.fff-00:00`` (UTC, milliseconds: a Date holds no
  more), after Clojure's own rules (``clojure.instant``): any prefix of the full form from
  the year on, each field in its range (the day within its month, leap years counted, a
  61st second only in a minute 59), a fraction of any length (nanoseconds kept, then
  milliseconds), and ``Z`` or a ``+hh:mm``/``-hh:mm`` offset;
- a UUID as its 36 lowercase characters, from the canonical form in either case or the
  shorter groups Java's ``UUID.fromString`` also takes (``1-2-3-4-5``).

What Clojure's reader refuses is refused here too (``#inst "yesterday"``, ``#uuid "x"``, a
tag on something other than a string): Jepsen cannot have written it.
"""

from __future__ import annotations

import re

# clojure.instant's timestamp pattern, ASCII digits only (Java's \d is ASCII).
_TIMESTAMP = re.compile(r"([0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2})(?:T([0-9]{2})(?::([0-9]{2})"
                        r"(?::([0-9]{2})(?:\.([0-9]+))?)?)?)?)?)?(?:Z|([-+])([0-9]{2}):([0-9]{2}))?")
_UUID_GROUPS = (8, 4, 4, 4, 12)  # hex digits per group of the canonical form
_HEX = re.compile(r"[0-9a-fA-F]+")
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def inst_text(text: str) -> str:
    """The instant ``text`` spells, as Clojure prints it; ValueError saying why it is none."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise ValueError("not a timestamp (yyyy-mm-ddThh:mm:ss.fff with an optional Z or ±hh:mm)")
    year, month, day, hour, minute, second = (int(g) if g else d for g, d in zip(
        match.groups()[:6], (0, 1, 1, 0, 0, 0)))
    fraction, sign, offset_hours, offset_minutes = match.groups()[6:]
    _check("month", month, 1, 12)
    _check("day", day, 1, _DAYS_IN_MONTH[month - 1] + (month == 2 and _leap(year)))
    _check("hour", hour, 0, 23)
    _check("minute", minute, 0, 59)
    _check("second", second, 0, 60 if minute == 59 else 59)
    offset = 0
    if sign:
        _check("offset hours", int(offset_hours), 0, 23)
        _check("offset minutes", int(offset_minutes), 0, 59)
        offset = (1 if sign == "+" else -1) * (int(offset_hours) * 60 + int(offset_minutes))
    millis = int(((fraction or "") + "000")[:3])  # a Date keeps milliseconds: the rest is cut
    seconds = (_days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset * 60)
    days, rest = divmod(seconds, 86400)
    year, month, day = _civil_from_days(days)
    if not 0 <= year <= 9999:
        return text  # (no four-digit spelling: kept as written)
    return (f"{year:04d}-{month:02d}-{day:02d}T{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"
            f".{millis:03d}-00:00")


def uuid_text(text: str) -> str:
    """The UUID ``text`` spells, in its canonical lowercase form; ValueError saying why it is none."""
    groups = text.split("-")
    if (len(text) > 36 or len(groups) != 5
            or any(not _HEX.fullmatch(g) or len(g) > most for g, most in zip(groups, _UUID_GROUPS))):
        raise ValueError("not a UUID (five groups of hex digits, 8-4-4-4-12)")
    return "-".join(g.lower().rjust(most, "0") for g, most in zip(groups, _UUID_GROUPS))


def _check(field: str, value: int, lowest: int, highest: int) -> None:
    if not lowest <= value <= highest:
        raise ValueError(f"its {field} {value} is not from {lowest} to {highest}")


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The date ``days`` after 1970-01-01: the inverse of :func:`_days_from_civil`."""
    days += 719468
    era = days // 146097
    day_of_era = days - era * 146097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + (3 if month_index < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day
