"""Nothing a run creates may outlive it: not on success, not on Ctrl-C, not after a crash.

Every run registers itself in a state directory (``/run/floodmark/<run>.json``, naming the
harness process that owns it) *before* it creates anything, and every resource it creates is
named ``fm-<run>...`` (namespaces, bridge, veths, host FORWARD rule, ``/tmp/floodmark-<run>``)
or labelled ``floodmark.run=<run>`` (containers, networks). A normal teardown removes its own
run. At the next start ``remove_stale_runs`` removes every run whose owner is gone (the
harness was killed) and every ``fm-`` resource that belongs to no registered run, so a
SIGKILLed harness leaves nothing behind once the next one starts. Runs of other live
harnesses on the same machine are left alone.

``interruptible()`` turns SIGTERM into KeyboardInterrupt so ``finally`` blocks run on either,
and restores SIGINT's handler when the process inherited it ignored (a background job).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from floodmark.backends.interrupts import raise_interrupt
from floodmark.harness.cluster import NAME_PREFIX, OWNER_LABEL, RUN_LABEL
from floodmark.owners import owner_alive, owner_token

_RESOURCE_NAME = re.compile(rf"^{NAME_PREFIX}([0-9A-Za-z]+)(?:-|$)")


def state_dir() -> Path:
    return Path(os.environ.get("FLOODMARK_STATE_DIR", "/run/floodmark"))


def register_run(run_id: str, backend: str) -> None:
    directory = state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    state = {"run_id": run_id, "backend": backend, "owner": owner_token(), "created": time.time()}
    (directory / f"{run_id}.json").write_text(json.dumps(state))


def unregister_run(run_id: str) -> None:
    (state_dir() / f"{run_id}.json").unlink(missing_ok=True)


def live_runs() -> set[str]:
    """Run ids registered by harness processes that are still alive."""
    runs = set()
    for path in state_dir().glob("*.json") if state_dir().exists() else []:
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if owner_alive(str(state.get("owner", ""))):
            runs.add(str(state.get("run_id")))
        else:
            path.unlink(missing_ok=True)
    return runs


def _lines(argv: list[str]) -> list[str]:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return result.stdout.splitlines() if result.returncode == 0 else []


def _run_of(name: str) -> str | None:
    match = _RESOURCE_NAME.match(name)
    return match.group(1) if match else None


def remove_local_run(run_id: str) -> list[str]:
    """Kill the run's processes, delete its namespaces, links, FORWARD rule and files."""
    removed = []
    for line in _lines(["ip", "netns", "list"]):
        namespace = line.split()[0] if line.split() else ""
        if _run_of(namespace) != run_id:
            continue
        killed = []
        for pid in _lines(["ip", "netns", "pids", namespace]):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
        _wait_until_gone(killed)  # else their libfaketime files still look in use
        subprocess.run(["ip", "netns", "delete", namespace], capture_output=True)
        removed.append(f"netns {namespace}")
    for line in _lines(["ip", "-o", "link", "show"]):
        parts = line.split(":")
        name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        if _run_of(name) == run_id:
            subprocess.run(["ip", "link", "delete", name], capture_output=True)
            removed.append(f"link {name}")
    for rule in _lines(["iptables", "-w", "-S", "FORWARD"]):
        words = rule.split()
        if words[:2] == ["-A", "FORWARD"] and any(_run_of(w) == run_id for w in words):
            subprocess.run(["iptables", "-w", "-D", *words[1:]], capture_output=True)
            removed.append(f"rule {rule}")
    workdir = Path(os.environ.get("FLOODMARK_LOCAL_ROOT", "/tmp")) / f"floodmark-{run_id}"
    if workdir.exists():
        shutil.rmtree(workdir, ignore_errors=True)
        removed.append(f"dir {workdir}")
    unregister_run(run_id)
    return removed


def _local_run_ids() -> set[str]:
    names = [line.split()[0] for line in _lines(["ip", "netns", "list"]) if line.split()]
    for line in _lines(["ip", "-o", "link", "show"]):
        parts = line.split(":")
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    root = Path(os.environ.get("FLOODMARK_LOCAL_ROOT", "/tmp"))
    names += [f"{NAME_PREFIX}{p.name.removeprefix('floodmark-')}"
              for p in root.glob("floodmark-*") if p.is_dir()]
    return {run for run in map(_run_of, names) if run}


def remove_docker_resources(run_id: str | None = None, stale_only: bool = True) -> list[str]:
    """Remove floodmark containers and networks (one run's, or every stale run's)."""
    try:
        import docker

        client = docker.from_env()  # type: ignore[attr-defined]
        client.ping()
    except Exception:  # no engine here: nothing of ours can exist in it
        return []
    label = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
    removed = []
    # Another harness (a parallel test, a run ending now) may remove its own container or
    # network between our listing and our look at it: what is already gone is not an error.
    try:
        for container in client.containers.list(all=True, filters={"label": label},
                                                ignore_removed=True):
            if stale_only and owner_alive(container.labels.get(OWNER_LABEL, "")):
                continue
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
                removed.append(f"container {container.name}")
        for network in client.networks.list(filters={"label": label}):
            if stale_only and owner_alive(network.attrs.get("Labels", {}).get(OWNER_LABEL, "")):
                continue
            with contextlib.suppress(docker.errors.NotFound):
                network.remove()
                removed.append(f"network {network.name}")
    finally:
        client.close()
    return removed


_FAKETIME_SHM = re.compile(r"^(?:faketime_shm_|sem\.faketime_sem_)([0-9]+)$")


def remove_stale_faketime_files(shm_dir: Path = Path("/dev/shm")) -> list[str]:
    """Remove libfaketime's shared-memory files of processes that are gone.

    libfaketime creates ``faketime_shm_<pid>`` and ``sem.faketime_sem_<pid>`` in every process
    it is preloaded into and removes them only when that process exits normally: a killed
    broker (the kill nemesis, a teardown) leaves them behind. Local brokers share the host's
    ``/dev/shm``; a container's goes with the container.
    """
    removed = []
    for path in sorted(shm_dir.glob("*faketime_*")) if shm_dir.is_dir() else []:
        match = _FAKETIME_SHM.match(path.name)
        if match is None or _process_exists(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(f"file {path}")
    return removed


def _process_exists(pid: int) -> bool:
    """Is ``pid`` a process that has not exited? Signal 0 checks without signalling (another
    user's process refuses it, but exists); a zombie has exited, only nobody reaped it yet
    (an orphaned broker's new parent may take its time)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:][:1] != "Z"  # the state follows the parenthesised name


def _wait_until_gone(pids: list[int], timeout: float = 5.0) -> None:
    """SIGKILL is delivered asynchronously: wait (a little) until each process has exited."""
    deadline = time.monotonic() + timeout
    while any(_process_exists(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def remove_stale_runs(docker_too: bool = True) -> list[str]:
    """Remove everything left by runs whose harness is gone; returns what was removed."""
    alive = live_runs()
    removed = []
    if os.geteuid() == 0:
        for run_id in sorted(_local_run_ids() - alive):
            removed += remove_local_run(run_id)
    if docker_too:
        removed += remove_docker_resources(stale_only=True)
    return removed + remove_stale_faketime_files()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt like SIGINT, so cleanup runs
    (while a backend runs the test's loop, either cancels the run instead: see
    :mod:`floodmark.backends.interrupts`)."""
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    # A harness started as a background job inherits SIGINT ignored: take it back, so an
    # interrupt tears the cluster down whatever disposition the process was given.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
