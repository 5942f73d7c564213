"""How a configuration's values are read: one reader per kind of value, each refusing what
its key cannot hold with a :class:`ConfigError` that names the source and the key.

A ``test.yaml`` is a user's file or a run's record, and either may be damaged: a number as a
string, a seed written with a fraction part (no longer exact above 2**53), a name that is not
a safe directory name, a week-long phase. Each reader states its bounds once, here, so the
harness choosing a test and every reader of runs refuse the same values in the same words.
Error messages quote a value only as far as it is safe (:func:`shown_value`): a damaged
file's value may be huge, nested or hostile.
"""

from __future__ import annotations

import math
import re
from typing import Any

from floodmark.contracts.run_ids import run_id_problem
from floodmark.errors import SourceError


class ConfigError(SourceError):
    """A configuration that cannot be used: names the source, the key (if one) and the problem."""

    def __init__(self, source: str, key: str | None, problem: str) -> None:
        super().__init__(source, 0, f"{key}: {problem}" if key else problem)
        self.key = key

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str | None, str]]:  # type: ignore[override]
        problem = self.problem.removeprefix(f"{self.key}: ") if self.key else self.problem
        return type(self), (self.source, self.key, problem)


# Bounds every configuration respects, whatever the harness can run: beyond them a value
# is a typo or damage (a week-long phase, a million ops a second, a million topics).
MAX_SECONDS = 7 * 24 * 3600.0
MAX_RATE = 1_000_000.0
MAX_COUNT = 100_000
MAX_NAME = 100  # characters in a test, cluster, workload or variant name


def read_run_id(source: str, key: str, value: Any) -> str | None:
    """A run id (:data:`~floodmark.contracts.run_ids.RUN_ID`), or None for none stated."""
    if value is None:
        return None
    problem = run_id_problem(value)
    if problem is not None:
        raise ConfigError(source, key, problem)
    return str(value)


def read_name(source: str, key: str, value: str) -> str:
    """A name that is safe as a path component (the store directory is named after the test)."""
    if len(value) > MAX_NAME:
        raise ConfigError(source, key, f"at most {MAX_NAME} characters, got {len(value)}")
    if value in (".", "..") or any(c in value for c in "/\\") or not value.isprintable():
        raise ConfigError(source, key, f"must be usable as a directory name (no '/', '\\', control "
                                       f"characters, '.' or '..'), got {shown_value(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(source, key, "must be Unicode text") from None
    return value


# Every whole number below this is exact as a float (a number written with a fraction part);
# from it on, the float read may be a neighbour of the number written (2**53 + 1 reads as 2**53).
_EXACT_FLOAT = 2.0**53


# A number written as a string (``seed: "3"``): ASCII digits as YAML and JSON write them.
# Python's int() and float() read more, silently: digits of any script ("٣" and "３" are 3),
# digit separators ("3_0" is 30) and blanks around; a seed or a count read from one is not
# the value the file shows.
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)


def read_number(source: str, key: str, value: Any, kind: type, minimum: float, maximum: float | None = None) -> Any:
    """A finite number of ``kind`` (int or float) within bounds; numeric strings (ASCII
    digits only, as YAML and JSON write numbers) are accepted."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str) and len(value) <= 40:
            if (_INT_TEXT if kind is int else _FLOAT_TEXT).fullmatch(value) is None:
                try:
                    kind(value)
                except ValueError:
                    raise ConfigError(source, key, f"expected a number, got {shown_value(value)}") from None
                raise ConfigError(source, key, f"expected a number, got {shown_value(value)}, which Python reads as "
                                               f"{kind(value)!r}: write it in ASCII digits, with no blanks or underscores")
            value = kind(value)
        else:
            raise ConfigError(source, key, f"expected a number, got {shown_value(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(source, key, f"must be a finite number, got {value}")
    if kind is int and isinstance(value, float):
        if not value.is_integer():
            raise ConfigError(source, key, f"expected a whole number, got {shown_value(value)}")
        if abs(value) >= _EXACT_FLOAT:  # "seed: 12345678901234567.0" reads as ...568: another seed
            raise ConfigError(source, key, f"expected a whole number, got {shown_value(value)}: written with a "
                                           "fraction part, a number this large is not exact; write it as an integer")
        value = int(value)
    if value < minimum:
        raise ConfigError(source, key, f"must be at least {minimum}, got {shown_value(value)}")
    if maximum is not None and value > maximum:
        bound = maximum if isinstance(maximum, int) else f"{maximum:g}"  # an integer bound in full
        raise ConfigError(source, key, f"must be at most {bound}, got {shown_value(value)}")
    return kind(value)


def read_range(source: str, key: str, value: Any) -> tuple[float, float]:
    """``[min, max]`` in seconds."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ConfigError(source, key, f"expected [min, max] in seconds, got {shown_value(value)}")
    low = read_number(source, key, value[0], float, 0.1, MAX_SECONDS)
    high = read_number(source, key, value[1], float, 0.1, MAX_SECONDS)
    if low > high:
        raise ConfigError(source, key, f"min {low} is greater than max {high}")
    return (low, high)


def shown_value(value: Any) -> str:
    """A value for an error message: a scalar as written (cut short; ``null``, ``true`` and
    ``false`` as YAML and JSON spell them, not as Python does), anything else by kind, since
    a damaged file's value may be nested deeply or be huge."""
    if value is None or isinstance(value, bool):
        return YAML_WORDS[value]
    if isinstance(value, int) and abs(value) >= 10**40:
        return "a number of more than 40 digits"
    if isinstance(value, str | int | float):
        text = repr(value)
        return text if len(text) <= 60 else f"{text[:57]}..."
    return value_kind(value)


YAML_WORDS = {None: "null", True: "true", False: "false"}


def value_kind(value: Any) -> str:
    """What a value is, in words (never the value: it may be huge or hostile)."""
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else type(value).__name__


def fault_kind_words(source: str, value: Any, wrong_type: str) -> list[str]:
    """The stripped words of a list or comma-separated string of fault kinds.

    None, an empty list and ``none`` are no words; any other type is a ConfigError on
    ``nemesis`` saying ``wrong_type``. What the words may be is the reader's business.
    """
    if value is None:
        return []
    if isinstance(value, str):
        words = [w.strip() for w in value.split(",")]
        if not value.strip():
            raise ConfigError(source, "nemesis", "no fault kind given (none: a run without faults)")
    elif isinstance(value, list | tuple) and all(isinstance(w, str) for w in value):
        words = [w.strip() for w in value]
    else:
        raise ConfigError(source, "nemesis", wrong_type)
    if "" in words:  # "partition,,kill": a kind left out, or a typo; never silently fewer faults
        raise ConfigError(source, "nemesis", f"an empty fault kind in {shown_value(','.join(words))}")
    if len(words) > 1 and ("all" in words or "none" in words):
        raise ConfigError(source, "nemesis", f"'all' and 'none' stand alone, not in a list of kinds: {shown_value(','.join(words))}")
    return [] if words == ["none"] else words


def read_acks(source: str, key: str, value: Any) -> str | int:
    """Kafka's acks: ``all`` (also spelled -1), 1 or 0."""
    if value in ("all", "-1", -1) and not isinstance(value, bool):
        return "all"
    if value in (0, 1, "0", "1") and not isinstance(value, bool):
        return int(value)
    raise ConfigError(source, key, f"must be one of all, 1, 0, got {shown_value(value)}")
