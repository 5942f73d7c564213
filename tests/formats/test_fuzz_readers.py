"""Property-based tests: every reader accepts or refuses (one line) generated and mutated
inputs, never a traceback; every failing input ever found is replayed as a regression.

The number of examples per reader is ``FLOODMARK_FUZZ_EXAMPLES`` (120 in ``make test``, so the
whole file stays within about a minute; ``make fuzz`` runs 10,000 per reader).
"""

from __future__ import annotations

import os
import re

import pytest
from fuzz_readers import TARGETS, inputs, regression_cases, run_target
from hypothesis import HealthCheck, given, settings

EXAMPLES = int(os.environ.get("FLOODMARK_FUZZ_EXAMPLES", "120"))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_reader_accepts_or_refuses_in_one_line(target: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(inputs(target))
    def check(data: bytes) -> None:
        run_target(target, data)

    check()


def test_every_input_that_once_failed_is_handled() -> None:
    for target, path in regression_cases():  # tests/fuzz_regressions/<target>/<input>
        assert target in TARGETS, f"{path}: no reader named {target}"
        run_target(target, path.read_bytes())


def test_the_long_fuzz_run_finds_its_targets() -> None:
    """``make fuzz`` (scripts/fuzz.py) imports the same targets from the test support."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "fuzz.py"
    done = subprocess.run([sys.executable, str(script), "--examples", "2", "--target", "digest-json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "digest-json" in done.stdout


BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("target", sorted(set(TARGETS) - {"wire-frame"}))
def test_a_byte_order_mark_before_a_text_changes_nothing_its_reader_says(target: str) -> None:
    """Property: every reader of a text file (history in each format, node events, test.yaml,
    schedule.json, results.json, digest.json) reads it after a UTF-8 byte order mark, which
    some editors save at the start, exactly as without: the same value, or the same refusal
    (before, the JSON readers refused it in orjson's words)."""

    def said(data: bytes) -> str:
        try:
            run_target(target, data)
        except AssertionError as e:  # (what the target checks of what it read)
            return f"assertion {e}"
        _, read, refusals = TARGETS[target]
        try:
            read(data)
        except refusals as e:
            return f"refused {re.sub(r'/tmp/[^/]+/', '/', str(e))}"  # (each read has its own directory)
        return "read"

    @settings(max_examples=max(EXAMPLES // 4, 10), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(TARGETS[target][0])
    def check(data: bytes) -> None:
        assert said(BOM + data) == said(data)

    check()
