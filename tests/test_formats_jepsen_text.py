"""Jepsen 2014 text logs."""

from __future__ import annotations

import pytest

from floodmark.formats.jepsen_text import parse_text_history
from floodmark.history import HistoryError

LOG = """2014-05-01 setting up
INFO  jepsen.util - 3\t:invoke\t:cas\t[1 4]
INFO  jepsen.util - 3\t:fail\t:cas\t[1 4]
some stack trace line
INFO  jepsen.util - 2\t:invoke\t:read\tnil
INFO  jepsen.util - 2\t:fail\t:read\t:timed-out
INFO  jepsen.util - 4\t:invoke\t:write\t2
INFO  jepsen.util - 4\t:info\t:write\t:timed-out
INFO  jepsen.util - :nemesis\t:info\t:start\tnil
"""


def test_only_history_lines_are_read() -> None:
    ops = parse_text_history(LOG)
    assert len(ops) == 7
    assert ops[0].process == 3 and ops[0].f == "cas" and ops[0].value == [1, 4]
    assert ops[1].type == "fail" and ops[1].value == [1, 4]
    assert ops[-1].process == "nemesis"


def test_timeouts_are_unknown_outcomes_not_failures() -> None:
    ops = parse_text_history(LOG)
    assert ops[3].type == "info" and ops[3].error == "timed-out" and ops[3].value is None
    assert ops[5].type == "info" and ops[5].value is None


def test_malformed_line_is_reported_with_its_number() -> None:
    with pytest.raises(HistoryError) as caught:
        parse_text_history("ok\nINFO  jepsen.util - 3\t:invoke\t:cas\t[1 4\n", "e.log")
    assert caught.value.line == 2 and "never closed" in caught.value.problem
    with pytest.raises(HistoryError, match="e.log:1: unknown op type"):
        parse_text_history("INFO  jepsen.util - 3\t:started\t:cas\t[1 4]", "e.log")
