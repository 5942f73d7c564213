"""Checks of the run commands' arguments that argparse cannot make, before anything starts.

A value the shell left empty (``--store "$STORE"`` with STORE unset) must not stand for
the default: the user named something, and got something else without a word. A store must
be a directory this process can create things in, which only trying says: root passes
every permission check, yet cannot create a file in /proc or /sys, nor on a read-only
mount, and a run refused there only when it writes its first file ends in a traceback with
its cluster half started.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from floodmark.errors import UsageError, given_text
from floodmark.run_dirs import rundir

DEFAULT_STORE = "store"


def given_run_dir(value: str) -> Path:
    """RUN_DIR as given, resolved (links followed: ``store/latest`` is the run it names);
    UsageError when it is empty or blank (which would resolve to the current directory, and
    be refused as that, a path the user never named) or cannot be resolved (a link that
    leads back to itself: Python 3.11 raises RuntimeError, a traceback and exit 1)."""
    given_text("RUN_DIR", value, "path", "a run directory (store/<test>/<time>-s<seed>, or store/latest)")
    try:
        return Path(value).resolve()
    except RuntimeError:
        raise UsageError(f"{value}: a loop of symbolic links, not a run directory") from None
    except OSError as e:
        raise UsageError(f"{value}: cannot be resolved: {e.strerror or e}") from None


def usable_store(option: str | None) -> str:
    """The store ``--store`` names (or the default), made if missing; UsageError when it
    is not a directory this process can create run directories in (a file, a path under
    one, /proc, /sys, a read-only mount), or ``--store`` names none (an empty string)."""
    store = given_text("--store", option, "directory name") or DEFAULT_STORE
    if os.path.exists(store) and not os.path.isdir(store):
        raise UsageError(f"--store {store}: is a file, not a directory")
    try:
        Path(store).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--store {store}: cannot use it as a directory: {e.strerror or e}") from None
    if not os.access(store, os.W_OK | os.X_OK):
        raise UsageError(f"--store {store}: not writable")
    try:  # root passes os.access everywhere; only creating something says it can be
        os.rmdir(tempfile.mkdtemp(prefix=".floodmark-probe-", dir=store))
    except OSError as e:
        raise UsageError(f"--store {store}: cannot create a run directory in it: {e.strerror or e}") from None
    return store


def store_of_run(run_dir: Path) -> str:
    """The store a run directory (``store/<test>/<time>-s<seed>``) is in, where its replays
    go when no ``--store`` names one; UsageError when ``run_dir`` is not named as a run
    directory (a copy named otherwise, or put anywhere, has no store: the replay of
    /tmp/myrun went into ``/``, beside /tmp) or its store is not usable."""
    if not rundir.is_run_dir_name(run_dir.name):
        raise UsageError(f"{run_dir}: not named as a run directory of a store (store/<test>/<time>-s<seed>), so "
                         "where its replay goes cannot be told; name a store with --store")
    store = str(run_dir.parent.parent)
    try:
        return usable_store(store)
    except UsageError as e:
        raise UsageError(f"{e} (the store {run_dir} is in; name another with --store)") from None
