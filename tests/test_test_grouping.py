"""The suite's own grouping (``tests/conftest.py``): every test on real infrastructure carries
the ``real_infrastructure`` mark, so ``make unit`` leaves it out and ``make test`` keeps it on
one worker; a test on none keeps neither.

Asserted on a real collection, as pytest runs it, not on the hook alone: ``-m`` must see the
mark the hook adds, which depends on the hooks' order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _collected(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: every test deselected
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_make_unit_leaves_out_every_test_on_real_infrastructure() -> None:
    # A module marked integration and chaos (the Docker matrix) and one marked chaos only
    # (the simulator corpus): both are real-infrastructure tests, all of them left out.
    files = ["tests/chaos/test_regression.py", "tests/chaos/test_sim_corpus.py"]
    assert _collected(*files), "the chaos modules collect no test: nothing here was checked"
    assert _collected("-m", "not real_infrastructure", *files) == []
    assert _collected("-m", "real_infrastructure", *files) == _collected(*files)


def test_a_pure_test_is_not_set_apart() -> None:
    everything = _collected("tests/test_architecture.py")
    assert everything
    assert _collected("-m", "not real_infrastructure", "tests/test_architecture.py") == everything
