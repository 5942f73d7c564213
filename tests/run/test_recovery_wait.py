"""Before the final reads: which partitions cannot serve yet, and why (named, never silent)."""

from __future__ import annotations

from types import SimpleNamespace

from floodmark.reference.protocol.messages import PartitionMetadata, TopicPartition
from floodmark.workloads.clients import partition_unhealthy


def metadata(*partitions: PartitionMetadata) -> SimpleNamespace:
    return SimpleNamespace(partitions={TopicPartition(p.topic, p.partition): p for p in partitions})


def test_each_partition_that_cannot_serve_is_named_with_why() -> None:
    known = metadata(
        PartitionMetadata("t0", 0, 1, 4, (1, 2, 3), (1, 2)),
        PartitionMetadata("t0", 1, -1, 4, (1, 2, 3), (), offline_replicas=(3,)),
        PartitionMetadata("t0", 2, 2, 4, (1, 2, 3), (2,)),
        PartitionMetadata("t0", 3, 2, 4, (1, 2, 3), (2, 3), error="LEADER_NOT_AVAILABLE"),
    )
    assert partition_unhealthy(known, "t0", 0, 2) is None  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t0", 0, None) == "ISR [1, 2] of replicas [1, 2, 3], below 3"  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t0", 1, 2) == "no leader (ISR [], offline replicas [3])"  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t0", 2, 2) == "ISR [2] of replicas [1, 2, 3], below 2"  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t0", 3, 2) == "error LEADER_NOT_AVAILABLE"  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t1", 0, 2) == "not in the metadata"  # type: ignore[arg-type]
