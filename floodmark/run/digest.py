"""Run digests: proof that a simulated run replayed byte for byte.

A simulated run is a pure function of its seed, configuration, schedule and code, so running it
again must give the very same history and node events. The digest is a SHA-256 of each
(``history.jsonl``, and every ``events/<node>.jsonl`` in name order) and of all of them
together; ``floodmark repro`` of a simulated run compares the replay's digest with the
original's and says which file differs, as FoundationDB's unseed check does for its runs.
"""

from __future__ import annotations

import hashlib
import json

from floodmark.rundir import RunDir


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
    """The digests saved with a run, or None when it has none (a real cluster's run)."""
    try:
        data = json.loads(run.digest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        return None
    return {str(k): v for k, v in data.items()}


def differences(original: dict[str, str], replay: dict[str, str]) -> list[str]:
    """The files whose digests differ (empty: the replay was byte-identical)."""
    names = sorted((set(original) | set(replay)) - {"run"})
    return [name for name in names if original.get(name) != replay.get(name)]
