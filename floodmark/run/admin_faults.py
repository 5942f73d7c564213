"""Admin faults applied: the operator's hands, through the admin client, on every backend.

A backend applies what happens *to* nodes (cuts, signals, clocks, disks). An admin fault is
something an operator asks the cluster to do (move replicas, elect preferred leaders, add
partitions), so it goes through the reference admin client against the cluster's ZooKeeper,
the same way on real and simulated clusters: a client runtime from the run's client host.
:class:`FaultRouter` hands admin plans here and everything else to the backend.

Each operation proves it took effect from what the cluster did, not from the request being
written: a reassignment the controller took up (pending or complete), a preferred election
the controller consumed, partitions that now exist with a leader. Healing a cancellable
reassignment cancels what has not completed (KIP-236); heal-all leaves a running
reassignment to finish, as an operator would after an incident.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from floodmark.harness.faults import (
    Evidence,
    FaultApplier,
    FaultPlan,
    PartitionsAdded,
    PreferredElection,
    Reassignment,
)
from floodmark.reference.client.admin import Admin, AdminError
from floodmark.reference.protocol import zk_layout
from floodmark.reference.protocol.messages import TopicPartition
from floodmark.reference.runtime import Runtime
from floodmark.workloads.clients import ClientHost

SETTLE = 5.0  # seconds an operation gets to be taken up by the controller before it is judged
POLL = 0.25


class AdminFaults:
    """Applies admin plans through the admin client, one client session per operation."""

    def __init__(self, host: Callable[[], ClientHost]) -> None:
        self.host = host  # the run's client host, once the cluster is up
        self.sessions = 0
        self.originals: dict[Reassignment, dict[str, list[int]]] = {}  # what a cancel goes back to

    @contextlib.asynccontextmanager
    async def _admin(self) -> AsyncIterator[tuple[Admin, Runtime]]:
        self.sessions += 1  # sessions named by a counter: the simulator seeds each by name
        host = self.host()
        runtime = host.session(f"admin-fault-{self.sessions}")
        try:
            admin = await Admin.connect(runtime)
            try:
                yield admin, runtime
            finally:
                await admin.close()
        finally:
            await host.end_session(runtime)

    async def apply(self, plan: FaultPlan) -> Evidence:
        async with self._admin() as (admin, runtime):
            if isinstance(plan, Reassignment):
                return await self._reassign(admin, runtime, plan)
            if isinstance(plan, PreferredElection):
                return await self._elect_preferred(admin, runtime, plan)
            if isinstance(plan, PartitionsAdded):
                return await self._add_partitions(admin, runtime, plan)
        raise ValueError(f"not an admin fault: {type(plan).__name__}")

    async def heal(self, plan: FaultPlan) -> Evidence:
        if not isinstance(plan, Reassignment):
            return {}
        async with self._admin() as (admin, runtime):
            targets = _targets(plan)
            before = await admin.reassign_verify(targets)
            pending = [tp for tp, status in before.items() if status == "in progress"]
            evidence: Evidence = {"status": _named(before)}
            if plan.cancel_on_heal and pending:
                try:
                    await admin.reassign_cancel(pending)
                except AdminError as e:  # completed meanwhile, or a cancellation already pending
                    evidence["cancel"] = f"not sent: {e}"
                    return evidence
                evidence["cancel"] = "sent"
                after = await _replicas_once_settled(admin, runtime, plan)
                evidence["replicas_after_cancel"] = after
                evidence["cancel_outcome"] = _cancel_outcome(plan, self.originals.get(plan, {}), after)
            return evidence

    async def heal_all(self) -> Evidence:
        async with self._admin() as (admin, _):
            pending = await admin.zk.exists(zk_layout.REASSIGN_PARTITIONS)
        return {"reassignment_running": pending is not None}

    # ------------------------------------------------------------------ operations

    async def _reassign(self, admin: Admin, runtime: Runtime, plan: Reassignment) -> Evidence:
        targets = _targets(plan)
        try:
            entries = await admin.reassign_execute(targets)
        except AdminError as e:  # a reassignment already running, a broker not registered
            return {"skipped": str(e)}
        status = await admin.reassign_verify(targets)
        original = self.originals[plan] = {f"{e.topic}/{e.partition}": list(e.original_replicas) for e in entries}
        return {"original": original,
                "status": _named(status),
                "taken_up": all(s in ("in progress", "complete") for s in status.values())}

    async def _elect_preferred(self, admin: Admin, runtime: Runtime, plan: PreferredElection) -> Evidence:
        partitions = [TopicPartition(topic, partition) for topic, partition in plan.partitions]
        try:
            await admin.preferred_replica_election(partitions)
        except AdminError as e:
            return {"skipped": str(e)}
        deadline = runtime.monotonic() + SETTLE
        while await admin.zk.exists(zk_layout.PREFERRED_REPLICA_ELECTION) is not None:
            if runtime.monotonic() >= deadline:
                return {"consumed": False}
            await runtime.sleep(POLL)
        leaders = {f"{d.topic}/{p.partition}": p.leader
                   for d in await admin.describe_topics(sorted({t for t, _ in plan.partitions}))
                   for p in d.partitions}
        return {"consumed": True, "leaders_after": leaders}

    async def _add_partitions(self, admin: Admin, runtime: Runtime, plan: PartitionsAdded) -> Evidence:
        try:
            assignment = await admin.alter_partitions(plan.topic, plan.count)
        except AdminError as e:
            return {"skipped": str(e)}
        deadline = runtime.monotonic() + SETTLE
        while True:
            leaders = {p.partition: p.leader for d in await admin.describe_topics([plan.topic])
                       for p in d.partitions}
            led = sorted(p for p, leader in leaders.items() if leader >= 0)
            if len(led) >= plan.count or runtime.monotonic() >= deadline:
                return {"partitions": len(assignment.partitions), "led": len(led)}
            await runtime.sleep(POLL)


def _targets(plan: Reassignment) -> list[zk_layout.Reassignment]:
    # The original replicas are the admin client's to record (it reads them when it starts).
    return [zk_layout.Reassignment(topic, partition, replicas, ()) for topic, partition, replicas in plan.moves]


def _named(status: dict[TopicPartition, Any]) -> dict[str, Any]:
    # By name: TopicPartition does not order, and a move may name several partitions.
    return {f"{tp.topic}/{tp.partition}": value
            for tp, value in sorted(status.items(), key=lambda item: (item[0].topic, item[0].partition))}


def _cancel_outcome(plan: Reassignment, original: dict[str, list[int]], after: dict[str, list[int]]) -> str:
    """What a cancellation came to: the move went back, or had completed before the
    controller read the cancellation (both are KIP-236's contract; anything else is not)."""
    target = {f"{topic}/{partition}": list(replicas) for topic, partition, replicas in plan.moves}
    if after == original:
        return "reverted"
    if after == target:
        return "completed before the cancellation"
    return "neither the original nor the target replicas"


async def _replicas_once_settled(admin: Admin, runtime: Runtime, plan: Reassignment) -> dict[str, list[int]]:
    """The partitions' replicas once the controller has dealt with the cancellation."""
    deadline = runtime.monotonic() + SETTLE
    while (await admin.zk.exists(zk_layout.REASSIGN_CANCEL) is not None
           and runtime.monotonic() < deadline):
        await runtime.sleep(POLL)
    replicas: dict[str, list[int]] = {}
    for topic, partition, _ in plan.moves:
        data, _ = await admin.zk.get(zk_layout.topic_path(topic))
        replicas[f"{topic}/{partition}"] = list(zk_layout.decode_topic(topic, data).partitions.get(partition, ()))
    return replicas


def refuses(kind: str, shape: str, backend_refuses: Callable[[str, str], str | None]) -> str | None:
    """Why a fault cannot be applied: admin faults never (the harness applies them on every
    backend), every other kind as the backend says."""
    return None if kind == "admin" else backend_refuses(kind, shape)


class FaultRouter:
    """A run's fault applier: admin plans to :class:`AdminFaults`, the rest to the backend."""

    def __init__(self, backend: FaultApplier, admin: AdminFaults) -> None:
        self.backend = backend
        self.admin = admin

    def refuses(self, kind: str, shape: str) -> str | None:
        return refuses(kind, shape, self.backend.refuses)

    async def apply(self, plan: FaultPlan) -> Evidence:
        return await (self.admin.apply(plan) if plan.kind == "admin" else self.backend.apply(plan))

    async def heal(self, plan: FaultPlan) -> Evidence:
        return await (self.admin.heal(plan) if plan.kind == "admin" else self.backend.heal(plan))

    async def heal_all(self, kinds: tuple[str, ...]) -> dict[str, Evidence]:
        healed = dict(await self.backend.heal_all(tuple(k for k in kinds if k != "admin")))
        if "admin" in kinds:
            try:
                healed["admin"] = await self.admin.heal_all()
            except Exception as e:  # noqa: BLE001 - reported like any kind that could not be healed
                healed["admin"] = {"error": f"{type(e).__name__}: {e}"}
        return healed
