"""Run digests: proof that a simulated run replayed byte for byte.

A simulated run is a pure function of its seed, configuration, schedule and code, so running it
again must give the very same history and node events. The digest is a SHA-256 of each
(``history.jsonl``, and every ``events/<node>.jsonl`` in name order) and of all of them
together; ``floodmark repro`` of a simulated run compares the replay's digest with the
original's and says which file differs, as FoundationDB's unseed check does for its runs.

A replay that cannot be compared must not pass for one that was: a ``digest.json`` that is
there but unreadable, or not a digest of this shape (a SHA-256 of the history, of the whole
run, and of event files only), is a :class:`DigestError` naming it, and a simulated run
without one is said to have none.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from floodmark.rundir import HISTORY, RunDir

_SHA256 = re.compile(r"[0-9a-f]{64}")
_EVENT_FILE = re.compile(r"events/[^/]+\.jsonl")
MAX_DIGEST_BYTES = 1 << 20  # a digest names a few files; a larger one is not one


class DigestError(ValueError):
    """A digest.json that cannot be compared with: names the file and what is wrong."""


def compute(run: RunDir) -> dict[str, str]:
    """The digests of a run directory's history and node events, and of the whole."""
    files = [run.history, *sorted(run.events.glob("*.jsonl"))] if run.events.is_dir() else [run.history]
    whole = hashlib.sha256()
    digests: dict[str, str] = {}
    for path in files:
        data = path.read_bytes() if path.is_file() else b""
        name = str(path.relative_to(run.path))
        digests[name] = hashlib.sha256(data).hexdigest()
        whole.update(name.encode() + b"\0" + data + b"\0")
    digests["run"] = whole.hexdigest()
    return digests


def save(run: RunDir) -> dict[str, str]:
    digests = compute(run)
    tmp = run.digest.with_suffix(".tmp")
    tmp.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(run.digest)
    return digests


def load(run: RunDir) -> dict[str, str] | None:
    """The digests saved with a run, or None when it has none (a real cluster's run, or one
    that ended before it was digested); DigestError when the file is there but is not one."""
    from floodmark.errors import SourceError
    from floodmark.rundir import read_json_file

    path = run.digest
    if not os.path.lexists(path):
        return None
    try:
        data = read_json_file(path, limit=MAX_DIGEST_BYTES, what="a digest")
    except SourceError as e:
        raise DigestError(str(e)) from None
    if not isinstance(data, dict):
        raise DigestError(f"{path}: not a digest (expected an object of file digests)")
    for name in ("run", HISTORY):
        if name not in data:
            raise DigestError(f"{path}: not a digest (no {name!r})")
    for name, value in data.items():
        if name not in ("run", HISTORY) and not _EVENT_FILE.fullmatch(name):
            raise DigestError(f"{path}: not a digest ({name[:60]!r} is not a file a run's digest names)")
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            raise DigestError(f"{path}: not a digest ({name[:60]!r} is not a SHA-256 in hex)")
    return data



def differences(original: dict[str, str], replay: dict[str, str]) -> list[str]:
    """The files whose digests differ (empty: the replay was byte-identical)."""
    names = sorted((set(original) | set(replay)) - {"run"})
    return [name for name in names if original.get(name) != replay.get(name)]
