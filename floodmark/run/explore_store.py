"""What an exploration leaves in the store, and how what it left half-written is removed.

An exploration's runs land in ``store/explore-<key>/``, one per seed (the key names its
variant and workload: ``swarm.exploration_key``). Each is made under a *partial* name
(``rundir.PARTIAL``, naming the process making it), which no reader of the store sees, and
renamed into place only once it has its verdict (``rundir.publish_run_dir``); so is a
shrink's candidate (:mod:`floodmark.run.shrink`). A process killed outright at any point so
leaves nothing a reader takes for a run, and the partial run it was making is removed by
whoever next finds its owner gone (:func:`remove_left_partial_runs`: the next exploration
or shrink in the store, or its own interrupted explorer), whatever seeds other explorations,
alive, claim: a live process's partial run is never removed, so two explorations of one
store never remove each other's work in progress.

Each explorer also leaves a *claim* (``store/.explore-<pid>.json``, naming its seeds), by
which the next exploration removes what an earlier version, making runs in place, left
without a verdict (:func:`remove_killed_explorations`). A test folder left empty is removed
with them, so an early interrupt leaves the store as it found it. And each worker names the
run it is on (``store/.explore-<pid>-run.json``, see :func:`name_run`), and the name it
takes as it is published: an interrupted explorer reports exactly the finished runs its own
killed workers had not yet handed back, and nothing of another's. A shrink names its
running candidate the same way.

That removal must not itself be cut short: a second Ctrl-C during it would leave workers
running, or the store half-cleaned, and print a traceback
(:func:`~floodmark.backends.interrupts.interrupts_held` keeps SIGINT and SIGTERM from
interrupting it; it is short: workers are killed, not waited on). Nor may an interrupt cut a
claim's writing in two (:func:`~floodmark.backends.interrupts.signals_deferred`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Container, Iterator
from pathlib import Path

from floodmark.backends.interrupts import signals_deferred
from floodmark.owners import owner_alive, owner_token
from floodmark.run_dirs.rundir import RunDir, partial_owner, partial_runs, repoint_latest, safe_name

CLAIM_PREFIX = ".explore-"  # store/.explore-<pid>.json: an exploration at work in the store


def test_folder(store: str, exploration: str) -> Path:
    """Where the exploration keyed ``exploration`` (``swarm.exploration_key``) puts its runs
    (``swarm.swarm_config`` names the test so)."""
    return Path(store) / safe_name(f"explore-{exploration}")


def seed_of(path: Path) -> int | None:
    _, _, seed = path.name.rpartition("-s")
    return int(seed) if seed.isdigit() else None


def runs_of(store: str, exploration: str, seeds: Container[int]) -> list[Path]:
    """The run directories of ``seeds`` in the store's folder for ``exploration``."""
    base = test_folder(store, exploration)
    return [p for p in (sorted(base.iterdir()) if base.is_dir() else [])
            if p.is_dir() and not p.is_symlink() and seed_of(p) in seeds]


def is_unfinished(run: RunDir) -> bool:
    """No verdict was written to it, or its runner was interrupted before one could be."""
    return not run.results.exists() or os.path.lexists(run.interrupted)


def remove_unfinished_runs(store: str, exploration: str, seeds: Container[int]) -> list[Path]:
    """Remove the run directories of ``seeds`` that no verdict was written to: what a worker
    stopped mid-run leaves (a run that finished has its results, and a kept one is kept);
    then the exploration's folder, if that left it empty. A seed another exploration still alive
    claims is spared: its run without a verdict may be one in progress, not one left behind."""
    spared = seeds_claimed_elsewhere(store, exploration)
    removed = [p for p in runs_of(store, exploration, seeds)
               if is_unfinished(RunDir(p)) and not any(seed_of(p) in claimed for claimed in spared)]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    remove_if_empty(test_folder(store, exploration))
    repoint_latest(store)
    return removed


def remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` if nothing is in it (another exploration may be filling it: then it stays)."""
    with contextlib.suppress(OSError):
        folder.rmdir()


@contextlib.contextmanager
def claim(store: str, exploration: str, seeds: range) -> Iterator[Path]:
    """Within the block, a file in ``store`` says which seeds this process explores, so that
    if it is killed outright the next exploration can remove the runs it left half-written
    (:func:`remove_killed_explorations`)."""
    path = Path(store) / f"{CLAIM_PREFIX}{os.getpid()}.json"
    # "variant": the key, which for the queue workload is the variant itself, as claims
    # written before explorations had a workload say it.
    path.write_text(json.dumps({"owner": owner_token(), "variant": exploration,
                                "first": seeds.start, "stop": seeds.stop}))
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


MAX_CLAIM_BYTES = 1 << 16  # a claim names a few seeds or one run; a larger file is not one


def _read_claim(path: Path) -> str:
    """The text of a claim file; OSError (as for one that is gone) when ``path`` is not a
    regular file of a claim's size: a FIFO of that name, with no writer, hung every
    exploration and shrink in the store for ever, and /dev/zero would be read without end."""
    with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path}: not a regular file")
        data = f.read(MAX_CLAIM_BYTES + 1)
    if len(data) > MAX_CLAIM_BYTES:
        raise OSError(f"{path}: larger than a claim")
    return data.decode("utf-8")


def _claims(store: str) -> Iterator[tuple[Path, str, str, range]]:
    """Each claim in ``store``: its file, its owner, its exploration's key and its seeds."""
    for path in sorted(Path(store).glob(f"{CLAIM_PREFIX}*.json")):
        try:
            claimed = json.loads(_read_claim(path))
            owner, exploration, seeds = claimed["owner"], claimed["variant"], range(claimed["first"], claimed["stop"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not one of ours, or being written: leave it
        yield path, str(owner), str(exploration), seeds


def seeds_claimed_elsewhere(store: str, exploration: str) -> list[range]:
    """The seeds of ``exploration`` that other explorations, still alive, claim in ``store`` (one
    on another host counts as alive: it cannot be told from here)."""
    mine = owner_token()
    return [seeds for _, owner, claimed, seeds in _claims(store)
            if claimed == exploration and owner != mine and owner_alive(owner)]


def remove_killed_explorations(store: str) -> list[Path]:
    """The half-written runs that explorations and shrinks no longer alive left in
    ``store``, removed, with their claims (runs that finished are kept: they have their verdict)."""
    removed: list[Path] = []
    for path, owner, exploration, seeds in list(_claims(store)):
        if owner_alive(owner):
            continue
        path.unlink(missing_ok=True)  # first: its seeds are no longer claimed by anyone alive
        removed += remove_unfinished_runs(store, exploration, seeds)
    for path, owner, runs in list(_run_claims(store)):
        if owner_alive(owner):
            continue
        for run in runs:
            if _a_run_in(store, run) and is_unfinished(RunDir(run)):
                shutil.rmtree(run, ignore_errors=True)
                remove_if_empty(run.parent)
                removed.append(run)
        path.unlink(missing_ok=True)
    removed += remove_left_partial_runs(store)
    if removed:
        repoint_latest(store)
    return removed


RUN_SUFFIX = "-run.json"  # store/.explore-<pid>-run.json: the run a process is on (or was last on)


def run_claim_of(store: str | os.PathLike[str], pid: int) -> Path:
    return Path(store) / f"{CLAIM_PREFIX}{pid}{RUN_SUFFIX}"


def name_run(store: str | os.PathLike[str], run: Path | None, becoming: Path | None = None) -> None:
    """Say, in a file in ``store``, which run directory this process is on (None: none), and
    the name it is ``becoming`` as it is published (rundir.publish_run_dir), so that if it is
    killed outright, its explorer knows which finished run was its own
    (explore.settle_unfinished_runs; what it left half-made is removed by
    :func:`remove_left_partial_runs`)."""
    path = run_claim_of(store, os.getpid())
    tmp = path.with_name(path.name + ".tmp")  # not a claim's name: never read half-written
    runs = [os.path.abspath(p) for p in (run, becoming) if p is not None]
    with signals_deferred():  # a Ctrl-C between the two steps would leave the .tmp behind
        tmp.write_text(json.dumps({"owner": owner_token(), "runs": runs}))
        tmp.replace(path)


@contextlib.contextmanager
def candidate_claim(store: str | os.PathLike[str]) -> Iterator[Callable[[Path | None], None]]:
    """Within the block, a file in ``store`` names the run directory this process is
    running (the function yielded names it, or None once it has its verdict): a shrink's
    candidate (a partial run: removed by the next exploration or shrink if the shrink is
    killed outright, named or not)."""
    name_run(store, None)
    try:
        yield lambda run: name_run(store, run)
    finally:
        run_claim_of(store, os.getpid()).unlink(missing_ok=True)


def remove_left_partial_runs(store: str) -> list[Path]:
    """Remove the partial runs in ``store`` (rundir.PARTIAL: being made, unseen by readers)
    whose maker is gone: each was left half-made by a process killed outright. A live
    maker's is its run in progress (another exploration's, whatever seeds it runs), and one
    made on another host is left too: whether its maker lives cannot be told from here."""
    removed = [run for run, owner in partial_runs(store) if not owner_alive(owner)]
    for run in removed:
        shutil.rmtree(run, ignore_errors=True)
    for folder in sorted({run.parent for run in removed}):
        remove_if_empty(folder)
    return removed


def runs_named_by(store: str, pids: Container[int]) -> tuple[list[Path], list[Path]]:
    """The run directories (of ``store``) that the run claims of processes ``pids`` name,
    and those claims' files."""
    named, claims = [], []
    for path, _, runs in _run_claims(store):
        pid = path.name[len(CLAIM_PREFIX):-len(RUN_SUFFIX)]
        if pid.isdigit() and int(pid) in pids:
            claims.append(path)
            # The name a partial run was becoming is its own only once the partial is gone
            # (renamed into it): until then, that name may be another's run.
            if not any(partial_owner(run) is not None and run.exists() for run in runs):
                named += [run for run in runs if _a_run_in(store, run)]
    return named, claims


def _a_run_in(store: str, run: Path) -> bool:
    """Whether ``run`` is a run directory of ``store`` (store/<test>/<time>-s<seed>): a claim
    naming anything else (edited, or not ours) removes nothing."""
    return (run.is_dir() and not run.is_symlink() and seed_of(run) is not None
            and not run.parent.is_symlink() and run.parent.parent.resolve() == Path(store).resolve())


def _run_claims(store: str) -> Iterator[tuple[Path, str, list[Path]]]:
    """Each run claim in ``store`` (a shrink's, a worker's): its file, its owner and the runs it names."""
    for path in sorted(Path(store).glob(f"{CLAIM_PREFIX}*{RUN_SUFFIX}")):
        try:
            claimed = json.loads(_read_claim(path))
            owner, runs = str(claimed["owner"]), [Path(str(run)) for run in claimed["runs"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not one of ours: leave it
        yield path, owner, runs
