"""Every benchmark script starts: a figure README quotes must stay reproducible after code moves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("bench_*.py")))
def test_the_script_imports_and_explains_itself(script: str) -> None:
    # This checkout's floodmark, whichever one pip installed last.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=BENCH.parent, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
