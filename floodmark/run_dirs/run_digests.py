"""Digests of a run (``digest.json``): a SHA-256 of its history, of each node's events, of
the two together and of its ``test.yaml``.

Every run saves them as it ends (:mod:`floodmark.run.digest`), so that a verdict is only
ever about the files it read: ``check`` refuses a run directory whose files no longer match
them, ``check`` and the report ask whether a verdict already in ``results.json`` was judged
on the files the run holds now (:func:`changed_since_judged`), and a replay of a simulated
run proves it byte-identical by them (:func:`digest_differences`). Here, below the checkers
and the report, because both ask.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from floodmark.errors import first_few
from floodmark.run_dirs.rundir import CONFIG, HISTORY, RunDir, read_object_record

MAX_DIGEST_BYTES = 1 << 20  # a digest names a few files; a larger one is not one
_SHA256 = re.compile(r"[0-9a-f]{64}")
_EVENT_FILE = re.compile(r"events/[^/]+\.jsonl")


class DigestError(ValueError):
    """A digest.json that cannot be compared with: names the file and what is wrong."""


def compute_digest(run: RunDir) -> dict[str, str]:
    """The digests of a run directory's history and node events, of the two together
    (``run``: what a replay must reproduce byte for byte) and of its configuration
    (``test.yaml``, when there is one: the checkers judge by it, so a run whose ``acks`` or
    ``min_insync_replicas`` were edited afterwards is not the run that was recorded)."""
    import hashlib

    files = [run.history, *sorted(run.events.glob("*.jsonl"))] if run.events.is_dir() else [run.history]
    whole = hashlib.sha256()
    digests: dict[str, str] = {}
    for path in files:
        name = str(path.relative_to(run.path))
        one = hashlib.sha256()
        whole.update(os.fsencode(name) + b"\0")  # a name that is not UTF-8 as its own bytes
        _hash_file(path, one, whole)
        digests[name] = one.hexdigest()
        whole.update(b"\0")
    digests["run"] = whole.hexdigest()
    config = config_digest(run)
    if config is not None:
        digests[CONFIG] = config
    return digests


def config_digest(run: RunDir) -> str | None:
    """The digest of the run's ``test.yaml`` as :func:`compute_digest` records it; None
    when there is no such file."""
    if not run.config.is_file():
        return None
    return file_digest(run.config)


def file_digest(path: Path) -> str:
    """One file's digest as :func:`compute_digest` records it (the sha256 of its bytes)."""
    import hashlib

    one = hashlib.sha256()
    _hash_file(path, one)
    return one.hexdigest()


def _hash_file(path: Path, *hashes: Any) -> None:
    """Feed ``path``'s bytes to each of ``hashes``, in blocks (a history may be larger than
    memory); nothing when it is not a file."""
    if path.is_file():
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                for one in hashes:
                    one.update(block)


def load_digest(run: RunDir) -> dict[str, str] | None:
    """The digests saved with a run, or None when it has none (a real cluster's run, or one
    that ended before it was digested); DigestError when the file is there but is not one."""
    path = run.digest
    data = read_object_record(path, MAX_DIGEST_BYTES, "a digest", DigestError, "an object of file digests")
    if data is None:
        return None
    for name in ("run", HISTORY):
        if name not in data:
            raise DigestError(f"{path}: not a digest (no {name!r})")
    for name, value in data.items():
        if name not in ("run", HISTORY, CONFIG) and not _EVENT_FILE.fullmatch(name):
            raise DigestError(f"{path}: not a digest ({name[:60]!r} is not a file a run's digest names)")
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            raise DigestError(f"{path}: not a digest ({name[:60]!r} is not a SHA-256 in hex)")
    return data


def digest_differences(original: dict[str, str], replay: dict[str, str], *, configuration: bool = True) -> list[str]:
    """The files whose digests differ (empty: the replay was byte-identical). ``test.yaml``
    counts only when ``configuration`` is asked for (a replay's own names the code it ran)
    and ``original`` records it (digests written before it was recorded lack it): then one
    removed since differs too, since the checkers would judge the run without its settings."""
    names = (set(original) | set(replay)) - {"run"}
    if not (configuration and CONFIG in original):
        names.discard(CONFIG)
    return [name for name in sorted(names) if original.get(name) != replay.get(name)]


def changed_since_judged(run: RunDir, judged: Any, now: dict[str, str] | None = None,
                         results_run: Any = None) -> str | None:
    """None when the run's history and node events are, byte for byte, those its results.json
    says its verdicts judged (``judged``: the ``judged_files`` digests a check records there;
    ``now``: the files' digests, if already computed); otherwise why that cannot be said, in
    a phrase naming the file. A results file without them (written before checks recorded
    them) is taken at the word of the run's digest.json (:func:`changed_since_digest`), if
    it is of this run (:func:`another_run`; ``results_run``: the run id its copy of the
    configuration names)."""
    if not recorded_judged(judged):
        return another_run(run, results_run) or changed_since_digest(run, now)
    return _changed(run, judged, now, lambda files, one: f"{files} changed since {run.results} judged "
                                                         f"{'it' if one else 'them'}")


def recorded_judged(judged: Any) -> bool:
    """Whether ``judged`` (a results file's ``judged_files``) records the files it judged."""
    return isinstance(judged, dict) and "run" in judged and all(isinstance(v, str) for v in judged.values())


def another_run(run: RunDir, results_run: Any) -> str | None:
    """Why a results file that does not record which files it judged is another run's, in a
    phrase naming the files: the run id its copy of the configuration names (``results_run``;
    None: none, as before run ids) is not the one the run's ``test.yaml`` states. digest.json
    vouches for the run's files, not for the results file beside them: one copied from another
    run of the same test would be shown, and kept by ``check --checker``, as this run's
    verdict. None when they agree, or when the run has no ``test.yaml`` to say, or none that
    can be read (its readers name it; the verdict stands on results.json's word, as before)."""
    from floodmark.contracts.node_event_fields import short
    from floodmark.contracts.run_config import ConfigError, read_test_config

    try:
        config = read_test_config(run.config)
    except ConfigError:
        return None
    if config is None or config.run_id == results_run:
        return None
    said = "names no run id" if results_run is None else f"names run id {short(results_run)}"
    stated = "states none" if config.run_id is None else f"states {short(config.run_id)}"
    return f"{run.results} {said}, but {run.config} {stated}: it is another run's"


def changed_since_digest(run: RunDir, now: dict[str, str] | None = None) -> str | None:
    """None when the run's history and node events are, byte for byte, the ones its
    digest.json records (so a verdict judged on those was judged on these); otherwise why
    that cannot be said, in a phrase naming the file: no digest.json, an unreadable one, or
    the files that differ. ``now``: the files' digests, if already computed."""
    try:
        saved = load_digest(run)
    except DigestError as e:
        return str(e)
    if saved is None:
        return f"{run.digest}: no such file, so nothing records which history and node events were judged"
    return _changed(run, saved, now, lambda files, one: f"{files} {'differs' if one else 'differ'} from what "
                                                         f"{run.digest} records")


def unrecorded_problem(run: RunDir, files: dict[str, str] | None, remedy: str) -> str | None:
    """Why the run's history and node events (``files``, their digests; None when they could
    not be read) are not those its digest.json recorded as the run ended, in one line naming
    the files and ending in ``remedy``; None when they are, or when no digest records them.
    ``check`` refuses such a run and ``analyze`` leaves it out: judging it would judge
    another run."""
    try:
        saved = load_digest(run)
    except DigestError as e:
        return f"{e}: what the run recorded cannot be told; {remedy}"
    if saved is None or files is None:
        return None
    differ = digest_differences(saved, files)
    if not differ:
        return None
    return (f"{run.path}: {named_files(_gone_said(differ, files))} {'differs' if len(differ) == 1 else 'differ'} from what "
            f"{run.digest.name} recorded at the end of the run, so this is not the run that was recorded; {remedy}")


def _changed(run: RunDir, recorded: dict[str, str], now: dict[str, str] | None,
             said: Callable[[str, bool], str]) -> str | None:
    """None when the files match ``recorded``; else ``said(the files, whether one)``, or why
    they could not be digested."""
    try:
        now = now if now is not None else compute_digest(run)
    except OSError as e:
        from floodmark.inputs.sources import describe_os_error

        return f"{run.path}: cannot be digested: {describe_os_error(e)}"
    differ = digest_differences(recorded, now)
    return said(named_files(_gone_said(differ, now)), len(differ) == 1) if differ else None


def _gone_said(names: list[str], now: dict[str, str]) -> list[str]:
    """``names``, each of a file no longer there said to be gone."""
    return [name if name in now else f"{name} (gone)" for name in names]


def named_files(names: list[str]) -> str:
    """Up to four of ``names`` and how many more, for a one-line message."""
    return first_few(names, 4)
