"""Nothing outlives a run: Ctrl-C tears down; a SIGKILLed harness is cleaned at the next start."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cluster_fixtures import (
    BACKENDS,
    leftovers,
    require_docker,
    standin_cluster,
    start_child_harness,
)

from floodmark import owners
from floodmark.backends import cleanup


def test_owner_token_identifies_this_process_and_detects_dead_ones() -> None:
    token = owners.owner_token()
    assert owners.owner_alive(token)
    host, pid, ticks = token.split(":")
    assert not owners.owner_alive(f"{host}:{pid}:{int(ticks) + 1}")  # same pid, other process
    assert not owners.owner_alive(f"{host}:999999999:1")


def test_state_files_of_dead_owners_are_forgotten(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLOODMARK_STATE_DIR", str(tmp_path))
    cleanup.register_run("abc123", "local")
    assert cleanup.live_runs() == {"abc123"}
    import socket

    (tmp_path / "dead01.json").write_text(
        f'{{"run_id": "dead01", "owner": "{socket.gethostname()}:999999999:1"}}')
    assert cleanup.live_runs() == {"abc123"}
    assert not (tmp_path / "dead01.json").exists()
    cleanup.unregister_run("abc123")
    assert cleanup.live_runs() == set()


def test_libfaketime_files_of_dead_processes_are_removed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess

    gone = subprocess.Popen(["true"])  # a pid that has exited
    gone.wait()
    mine = os.getpid()
    for name in (f"faketime_shm_{gone.pid}", f"sem.faketime_sem_{gone.pid}", f"faketime_shm_{mine}",
                 f"sem.faketime_sem_{mine}", "faketime_shm_notapid", "other_shm_1"):
        (tmp_path / name).write_text("")
    removed = cleanup.remove_stale_faketime_files(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"faketime_shm_{mine}", f"sem.faketime_sem_{mine}", "faketime_shm_notapid", "other_shm_1"])
    assert len(removed) == 2


def test_libfaketime_files_of_a_zombie_are_removed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A killed broker whose harness died is reparented and may stay a zombie for a while: it
    # has exited, so its files go (they stayed in /dev/shm after a killed-harness test).
    zombie = subprocess.Popen(["true"])  # exited, not yet reaped
    deadline = time.monotonic() + 10
    while not Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].startswith(" Z"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        (tmp_path / f"faketime_shm_{zombie.pid}").write_text("")
        assert cleanup.remove_stale_faketime_files(tmp_path) == [f"file {tmp_path}/faketime_shm_{zombie.pid}"]
    finally:
        zombie.wait()


def test_a_zombie_owns_nothing() -> None:
    # An explorer killed outright leaves its workers dead but unreaped where the container's
    # first process does not reap: their claims on the store must still be cleaned (CI saw
    # a killed explorer's run claims outlive the next exploration).
    child = subprocess.Popen(["sleep", "30"])
    try:
        ticks = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        token = f"{owners.owner_token().split(':')[0]}:{child.pid}:{ticks}"
        assert owners.owner_alive(token)
        child.kill()  # dead, not yet reaped: a zombie
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].startswith(" Z"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not owners.owner_alive(token)
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "background-job"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_sigint_tears_the_cluster_down(backend: str, sigint_ignored: bool) -> None:
    with standin_cluster(backend, brokers=1):
        pass  # the fixture checks the backend is usable
    child, run_id = start_child_harness(backend, sigint_ignored=sigint_ignored)
    assert leftovers(backend, run_id)
    child.send_signal(signal.SIGINT)
    child.wait(timeout=60)
    assert leftovers(backend, run_id) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_killed_harness_leaves_nothing_after_the_next_start(backend: str) -> None:
    with standin_cluster(backend, brokers=1) as live:
        child, run_id = start_child_harness(backend)
        child.kill()
        child.wait()
        assert leftovers(backend, run_id), "SIGKILL should have left the cluster behind"
        removed = cleanup.remove_stale_runs()
        assert removed
        assert leftovers(backend, run_id) == []
        # A run whose harness is alive (this one) is not touched.
        assert leftovers(backend, live.run_id)
        assert all(node.is_running() for node in live.nodes)


def test_a_container_removed_by_its_owner_while_cleanup_looks_is_no_error(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # CI saw the next start's cleanup fail with 'No such container': a parallel run removed
    # its own container between the engine's listing and cleanup's look at it. Here the
    # engine really removes one stale container at that moment; the other still goes.
    require_docker()
    from docker.models.containers import ContainerCollection

    import docker
    from floodmark.backends.images import BASE_IMAGE
    from floodmark.harness.cluster import OWNER_LABEL, RUN_LABEL

    client = docker.from_env()
    run_id = f"race{int(time.time() * 1000) % 10**8}"
    dead_owner = f"{owners.owner_token().split(':')[0]}:999999999:1"
    made = [client.containers.create(BASE_IMAGE, ["true"], name=f"floodmark-{run_id}-{n}",
                                     labels={RUN_LABEL: run_id, OWNER_LABEL: dead_owner})
            for n in range(2)]
    vanishing = made[0].id
    look = ContainerCollection.get

    def removed_just_before_the_look(self, container_id):  # type: ignore[no-untyped-def]
        if container_id == vanishing:
            client.api.remove_container(vanishing, force=True)
        return look(self, container_id)

    monkeypatch.setattr(ContainerCollection, "get", removed_just_before_the_look)
    try:
        removed = cleanup.remove_docker_resources(run_id)
        assert removed == [f"container floodmark-{run_id}-1"]
        assert client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"}) == []
    finally:
        for container in made:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        client.close()
