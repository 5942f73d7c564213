"""What a broker's replicas hold, for a controller that must choose among unclean survivors.

When every replica a partition could be led by recovered from an unclean shutdown, no rule
of the ISR says which of them holds the most: a SIGKILL leaves a log whole, a power loss may
have taken its unsynced tail, and the controller cannot tell the two apart from their
registrations. KIP-966's answer is to ask (GetReplicaLogInfo): each candidate reports the
last leader epoch its log holds and where the log ends, and the controller elects the one
furthest along, by epoch first (a longer log of an older epoch may be one a newer leader
overwrote), then by end offset. This module is the broker's side: it only reads its logs.
"""

from __future__ import annotations

from floodmark.reference.broker.replica_manager import ReplicaManager
from floodmark.reference.protocol.messages import (
    ReplicaLogInfo,
    ReplicaLogInfoRequest,
    ReplicaLogInfoResponse,
)


def handle_replica_log_info(replicas: ReplicaManager, request: ReplicaLogInfoRequest) -> ReplicaLogInfoResponse:
    """Each requested partition's last epoch and log end here, in request order."""
    answers = []
    for tp in request.partitions:
        error = replicas.error_for(tp.topic, tp.partition)
        p = replicas.get(tp.topic, tp.partition)
        if error is not None or p is None:
            answers.append(ReplicaLogInfo(tp.topic, tp.partition, -1, -1, error))
        else:
            answers.append(ReplicaLogInfo(tp.topic, tp.partition, p.log.epoch_cache.latest_epoch, p.log.log_end))
    return ReplicaLogInfoResponse(None, tuple(answers))
