"""Shared pytest configuration.

Tests that need real infrastructure (root, Docker, Java, Chromium) skip with a reason when it
is missing; CI installs all of it, and ``FLOODMARK_REQUIRE_ALL=1`` (set by .ci/run) turns
those skips into failures so nothing is silently skipped there.

The ``world`` fixture is the simulated world most reference tests run in; a test module
chooses its seed (and any other ``SimWorld`` option) with ``pytest.mark.sim_world(seed=...)``.
The ``storage_root`` fixture runs a storage test on every storage kind (a SimDisk and files).

Hypothesis's default deadline (200 ms an example) is off: CI shares two cores with whatever
else runs, and an example of a pure function once took longer there, failing a test that
found nothing. A test that means to bound time says so in its own settings.

``make test`` spreads the tests over the cores (pytest-xdist, ``--dist loadgroup``). Tests
that use real infrastructure (the markers in ``REAL_INFRASTRUCTURE``) all go to one worker,
one after another, as before: they share the host's ZooKeeper ports, network namespaces,
iptables rules, Docker and Spark, and their faults are timed in real seconds. They mostly
wait, so the other workers run the simulated and pure tests beside them. Each of them also
carries the ``real_infrastructure`` mark, so ``make unit`` leaves them all out with one
expression (``-m "not real_infrastructure"``) that follows this tuple.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings
from storage_fixtures import STORAGE_KINDS, StorageRoot, make_storage_root

if TYPE_CHECKING:
    from floodmark.reference.sim import SimWorld

settings.register_profile("floodmark", deadline=None)
settings.load_profile("floodmark")


REAL_INFRASTRUCTURE = ("integration", "docker", "root", "spark", "browser", "chaos")


@pytest.hookimpl(tryfirst=True)  # before -m deselects: it selects on the mark added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(marker) is not None for marker in REAL_INFRASTRUCTURE):
            item.add_marker(pytest.mark.real_infrastructure)
            item.add_marker(pytest.mark.xdist_group("real-infrastructure"))


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    if os.environ.get("FLOODMARK_REQUIRE_ALL") != "1" or call.excinfo is None:
        return
    if call.excinfo.errisinstance(pytest.skip.Exception):
        reason = str(call.excinfo.value)
        raise AssertionError(f"{item.nodeid} skipped in CI where everything must run: {reason}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sim_world(**options): the options of the ``world`` fixture's SimWorld")
    config.addinivalue_line("markers", "real_infrastructure: set on every test with a mark of REAL_INFRASTRUCTURE")


@pytest.fixture
def world(request: pytest.FixtureRequest) -> Iterator[SimWorld]:
    """A simulated world, closed after the test; options from the closest ``sim_world`` mark."""
    from floodmark.reference.sim import SimWorld

    marker = request.node.get_closest_marker("sim_world")
    if marker is None:
        raise pytest.UsageError(f"{request.node.nodeid}: the world fixture needs pytest.mark.sim_world(seed=...)")
    w = SimWorld(**marker.kwargs)
    yield w
    w.close()


@pytest.fixture(params=STORAGE_KINDS)
def storage_root(request: pytest.FixtureRequest, tmp_path: Path) -> StorageRoot:
    """An empty directory on each storage kind in turn (see ``storage_fixtures``)."""
    return make_storage_root(request.param, tmp_path)
