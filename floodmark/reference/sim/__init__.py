"""The simulated runtime (see floodmark.reference.runtime): a deterministic in-process world.

``SimWorld`` (sim.world) holds the virtual-time loop (sim.loop), the network (sim.network),
the ZooKeeper server (sim.zookeeper) and its clients (sim.coordination), the nodes
(sim.node) with their runtimes (sim.runtime), disks (sim.disk, sim.disk_tree,
sim.disk_faults), wall clocks (sim.clock) and optional CPUs (sim.cpu); message faults are
sim.message_faults. The runtimes and ZooKeeper clients see the world through
sim.world_view, and never import sim.world.
"""

from floodmark.reference.sim.loop import SimulationDeadlock
from floodmark.reference.sim.runtime import SimRuntime
from floodmark.reference.sim.world import SimWorld

__all__ = ["SimRuntime", "SimWorld", "SimulationDeadlock"]
