"""The code version a run used: which floodmark (and so which protocol) produced a history.

Recorded in ``test.yaml`` so that the pipeline can ask "since which commit does this anomaly
appear?". From a git checkout it is the short commit id, with ``-dirty`` when tracked files
have uncommitted changes; from an installed package, the package version.
"""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

import floodmark


@cache
def code_version() -> str:
    source = Path(floodmark.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return floodmark.__version__
    return f"{commit}-dirty" if dirty else commit
