"""Helpers for tests that run the whole harness: skip reasons and leftovers of a run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tests.cluster_fixtures import local_run_leftovers

RUN_ID = re.compile(r"run id ([0-9a-f]+)")
Test = TypeVar("Test", bound=Callable[..., None])


def needs_local_cluster() -> pytest.MarkDecorator:
    missing = [tool for tool in ("ip", "iptables", "setpriv", "java") if shutil.which(tool) is None]
    reason = None
    if os.geteuid() != 0:
        reason = "the local cluster needs root (network namespaces, iptables)"
    elif missing:
        reason = f"the local cluster needs {', '.join(missing)}"
    elif not Path("/usr/share/java/zookeeper.jar").exists():
        reason = "the local cluster needs ZooKeeper (/usr/share/java/zookeeper.jar)"
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def on_the_local_cluster(test: Test) -> Test:
    """Marks an integration test of whole runs on the local cluster (root, skipped without
    the cluster's tools)."""
    for mark in (needs_local_cluster(), pytest.mark.root, pytest.mark.integration):
        test = mark(test)
    return test


def needs_docker() -> pytest.MarkDecorator:
    reason = None
    try:
        import docker

        client = docker.from_env()
        client.ping()  # the images are built on first use (floodmark.backends.images)
        client.close()
    except Exception as e:  # no engine, no permission
        reason = f"no usable Docker engine ({type(e).__name__})"
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def leftovers(run_id: str) -> list[str]:
    """Everything of a local run still present: namespaces, links, rules, files, processes."""
    found = local_run_leftovers(run_id)
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    found += [f"process {line.strip()}" for line in ps.splitlines() if f"floodmark-{run_id}" in line]
    return found


def floodmark_run(*args: str, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "floodmark", "run", *args, "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
