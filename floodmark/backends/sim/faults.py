"""Applying fault plans to the simulated world, with the world's own word as evidence.

Every plan becomes a change of the world's state, undone on heal: blocked links for a network
cut, a node killed, powered off or frozen, its wall clock moved, a log directory taken away,
its ZooKeeper session expired, a rule on the network that drops, delays, duplicates or
reorders one type of message, or the controller's event thread stalled; an upgrade's double
roll restarts brokers with a new ``BrokerConfig`` (see ``backends.rolling_upgrade``) and is
never undone. The evidence is read back from the world after the change (links down, the node dead or frozen, its clock's
reading, the rule's counts, when the stall struck and what the controller left undone), so a
fault that did not take effect says so.

Faults in force at once heal independently, as the real backend's do. Two equal plans in force
together (a hand-written schedule, or a failover step and a message fault that drew the same
rule) each hold their own undo, healed first in, first out. Two pauses of one broker leave it
paused until the last heals. Clock faults on one node stack: healing one gives the node back
the clock it had before that fault, with whatever later fault still in force on top of it (a
strobe flips a clock only while it is the latest fault on it).

ZooKeeper (``zk``) takes part in partitions only; the simulator applies every fault kind.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from floodmark.backends import zk_view
from floodmark.backends.node_faults import restart_crashed, session_expired, stop_strobe
from floodmark.backends.rolling_upgrade import RollingUpgrades
from floodmark.harness.faults import (
    FAILOVER_PLAN_KINDS,
    ClockSkew,
    ClockStrobe,
    DiskFault,
    DoubleRoll,
    Evidence,
    FaultPlan,
    MessageFault,
    NetworkCut,
    ProcessCrash,
    ProcessPause,
    SessionExpiry,
    ThreadStall,
)
from floodmark.reference.controller.controller import event_thread_name
from floodmark.reference.protocol import zk_layout
from floodmark.reference.sim.clock import SimClock
from floodmark.reference.sim.disk import SimDisk
from floodmark.reference.sim.message_faults import ZK_RESPONSES, MessageRule

if TYPE_CHECKING:
    from floodmark.backends.sim.cluster import SimCluster


# What a message fault's shape names -> the simulator's message type names.
ZOOKEEPER_REPLIES = "zookeeper-reply"


def message_types(message: str) -> frozenset[str]:
    return ZK_RESPONSES if message == ZOOKEEPER_REPLIES else frozenset({message})


class SimFaultApplier:
    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.world = cluster.world
        # Per plan in force, what undoes it: a list, first in first out, so two equal plans
        # in force at once each heal their own.
        self._undo: dict[FaultPlan, list[Any]] = {}
        # Per node, the clock faults in force on it, oldest first, each with the clock's state
        # before it: healing one restores that state under whatever came after it.
        self._clocks: dict[str, list[tuple[FaultPlan, ClockState]]] = {}
        self._strobes: dict[FaultPlan, asyncio.Task[None]] = {}
        self._flips: dict[FaultPlan, int] = {}
        self.upgrades = RollingUpgrades(SimUpgradeHands(cluster))

    def refuses(self, kind: str, shape: str) -> str | None:
        return None  # the simulator applies every fault

    async def apply(self, plan: FaultPlan) -> Evidence:
        world = self.world
        if isinstance(plan, NetworkCut):
            cuts = [world.cut(source, destination) for source, destination in plan.links()]
            self._remember(plan, cuts)
            links = plan.links()
            return {"links_down": sum(not world.network.link_up(s, d) for s, d in links), "links": len(links)}
        if isinstance(plan, ProcessCrash):
            node = self.cluster.broker_node(plan.node)
            if not node.is_running():
                return {"skipped": f"{node.name} is not running"}
            pid = node.pid()
            if plan.mode == "terminate":
                clean = await node.shut_down()
                return {"pid": pid, "running": node.is_running(), "stopped_cleanly": clean}
            death = node.kill_process() if plan.mode == "kill" else node.power_loss()
            return {"pid": pid, "running": node.is_running(), "tasks_cancelled": death.tasks_cancelled,
                    "requests_broken": death.requests_broken, "lost_unsynced_bytes": death.disk.unsynced_bytes,
                    "lost_metadata_changes": death.disk.uncommitted_changes}
        if isinstance(plan, ProcessPause):
            node = self.cluster.broker_node(plan.node)
            if not node.is_running():
                return {"skipped": f"{node.name} is not running"}
            node.pause()
            self._remember(plan, (node.pid(), world.now()))
            return {"pid": node.pid(), "stopped": node.is_paused()}
        if isinstance(plan, ClockSkew):
            self._push_clocks(plan)
            for name, offset, rate in plan.clocks:
                world.set_clock_offset(name, offset)
                if rate != 1.0:
                    world.set_clock_rate(name, rate)
            evidence: Evidence = {"skew": {name: round(world.clock_skew(name), 6) for name, _, _ in plan.clocks}}
            if any(rate != 1.0 for _, _, rate in plan.clocks):  # a rate moves no clock at once: read it back
                evidence["rate"] = {name: world.node(name).clock.rate for name, _, _ in plan.clocks}
            return evidence
        if isinstance(plan, ClockStrobe):
            self._push_clocks(plan)
            if plan not in self._strobes:  # an equal strobe in force flips these clocks already
                self._flips[plan] = 0
                self._strobes[plan] = world.loop.create_task(self._strobe(plan), name="clock-strobe")
            return {"strobing": list(plan.targets)}
        if isinstance(plan, DiskFault):
            disk = world.disk(plan.node)
            try:
                fault = disk.chmod(plan.directory, 0) if plan.mode == "chmod" else disk.replace_with_file(plan.directory)
            except FileExistsError:  # (where the directory waits is taken: another fault moved it there)
                return {"skipped": f"{plan.directory} of {plan.node} is replaced by a file already"}
            self._remember(plan, fault)
            return {"unusable": unusable(disk, plan.directory)}
        if isinstance(plan, SessionExpiry):
            if not self.cluster.broker_node(plan.node).is_running():
                return {"skipped": f"{plan.node} is not running"}
            expired = world.expire_session(plan.node)
            return {"expired_sessions": [hex(s) for s in expired.session_ids],
                    "ephemerals_deleted": list(expired.ephemerals_deleted)}
        if isinstance(plan, ThreadStall):
            return self._stall(plan)
        if isinstance(plan, DoubleRoll):
            return self.upgrades.start(plan)
        if isinstance(plan, MessageFault):
            rule = MessageRule(
                plan.action, message_types(plan.message),
                sources=None if plan.source is None else frozenset({plan.source}),
                destinations=None if plan.destination is None else frozenset({plan.destination}),
                delay=plan.delay, probability=plan.probability)
            self._remember(plan, world.add_message_rule(rule))
            return {"rule": "in force"}
        raise ValueError(f"the simulator has no way to apply {type(plan).__name__}")

    async def heal(self, plan: FaultPlan) -> Evidence:
        world = self.world
        if isinstance(plan, NetworkCut):
            for cut in self._recall(plan, []):
                world.restore(cut)
            links = plan.links()
            return {"links_up": sum(world.network.link_up(s, d) for s, d in links), "links": len(links)}
        if isinstance(plan, ProcessCrash):
            return restart_crashed(self.cluster.broker_node(plan.node))
        if isinstance(plan, ProcessPause):
            node = self.cluster.broker_node(plan.node)
            pid, paused_at = self._recall(plan, (None, world.now()))
            if pid is None or node.pid() != pid:
                return {"resumed": {"node": node.name, "gone": True}}
            registered = world.zk.exists(zk_layout.broker_path(node.broker_id or 0)) is not None
            held = self._paused_by_another(node.name, pid)
            if not held:
                node.resume()
            return {"resumed": {"node": node.name, "paused_for": round(world.now() - paused_at, 6),
                                **session_expired(plan, registered), **({"still_paused": True} if held else {})}}
        if isinstance(plan, ClockSkew | ClockStrobe):
            healed: Evidence = {}
            equal = sum(p == plan for stack in self._clocks.values() for p, _ in stack) // max(len(plan.nodes), 1)
            if equal <= 1:  # no equal strobe stays in force to flip these clocks
                await stop_strobe(self._strobes, plan)
                if plan in self._flips:
                    healed["flips"] = self._flips.pop(plan)
            for name in plan.nodes:
                self._pop_clock(name, plan)
            return {"skew": {name: round(world.clock_skew(name), 6) for name in plan.nodes}, **healed}
        if isinstance(plan, DiskFault):
            fault = self._recall(plan, None)
            disk = world.disk(plan.node)
            if fault is not None:
                disk.heal_fault(fault)
            usable = not unusable(disk, plan.directory)
            # As on real nodes: the broker keeps a failed directory offline until it restarts.
            node = self.cluster.broker_node(plan.node)
            if not node.is_running():
                return {"usable": usable, "restarted": None}
            clean = await node.shut_down()
            node.start()
            return {"usable": usable, "restarted": {"node": node.name, "pid": node.pid(), "stopped_cleanly": clean}}
        if isinstance(plan, SessionExpiry):
            return {}  # the broker opens a new session itself, as after a real expiry
        if isinstance(plan, ThreadStall):
            return self._release(plan)
        if isinstance(plan, DoubleRoll):
            return await self.upgrades.finish(plan)  # an upgrade is not undone
        if isinstance(plan, MessageFault):
            rule = self._recall(plan, None)
            if rule is None:
                return {}
            world.remove_message_rule(rule)
            return {"rule": rule.evidence()}
        raise ValueError(f"the simulator has no way to heal {type(plan).__name__}")

    async def heal_all(self, kinds: tuple[str, ...]) -> dict[str, Evidence]:
        for plan in list(self._strobes):
            await stop_strobe(self._strobes, plan)
        self._flips.clear()
        report: dict[str, Evidence] = {}
        if "upgrade" in kinds:  # first: a roll that ends restarts brokers; crashes are healed after
            report["upgrade"] = await self.upgrades.finish_all()
        if "failover" in kinds:  # its steps act as these kinds (nemesis.failover)
            kinds = (*kinds, *(k for k in FAILOVER_PLAN_KINDS if k not in kinds))
        for kind in sorted((k for k in kinds if k not in ("upgrade", "failover")),
                           key=lambda k: k in ("kill", "power")):
            try:
                report[kind] = await self._restart_healed_disks() if kind == "disk" else self._heal_kind(kind)
            except Exception as e:  # noqa: BLE001 - every other kind must still be healed
                report[kind] = {"error": f"{type(e).__name__}: {e}"}
        self._undo = {p: u for p, u in self._undo.items() if p.kind not in kinds}
        return report

    def _heal_kind(self, kind: str) -> Evidence:
        world, brokers = self.world, self.cluster.broker_nodes
        if kind == "partition":
            world.heal()
            return {"healed": True}
        if kind == "clock":
            self._clocks.clear()
            for node in brokers:
                world.reset_clock(node.name)
            return {"reset": [n.name for n in brokers]}
        if kind == "pause":
            resumed = [n.name for n in brokers if n.is_paused()]
            for node in brokers:
                if node.is_paused():
                    node.resume()
            return {"resumed": resumed}
        if kind == "message":
            return {"rules_removed": [rule.evidence() for rule in world.remove_message_rules()]}
        if kind == "stall":
            released = [plan for plan, undo in self._undo.items() if isinstance(plan, ThreadStall) for _ in undo]
            return {"released": [self._release(plan) for plan in released]}
        if kind in ("kill", "power"):
            restarted = {}
            for node in brokers:
                if not node.is_running():
                    node.start()
                    restarted[node.name] = node.pid()
            return {"restarted": restarted}
        return {}  # session: nothing stays broken

    async def _restart_healed_disks(self) -> Evidence:
        """Heal every disk fault, and restart each running broker that had one: as on real
        nodes, a broker keeps a failed directory offline until it restarts (KIP-112)."""
        healed = {n.name: len(self.world.disk(n.name).heal()) for n in self.cluster.broker_nodes}
        restarted: Evidence = {}
        for node in self.cluster.broker_nodes:
            if healed[node.name] and node.is_running():
                clean = await node.shut_down()
                node.start()
                restarted[node.name] = {"pid": node.pid(), "stopped_cleanly": clean}
        evidence: Evidence = {"healed": {name: count for name, count in healed.items() if count}}
        if restarted:
            evidence["restarted"] = restarted
        return evidence

    def _remember(self, plan: FaultPlan, undo: Any) -> None:
        self._undo.setdefault(plan, []).append(undo)

    def _recall(self, plan: FaultPlan, default: Any) -> Any:
        """What undoes the oldest of the equal plans in force (``default``: none is)."""
        undo = self._undo.get(plan)
        if not undo:
            return default
        first = undo.pop(0)
        if not undo:
            del self._undo[plan]
        return first

    def _paused_by_another(self, node: str, pid: int) -> bool:
        """Does another pause in force still hold this process?"""
        # Only a pause's undo is a (pid, paused at) pair: look inside no other fault's.
        return any(isinstance(plan, ProcessPause) and plan.node == node
                   and any(held_pid == pid for held_pid, _ in undo)
                   for plan, undo in self._undo.items())

    def _push_clocks(self, plan: ClockSkew | ClockStrobe) -> None:
        for name in plan.nodes:
            clock = self.world.node(name).clock
            self._clocks.setdefault(name, []).append((plan, (clock.offset, clock.rate, clock.since)))

    def _pop_clock(self, name: str, plan: FaultPlan) -> None:
        """End ``plan``'s hold on the node's clock: the latest fault gives the clock back as it
        was before it; an earlier one hands its state to the fault after it."""
        stack = self._clocks.get(name, [])
        at = next((i for i, (p, _) in enumerate(stack) if p == plan), None)
        if at is None:  # not remembered (healed by heal-all meanwhile): true time, as before
            self.world.reset_clock(name)
            return
        _, before = stack.pop(at)
        if at < len(stack):  # a later fault is in force: it now gives back what this one found
            stack[at] = (stack[at][0], before)
        elif before[0] == 0.0 and before[1] == 1.0:
            self.world.reset_clock(name)
        else:
            restore_clock(self.world.node(name).clock, before)
        if not stack:
            self._clocks.pop(name, None)

    def _latest_clock(self, name: str) -> FaultPlan | None:
        stack = self._clocks.get(name)
        return stack[-1][0] if stack else None

    def _stall(self, plan: ThreadStall) -> Evidence:
        node = self.cluster.broker_node(plan.node)
        broker = node.broker
        if not node.is_running() or broker is None or broker.controller is None:
            return {"skipped": f"{plan.node} is not running a controller"}
        controller = broker.controller
        struck: Evidence = {}

        def on_strike() -> None:  # the thread is stuck mid-event
            struck["events_handled"] = controller.events_handled
            if plan.expire_session:  # KAFKA-6082: its session goes while it is stuck
                done = self.world.expire_session(plan.node)
                struck["session"] = {"expired_sessions": [hex(s) for s in done.session_ids],
                                     "ephemerals_deleted": list(done.ephemerals_deleted)}

        stall = self.world.stall_task(plan.node, event_thread_name(controller.broker_id), on_strike)
        self._remember(plan, (stall, controller, struck))
        return {"stalled": stall.task_name, "was_active": controller.is_active}

    def _release(self, plan: ThreadStall) -> Evidence:
        undo = self._recall(plan, None)
        if undo is None:
            return {}
        stall, controller, struck = undo
        evidence: Evidence = {"struck_at": None if stall.struck_at is None else round(stall.struck_at, 6),
                              "held": stall.holds}
        if stall.struck_at is not None:
            # What the stall withheld: nothing finished while stuck, and what queued behind it.
            evidence["events_handled_while_stuck"] = controller.events_handled - struck["events_handled"]
            evidence["events_waiting"] = controller.events_waiting
            if plan.expire_session:
                evidence["session"] = struck["session"]
        self.world.release_stall(plan.node, stall)
        return evidence

    async def _strobe(self, plan: ClockStrobe) -> None:
        skewed = False
        while True:
            await asyncio.sleep(plan.period)
            skewed = not skewed
            self._flips[plan] = self._flips.get(plan, 0) + 1
            for name in plan.targets:
                if self._latest_clock(name) == plan:  # a clock fault applied after it rules the clock
                    self.world.set_clock_offset(name, plan.delta if skewed else 0.0)


ClockState = tuple[float, float, float]  # a SimClock's offset, rate and since


def restore_clock(clock: SimClock, state: ClockState) -> None:
    """Give a node's clock back the state it had (an earlier clock fault's, still in force)."""
    clock.offset, clock.rate, clock.since = state


def unusable(disk: SimDisk, directory: str) -> bool:
    """Does the broker's next use of the directory fail, as the fault promises?"""
    try:
        disk.list_dir(directory)
    except OSError:
        return True
    return False


class SimUpgradeHands:
    """An upgrade's hands in the simulator: a broker's version is its node's ``BrokerConfig``."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster

    def configure(self, node: str, version: str) -> None:
        self.cluster.broker_node(node).set_inter_broker_protocol(version)

    async def held(self, node: str) -> str | None:
        broker = self.cluster.broker_node(node)
        if not broker.is_running():
            return "not running"
        return "paused" if broker.is_paused() else None

    async def pid(self, node: str) -> int | None:
        return self.cluster.broker_node(node).pid()

    async def restart(self, node: str) -> None:
        broker = self.cluster.broker_node(node)
        await broker.shut_down()
        broker.start()

    async def start_if_down(self, node: str) -> bool:
        broker = self.cluster.broker_node(node)
        if broker.is_running():
            return False
        broker.start()
        return True

    async def registration(self, broker_id: int) -> zk_layout.BrokerRegistration | None:
        zk = self.cluster.world.zk
        path = zk_layout.broker_path(broker_id)
        stat = zk.exists(path)
        if stat is None:
            return None
        return zk_layout.decode_broker(broker_id, zk.get(path)[0], stat.czxid)

    async def out_of_isr(self, broker_id: int) -> list[tuple[str, int]]:
        zk = self.cluster.world.zk
        topics = zk.children(zk_layout.TOPICS) if zk.exists(zk_layout.TOPICS) is not None else []
        return zk_view.out_of_isr(zk.read, broker_id, topics)
