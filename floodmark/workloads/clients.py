"""Client sessions: a workload process's view of the cluster, and how outcomes are classified.

A workload worker acts through a *session*: the clients of its current process. When the
process is retired after an unknown outcome, the session is closed and a new one opened, so
the new process starts with its own consumer and metadata. Its ops are still independent of
the old process's: that one's unknown send stays unknown whatever the new one does.

Sessions come from a :class:`ClientHost`, which the backend provides: real processes on
sockets, or nodes of the simulated world; the workload never knows which. What the sessions
of a run share is what a Kafka producer shared by the threads of one JVM shares. One
connection per broker: the requests that many workers issue in the same turn of the event
loop leave in one write and their responses arrive in one read, a system call per turn, not
per request. And one producer per acks setting: the sends to a partition made in the same turn (or, with
the test's ``linger``, within that long) travel as one batch
(:mod:`floodmark.reference.client.accumulator`). Every op is still invoked and completed on
its own, with its own outcome: a send's is its batch's (ok at its own offset, failed, or
unknown), and a connection that breaks fails every request in flight on it.

Sessions turn everything the client library reports into the history's three outcomes:

* ``ok``: the broker acknowledged the request;
* ``fail``: it certainly did not happen: an error after which the broker wrote nothing
  (``Errors.DEFINITELY_NOT_WRITTEN``), or a request that was never sent (no leader known,
  connection refused);
* ``info``: unknown: a timeout, a connection lost after sending, an ambiguous error such as
  NOT_ENOUGH_REPLICAS_AFTER_APPEND.

Reads (fetches) never change the log, so a fetch that goes wrong is simply an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from floodmark.frozen_init import fast_frozen_init
from floodmark.harness.config import TestConfig
from floodmark.harness.generator import CompletionType
from floodmark.reference.client.accumulator import SendAccumulator
from floodmark.reference.client.admin import Admin
from floodmark.reference.client.consumer import Consumer
from floodmark.reference.client.metadata import ClientMetadata
from floodmark.reference.client.producer import Producer
from floodmark.reference.protocol import zk_layout
from floodmark.reference.protocol.messages import Errors, TopicPartition
from floodmark.reference.runtime import CoordinationError, Runtime


@fast_frozen_init
@dataclass(frozen=True)
class SendOutcome:
    type: CompletionType
    offset: int | None = None
    error: str | None = None
    node: str | None = None


@fast_frozen_init
@dataclass(frozen=True)
class FetchOutcome:
    error: str | None = None
    records: tuple[tuple[int, str], ...] = ()  # (offset, value), contiguous from the fetch offset
    high_watermark: int = -1
    node: str | None = None
    out_of_range: bool = False  # the fetch offset is outside the leader's log
    log_end: int = -1  # the leader's log end offset (-1: not known)


class ClientSession(Protocol):
    async def send(self, topic: str, partition: int, value: str, acks: int) -> SendOutcome: ...

    async def fetch(self, topic: str, partition: int, offset: int, max_records: int) -> FetchOutcome: ...

    async def close(self) -> None: ...


class ClientFactory(Protocol):
    async def open(self, name: str) -> ClientSession:
        """Open the clients of a new process (``name`` names it in logs)."""
        ...


class SessionWorker:
    """A worker's client session: opened on first use, closed when the worker's process ends.

    The queue and log-lin workers share this; each sets ``clients``, ``worker`` and
    ``session`` (None) in its ``__init__``.
    """

    clients: ClientFactory
    worker: int
    session: ClientSession | None

    async def _session(self) -> ClientSession:
        if self.session is None:
            self.session = await self.clients.open(f"w{self.worker}")
        return self.session

    async def reopen(self) -> None:
        await self.close()

    async def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.close()


class ClientHost(Protocol):
    """Where a run's client runtimes come from: processes on real sockets, or simulated nodes.

    Workloads do not know which backend runs them; the backend hands them a host. Every
    session runtime shares the host's connections (one per broker), but owns its tasks.
    """

    def connections(self) -> Runtime:
        """The runtime whose network every session shares (and the producers use)."""
        ...

    def session(self, label: str) -> Runtime:
        """A new runtime for one client process, named ``label`` in logs."""
        ...

    async def end_session(self, runtime: Runtime) -> None:
        """Release a session runtime (its tasks; never the shared connections)."""
        ...

    async def close(self) -> None:
        """Close the shared connections."""
        ...


class LibrarySession:
    """A process's clients from the reference client library, on their own client runtime."""

    def __init__(self, host: ClientHost, runtime: Runtime, bootstrap: Sequence[str], op_timeout: float,
                 senders: Callable[[int], SendAccumulator]) -> None:
        self.host = host
        self.runtime = runtime
        self.bootstrap = list(bootstrap)
        self.op_timeout = op_timeout
        self.metadata = ClientMetadata(runtime, self.bootstrap)
        self.senders = senders  # the run's producer (batching) for an acks setting
        self.consumer = Consumer(runtime, self.bootstrap, metadata=self.metadata)

    async def send(self, topic: str, partition: int, value: str, acks: int) -> SendOutcome:
        result = await self.senders(acks).send(topic, partition, value, timeout=self.op_timeout)
        return SendOutcome(_SEND_TYPES[result.status], offset=result.offset, error=result.error)

    async def fetch(self, topic: str, partition: int, offset: int, max_records: int) -> FetchOutcome:
        result = await self.consumer.fetch(topic, partition, offset, timeout=self.op_timeout, max_records=max_records)
        if result.error is not None:
            return FetchOutcome(error=result.error, high_watermark=result.high_watermark,
                                out_of_range=result.error == Errors.OFFSET_OUT_OF_RANGE)
        records = tuple((r.offset, r.value) for r in result.records)
        return FetchOutcome(records=records, high_watermark=result.high_watermark, log_end=result.log_end)

    async def close(self) -> None:
        await self.host.end_session(self.runtime)


_SEND_TYPES: dict[str, CompletionType] = {"ok": "ok", "failed": "fail", "unknown": "info"}


class LibraryClients:
    """Opens sessions on the cluster, and the admin work the runner needs (topics, recovery)."""

    def __init__(self, config: TestConfig, host: ClientHost, bootstrap: Sequence[str]) -> None:
        self.config = config
        self.host = host
        self.bootstrap = list(bootstrap)
        self.opened = 0
        # The producers that batch every session's sends, one per acks setting.
        self._senders: dict[int, SendAccumulator] = {}

    def senders(self, acks: int) -> SendAccumulator:
        sender = self._senders.get(acks)
        if sender is None:
            producer = Producer(self.host.connections(), self.bootstrap, acks=acks)
            sender = self._senders[acks] = SendAccumulator(producer, self.config.linger)
        return sender

    def _runtime(self, name: str) -> Runtime:
        self.opened += 1
        # Named by a counter, so a backend can seed each deterministically.
        return self.host.session(f"client-{name}-{self.opened}")

    async def open(self, name: str) -> LibrarySession:
        return LibrarySession(self.host, self._runtime(name), self.bootstrap, self.config.op_timeout, self.senders)

    async def close(self) -> None:
        """Close the shared connections and producers (sessions still open lose theirs)."""
        await self.host.close()
        self._senders.clear()

    async def create_topics(self, timeout: float = 60.0) -> None:
        """Create t0..tN-1 once every broker has registered, and wait until each partition
        has a leader and a whole ISR."""
        runtime = self._runtime("admin")
        deadline = runtime.monotonic() + timeout
        try:
            async with await Admin.connect(runtime, bootstrap=self.bootstrap) as admin:
                while len(await admin.brokers()) < self.config.nodes:
                    if runtime.monotonic() >= deadline:
                        raise TimeoutError(f"fewer than {self.config.nodes} brokers registered after {timeout:.0f} s")
                    await runtime.sleep(0.2)
                existing = set(await admin.list_topics())
                for topic in self.config.topic_names:
                    if topic in existing:
                        continue
                    await admin.create_topic(
                        topic, self.config.partitions, self.config.replication_factor,
                        {zk_layout.MIN_INSYNC_REPLICAS: str(self.config.min_insync_replicas)},
                    )
            unhealthy, _ = await self._wait_healthy(runtime, max(1.0, deadline - runtime.monotonic()))
            if unhealthy:
                raise TimeoutError(f"topics had no leader with a whole ISR after {timeout:.0f} s: "
                                   f"{', '.join(problem_lines(unhealthy)[:5])}")
        finally:
            await self.host.end_session(runtime)

    async def wait_for_recovery(self, timeout: float) -> list[str]:
        """Wait until every partition has a leader and at least min.insync.replicas in its ISR;
        returns the partitions that had not, each with why (empty: recovered).

        Not a whole ISR: the final reads need only a leader that can serve them, and a
        replica that is still catching up must not hold them back.
        """
        runtime = self._runtime("recovery")
        try:
            return problem_lines((await self._wait_healthy(runtime, timeout, self.config.min_insync_replicas))[0])
        finally:
            await self.host.end_session(runtime)

    async def await_full_isr(self, timeout: float) -> IsrWait:
        """Wait until every partition's ISR holds all its replicas (no partition
        under-replicated, as Kafka's operators check), at most ``timeout`` seconds: every
        partition of the test's topics, those an admin fault added too, each held to its
        replicas as the metadata has them then (a reassignment's, once it moved them); and, in the
        time left, until ZooKeeper names a controller (brokers' metadata lists the ISRs they last
        heard of, whole or not, even when no controller is left to change them)."""
        runtime = self._runtime("replicas")
        began = runtime.monotonic()

        def left() -> float:
            return max(0.0, timeout - (runtime.monotonic() - began))

        try:
            assigned = await self._assigned_partitions(runtime)
            short, replicas = await self._wait_healthy(runtime, left(), None, added=True, assigned=assigned)
            controller = await self._await_controller(runtime, left())
        finally:
            await self.host.end_session(runtime)
        checked = tuple((topic, number, held) for (topic, number), held in sorted(replicas.items()))
        return IsrWait(round(runtime.monotonic() - began, 3), timeout, tuple(short), checked, controller)

    async def _await_controller(self, runtime: Runtime, timeout: float) -> int | None:
        """The broker ZooKeeper names as controller, waiting up to ``timeout`` for one: -1 if
        none was named by then, None if ZooKeeper could not be read."""
        deadline = runtime.monotonic() + timeout
        try:
            async with await Admin.connect(runtime, bootstrap=self.bootstrap) as admin:
                while (controller := await admin.controller()) < 0 and runtime.monotonic() < deadline:
                    await runtime.sleep(0.25)
                return controller
        except (ConnectionError, TimeoutError, OSError, CoordinationError, zk_layout.LayoutError):
            return None

    async def _assigned_partitions(self, runtime: Runtime) -> list[tuple[str, int]]:
        """The test's topics' partitions as ZooKeeper assigns them, those an admin fault added
        included: a broker whose metadata has not caught up yet does not list them, and the
        wait must not take its silence for their absence. Empty when ZooKeeper cannot be read
        (the wait then holds what the metadata lists, and the convergence checker names any
        partition the node events show that it did not check)."""
        try:
            async with await Admin.connect(runtime, bootstrap=self.bootstrap) as admin:
                return [(tp.topic, tp.partition) for tp in await admin.assigned_partitions(self.config.topic_names)]
        except (ConnectionError, TimeoutError, OSError, CoordinationError, zk_layout.LayoutError):
            return []

    async def _wait_healthy(self, runtime: Runtime, timeout: float, min_isr: int | None = None, *,
                            added: bool = False, assigned: Sequence[tuple[str, int]] = (),
                            ) -> tuple[list[Unhealthy], dict[tuple[str, int], tuple[int, ...]]]:
        """Until each partition has a leader and an ISR of ``min_isr`` (None: all replicas);
        returns the partitions still short of that at the deadline, each with why, and the
        replicas each partition was held to (as last listed; none where the metadata lacks it).
        ``added``: every partition the metadata lists of the test's topics, not only those
        test.yaml declares; once listed, one stays wanted (a broker behind may not list it).
        ``assigned``: partitions wanted from the start besides those test.yaml declares."""
        metadata = ClientMetadata(runtime, self.bootstrap)
        deadline = runtime.monotonic() + timeout
        wanted = set(self.config.topic_partitions) | set(assigned)
        while True:
            problems: list[Unhealthy] = [(None, None, "no broker answered the metadata request")]
            if await metadata.refresh(list(self.config.topic_names)):
                if added:  # (a broker that does not know a topic yet answers for partition -1: none)
                    wanted.update((tp.topic, tp.partition) for tp in metadata.partitions if tp.partition >= 0)
                problems = [(topic, number, why) for topic, number in sorted(wanted)
                            if (why := partition_unhealthy(metadata, topic, number, min_isr)) is not None]
            if not problems or runtime.monotonic() >= deadline:
                listed = metadata.partitions
                return problems, {key: tuple(p.replicas) if (p := listed.get(TopicPartition(*key))) else ()
                                  for key in sorted(wanted)}
            await runtime.sleep(0.25)


# A partition that is not as wanted: (topic, partition, why); (None, None, why) for the
# whole cluster (no broker answered).
Unhealthy = tuple[str | None, int | None, str]


def problem_lines(problems: Sequence[Unhealthy]) -> list[str]:
    """Each problem as a line of a message: ``topic/partition: why``, or ``metadata: why``."""
    return [f"{topic}/{number}: {why}" if topic is not None else f"metadata: {why}" for topic, number, why in problems]


@dataclass(frozen=True)
class IsrWait:
    """The runner's wait for whole ISRs after the final reads (judged by
    :mod:`floodmark.checkers.convergence`): the seconds waited, the limit, each partition
    still short at the limit, with why, and each partition it checked with the replicas it
    held that partition's ISR to (none: the metadata did not list it); and the controller
    ZooKeeper named at its end (-1: none; None: ZooKeeper could not be read)."""

    waited: float
    timeout: float
    short: tuple[Unhealthy, ...]
    checked: tuple[tuple[str, int, tuple[int, ...]], ...] = ()
    controller: int | None = None

    def value(self) -> dict[str, Any]:
        """The wait as the history records it (``topic`` None: no broker answered; no
        ``controller`` when ZooKeeper could not be read)."""
        value: dict[str, Any] = {
            "waited": self.waited, "timeout": self.timeout,
            "short": [{"topic": topic, "partition": number, "why": why} for topic, number, why in self.short],
            "checked": [{"topic": topic, "partition": number, "replicas": list(replicas)}
                        for topic, number, replicas in self.checked]}
        if self.controller is not None:
            value["controller"] = self.controller
        return value


def partition_unhealthy(metadata: ClientMetadata, topic: str, number: int, min_isr: int | None) -> str | None:
    """Why the partition cannot serve the final reads yet, or None."""
    p = metadata.partitions.get(TopicPartition(topic, number))
    if p is None:
        return "not in the metadata"
    if p.error is not None:
        return f"error {p.error}"
    if p.leader < 0:
        return f"no leader (ISR {list(p.isr)}, offline replicas {list(p.offline_replicas)})"
    wanted = len(p.replicas) if min_isr is None else min_isr
    if len(p.isr) < wanted or (min_isr is None and set(p.isr) != set(p.replicas)):
        return f"ISR {list(p.isr)} of replicas {list(p.replicas)}, below {wanted}"
    return None
