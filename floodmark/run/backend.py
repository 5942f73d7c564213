"""A backend as the runner drives it: a cluster, its clock, its event loop, its hands and clients.

Three backends run a test: ``docker`` and ``local`` (real processes; see
``floodmark.backends.real``) and ``sim`` (the deterministic simulator; see
``floodmark.backends.sim``). The runner never asks which one it has. It needs from each:

- the cluster of nodes (the node-control interface) and its set-up and teardown, which
  collects node logs and event files into the run directory;
- the harness's clock for the history (the machine's monotonic clock, or virtual time) and
  the event loop the run's coroutines run on (``asyncio.run``, or the simulator's loop);
- a snapshot of the cluster for planning faults, and the hands that apply them
  (:class:`~floodmark.harness.faults.FaultApplier`), which refuse up front what they cannot do;
- the client runtimes the workload's processes use (:class:`~floodmark.workloads.clients.ClientHost`);
- removal of what an earlier, crashed run of this backend left behind, and of this run's
  resources by force when teardown fails.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from floodmark.harness.cluster import Cluster
from floodmark.harness.faults import ClusterView, FaultApplier
from floodmark.run_dirs.rundir import RunDir
from floodmark.workloads.clients import ClientHost

T = TypeVar("T")


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def cluster(self) -> Cluster: ...

    @property
    def faults(self) -> FaultApplier: ...

    @property
    def deterministic(self) -> bool:
        """Does the same seed give the same run, byte for byte (the simulator)?"""
        ...

    def clock_ns(self) -> int:
        """The harness's monotonic clock, in nanoseconds."""
        ...

    def remove_leftovers(self) -> list[str]:
        """Remove what crashed runs left behind; says what was removed."""
        ...

    def setup(self) -> None: ...

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine to completion on this backend's event loop."""
        ...

    def client_host(self) -> ClientHost:
        """The clients' runtimes (called on the event loop, once set up)."""
        ...

    async def observe(self) -> ClusterView:
        """A snapshot of the cluster's layout and roles, for planning a fault."""
        ...

    def teardown(self, collect_into: RunDir | None) -> None: ...

    def force_cleanup(self) -> None:
        """Remove this run's resources by force (teardown failed)."""
        ...
