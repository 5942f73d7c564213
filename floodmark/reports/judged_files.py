"""Whether a run's verdict was judged on the files it holds now, as the results browser asks it.

``floodmark check`` and ``floodmark report`` take results.json's verdict for the run's only when
its history and node events (and test.yaml) are, byte for byte, those the verdict judged:
results.json's ``judged_files`` digests say which, or, for a results file written before they
were recorded, the run's digest.json (:func:`floodmark.run_dirs.run_digests.changed_since_judged`). The index
must ask the same, or it lists a run as a green "valid" whose history was edited or cut since,
and whose report says "not checked".

Hashing is the cost: a store holds thousands of runs and a history may be hundreds of
megabytes. So a run whose results.json was written after its files last changed is taken at
its word without reading them (:func:`judged_before_written`: change times, which no user
sets back); and each run's digests are kept with the identity of the files they were computed
from (inode, size, and modification and change times in nanoseconds: the change time too
because a file rewritten and its modification time set back, as ``touch -r`` or a copy
keeping times does, still changes it). A page load stats those files; only a run whose files
changed is hashed again. A run that records nothing about what was judged is never hashed;
its verdict stands unless its history ends in a line cut short (the report shows such a run
unchecked: nothing says the verdict was of these bytes), which the last MiB of it tells, or
results.json names another run than test.yaml does.

File times have the kernel's tick as their grain, not a nanosecond: two writes of one size
within a tick can leave the same key. So, as git treats an index entry as "racily clean", a
key whose change time is within :data:`RACY_NS` of now is not trusted: such a run (one being
written or checked this moment) is hashed again on each look until its files are older.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from floodmark.contracts.results import results_run_id
from floodmark.inputs.plain_values import parse_json
from floodmark.inputs.torn_lines import cut_short
from floodmark.reports.store_paths import leads_out
from floodmark.run_dirs.run_digests import another_run, changed_since_judged, compute_digest
from floodmark.run_dirs.rundir import RunDir

FileKey = tuple[tuple[str, int, int, int, int], ...]  # (name, inode, size, mtime_ns, ctime_ns) of each file
TAIL_READ = 1 << 20  # bytes of a history read to find its last line (an op is a few hundred)
RACY_NS = 2_000_000_000  # a file changed this recently may change again unseen by its times


def trusted(key: FileKey) -> bool:
    """Whether ``key`` says what the files hold: none of them changed within :data:`RACY_NS`."""
    recent = time.time_ns() - RACY_NS
    return all(ctime < recent for *_, ctime in key)


def digested_files(run: RunDir) -> list[Path]:
    """The files :func:`~floodmark.run_dirs.run_digests.compute_digest` reads, as it finds them."""
    events = sorted(run.events.glob("*.jsonl")) if run.events.is_dir() else []
    return [run.history, *events, run.config]


def files_key(run: RunDir) -> FileKey:
    """The identity of the run's digested files and of its digest.json: equal keys, equal
    digests (a file gone is keyed as such)."""
    key = []
    for path in [*digested_files(run), run.digest]:
        try:
            s = path.stat()
            key.append((path.name, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns))
        except OSError:
            key.append((path.name, -1, -1, -1, -1))
    return tuple(key)


def history_cut_short(history: Path) -> bool:
    """Whether ``history`` ends in a line cut short, as its reader forgives it (a last line
    without its newline that does not parse but some ending would complete), read from its
    last :data:`TAIL_READ` bytes; False for anything but a regular file."""
    try:
        if not history.is_file():
            return False
        with open(history, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_READ))
            tail = f.read(TAIL_READ)
    except OSError:  # the report says why it cannot be read
        return False
    last = tail.rsplit(b"\n", 1)[-1]
    if not last.strip():
        return False
    try:
        parse_json(last)
    except ValueError:
        return cut_short(last)
    return False


def judged_before_written(run: RunDir, judged: Any) -> bool:
    """Whether results.json was written after every file its ``judged_files`` names last
    changed, and names the files the run holds now: then they are the files it judged, and
    need no hashing.

    ``check`` (and a run) writes results.json after reading the files it names there; any
    later change to one of them, even with its modification time set back, or a link put in
    its place, moves a change time past results.json's, which no user can set back. A file
    removed or added changes the names. What this trusts is results.json itself: one copied
    in from another run would pass, but whoever can write it can write matching digests too.
    Change times are compared strictly, so a file changed within results.json's clock tick is
    hashed. This keeps the index's first look at a store of thousands of runs to a few stats
    per run instead of reading every history."""
    if not (isinstance(judged, dict) and "run" in judged):
        return False  # judged by digest.json's word: hashed
    try:
        written = run.results.stat().st_ctime_ns
        files = [p for p in digested_files(run) if p != run.config or run.config.is_file()]
        names = {p.relative_to(run.path).as_posix() for p in files}
        if names != set(judged) - {"run"}:
            return False
        return all(max(p.lstat().st_ctime_ns, p.stat().st_ctime_ns) < written for p in files)
    except OSError:  # a file gone or unreadable: hashing says which
        return False


class JudgedFiles:
    """The digests of a store's runs, cached by :func:`files_key`. Not thread-safe: its owner
    (the run index) calls it under its own lock."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self._digests: dict[Path, tuple[FileKey, dict[str, str]]] = {}
        self.hashed = 0  # runs hashed so far (what the cache saves is measured by it)

    def changed(self, run: RunDir, results: dict[str, Any], key: FileKey | None = None) -> str | None:
        """None when results.json's verdict is of the files the run holds now, or when nothing
        records which files it judged (as the report holds it); otherwise why not, in a phrase
        naming the files."""
        judged, results_run = results.get("judged_files"), results_run_id(results)
        outside = [p for p in digested_files(run) if leads_out(p, self.store)]
        if judged is None and not os.path.lexists(run.digest):
            if run.history not in outside and history_cut_short(run.history):
                return f"{run.history.name}'s last line is cut short, and nothing records which history was judged"
            # (only test.yaml's run id tells whose verdict it is; one the index may not read
            # tells nothing, as one that cannot be read tells the report nothing)
            return None if run.config in outside else another_run(run, results_run)
        if outside:  # never read, as the server never serves them
            return f"{outside[0].relative_to(run.path).as_posix()} is a link leading outside the store"
        key = key if key is not None else files_key(run)
        if judged_before_written(run, judged):
            return None
        cached = self._digests.get(run.path)
        now = cached[1] if cached is not None and cached[0] == key and trusted(key) else None
        if now is None:
            try:
                now = compute_digest(run)
            except OSError:  # changed_since_judged says why, naming the run
                self._digests.pop(run.path, None)
            else:
                self.hashed += 1
                self._digests[run.path] = (key, now)
        return changed_since_judged(run, judged, now, results_run)

    def forget(self, gone: set[Path]) -> None:
        """Drop what is kept of runs no longer in the store."""
        for path in gone & set(self._digests):
            del self._digests[path]

