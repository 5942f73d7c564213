"""Test doubles for workload tests: an in-memory log standing in for a cluster's client session."""

from __future__ import annotations

from dataclasses import dataclass, field

from floodmark.workloads.clients import FetchOutcome, SendOutcome


@dataclass
class FakeLogs:
    """Partitions as lists; scripted errors; counts sessions opened and closed."""

    logs: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    send_errors: list[SendOutcome] = field(default_factory=list)  # consumed one per send
    fetch_errors: list[FetchOutcome] = field(default_factory=list)
    opened: int = 0
    closed: int = 0
    hidden_tail: int = 0  # records beyond the HW (appended, not committed)

    async def open(self, name: str) -> FakeSession:
        self.opened += 1
        return FakeSession(self)


class FakeSession:
    def __init__(self, cluster: FakeLogs) -> None:
        self.cluster = cluster

    async def send(self, topic: str, partition: int, value: str, acks: int) -> SendOutcome:
        if self.cluster.send_errors:
            return self.cluster.send_errors.pop(0)
        log = self.cluster.logs.setdefault((topic, partition), [])
        log.append(value)
        return SendOutcome("ok", offset=len(log) - 1, node="n1")

    async def fetch(self, topic: str, partition: int, offset: int, max_records: int) -> FetchOutcome:
        if self.cluster.fetch_errors:
            return self.cluster.fetch_errors.pop(0)
        log = self.cluster.logs.get((topic, partition), [])
        high_watermark = max(0, len(log) - self.cluster.hidden_tail)
        if offset > len(log):
            return FetchOutcome(error="OFFSET_OUT_OF_RANGE", out_of_range=True)
        records = tuple((o, log[o]) for o in range(offset, min(high_watermark, offset + max_records)))
        return FetchOutcome(records=records, high_watermark=high_watermark, node="n1", log_end=len(log))

    async def close(self) -> None:
        self.cluster.closed += 1
