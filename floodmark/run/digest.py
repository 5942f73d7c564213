"""Run digests: what a run left behind, and proof that a simulated run replayed byte for byte.

The digest is a SHA-256 of each of the run's records (``history.jsonl``, and every
``events/<node>.jsonl`` in name order) and of all of them together, and one of its
configuration (``test.yaml``), saved as ``digest.json`` when the run ends, on every backend.
``floodmark check`` refuses a run directory whose files no longer match it (a node's events
cut at a line's end read as a shorter, different run; a test.yaml whose ``acks`` was edited
from ``all`` to ``1`` would forgive every lost write).

A simulated run is a pure function of its seed, configuration, schedule and code, so running it
again must give the very same history and node events: ``floodmark repro`` of a simulated run
compares the replay's digest with the original's and says which file differs, as
FoundationDB's unseed check does for its runs.

A replay that cannot be compared must not pass for one that was: a ``digest.json`` that is
there but unreadable, or not a digest of this shape (a SHA-256 of the history, of the whole
run, and of event files only), is a :class:`DigestError` naming it, and a simulated run
without one is said to have none.
"""

from __future__ import annotations

import json

# The digests themselves are computed and read in floodmark.run_dirs.run_digests, below the checkers and the
# report, which ask the same question of a run's results.json; they are this module's names too.
from floodmark.run_dirs.run_digests import MAX_DIGEST_BYTES as MAX_DIGEST_BYTES
from floodmark.run_dirs.run_digests import DigestError as DigestError
from floodmark.run_dirs.run_digests import compute_digest as compute
from floodmark.run_dirs.run_digests import digest_differences as differences
from floodmark.run_dirs.run_digests import load_digest as load
from floodmark.run_dirs.rundir import RunDir

__all__ = ["MAX_DIGEST_BYTES", "DigestError", "compute", "differences", "load", "save"]


def save(run: RunDir) -> dict[str, str]:
    digests = compute(run)
    tmp = run.digest.with_suffix(".tmp")
    tmp.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(run.digest)
    return digests
