"""The long fuzz run (``make fuzz``): thousands of generated and mutated inputs per reader.

    python scripts/fuzz.py [--examples 10000] [--target NAME ...]

Prints how many inputs each reader was given and how many tracebacks it produced (a reader
must accept an input or refuse it with its one-line error). Every failing input is written
to ``tests/fuzz_regressions/<reader>/`` so the test suite replays it from then on. Exits 1 if
any reader failed.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))

from fuzz_readers import COUNTS, REGRESSIONS, TARGETS, inputs, run_target  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402


def fuzz(target: str, examples: int) -> list[bytes]:
    failures: list[bytes] = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(inputs(target))
    def check(data: bytes) -> None:
        try:
            run_target(target, data)
        except BaseException:  # noqa: BLE001 - every escape is a finding, kept and counted
            if len(failures) < 20:
                failures.append(data)
                traceback.print_exc(limit=3)

    check()
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--target", action="append", choices=sorted(TARGETS))
    args = parser.parse_args()
    failed = 0
    print(f"{'reader':22} {'inputs':>8} {'tracebacks':>10} {'seconds':>8}")
    for target in args.target or sorted(TARGETS):
        started = time.monotonic()
        failures = fuzz(target, args.examples)
        for data in failures:
            keep = REGRESSIONS / target / hashlib.sha256(data).hexdigest()[:16]
            keep.parent.mkdir(parents=True, exist_ok=True)
            keep.write_bytes(data)
        failed += len(failures)
        print(f"{target:22} {COUNTS[target]:8} {len(failures):10} {time.monotonic() - started:8.1f}", flush=True)
    print(f"total: {sum(COUNTS.values())} inputs, {failed} tracebacks")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
