"""A partial run directory (rundir.create_run_dir with an owner): unseen by every reader
of the store until published, then named as a run made in place is, never over another."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.pipeline.records import find_runs
from floodmark.run_dirs.rundir import (
    PARTIAL,
    create_run_dir,
    find_run_dirs,
    is_run_dir_name,
    partial_owner,
    publish_run_dir,
)

hosts = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True)
owners = st.builds(lambda host, pid, ticks: f"{host}:{pid}:{ticks}", hosts, st.integers(1, 2**22),
                   st.integers(0, 2**40))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**63 - 1), owner=owners, taken=st.integers(0, 2))
def test_a_partial_run_is_unseen_until_published_under_its_own_name(seed: int, owner: str, taken: int) -> None:
    with tempfile.TemporaryDirectory() as store:
        run = create_run_dir(store, "queue all/sim", seed, owner=owner)
        run.history.write_text("")
        assert run.path.name.startswith(PARTIAL) and partial_owner(run.path) == owner
        assert find_run_dirs(store) == [] and list(find_runs(store)) == []
        assert not os.path.lexists(Path(store) / "latest")
        stamp = run.path.name[len(PARTIAL):].split("-s")[0]
        others = [run.path.parent / (f"{stamp}-s{seed}" if i == 0 else f"{stamp}.{i}-s{seed}") for i in range(taken)]
        for other in others:  # runs that took its name (and the next) meanwhile: never replaced
            (other / "events").mkdir(parents=True)
        published = publish_run_dir(store, run)
        assert is_run_dir_name(published.path.name) and published.path.name.endswith(f"-s{seed}")
        assert published.path not in others and all((other / "events").is_dir() for other in others)
        assert not run.path.exists() and published.history.is_file()
        assert [r.path for r in find_run_dirs(store)] == [published.path]
        assert Path(store, "latest").resolve() == published.path.resolve()


@given(name=st.text(max_size=40))
def test_any_name_is_either_a_partial_run_with_its_owner_or_none(name: str) -> None:
    owner = partial_owner(Path("store", "t", name or "x"))
    assert owner is None or (name.startswith(PARTIAL) and name.endswith("@" + owner))
