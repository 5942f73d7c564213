"""libfaketime: the timestamp file format, and a real process following it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from floodmark.backends.cleanup import remove_stale_faketime_files
from floodmark.backends.faketime import NO_SKEW, broker_environment, clock_spec, libfaketime_library


def test_spec_format_is_what_libfaketime_reads() -> None:
    assert clock_spec(12.5) == "+12.500 x1"
    assert clock_spec(-3, 2.0) == "-3.000 x2"
    assert NO_SKEW == "+0 x1"


def test_a_process_under_libfaketime_follows_the_timestamp_file(tmp_path: Path) -> None:
    clock_file = tmp_path / "faketime"
    clock_file.write_text(NO_SKEW + "\n")
    script = ("import sys, time\n"
              "for line in sys.stdin:\n"
              "    print(time.time(), flush=True)\n")
    env = broker_environment(str(clock_file), libfaketime_library())
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdin and child.stdout

    def child_skew() -> float:
        child.stdin.write("\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        return float(child.stdout.readline()) - time.time()  # type: ignore[union-attr]

    try:
        assert abs(child_skew()) < 0.5
        clock_file.write_text(clock_spec(-120.0) + "\n")
        assert abs(child_skew() + 120.0) < 0.5
        clock_file.write_text(clock_spec(0.0) + "\n")
        assert abs(child_skew()) < 0.5
    finally:
        child.kill()
        child.wait()
        # libfaketime removes its shared-memory files only on a normal exit: a killed
        # process leaves them, and the harness's cleanup is what removes them.
        assert any(str(child.pid) in r for r in remove_stale_faketime_files())
