"""StrongIsr while an admission is in flight: a leader's HW must wait for the follower it admits.

A leader that proposes a follower for its ISR cannot know when the write lands: it may land
at once, and from then on the follower counts as holding every record below the HW. So from
the moment of the proposal the leader counts the follower in the HW (KIP-497's maximal ISR):
the HW is the minimum log end over the ISR *and* the joiner. A leader that forgets the joiner
lets its HW run ahead of it while the write is in flight; when the write lands the ISR holds
a member that lacks committed records, and if the leader fails before the joiner fetches
them, the controller may elect the joiner and lose them.

No other invariant sees this: StrongIsr (``isr-member-lacks-committed``) can order a
follower's appends against a leader's commits only as "ever held", and the joiner does fetch
the records, a moment later. Only the leader knows, in its own order, both its HW and what
the joiner had reported when the expansion landed (``isr_changed``'s ``joined_progress``). So
this check reads one node's events at a time and compares nothing across nodes: at an
expansion, the leader's HW in that epoch (its own ``became_leader`` and ``hw_changed``) must
not exceed the joiner's progress. Events without ``joined_progress`` (older writers) are not
judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from floodmark.contracts.node_events import (
    BecameLeader,
    HwChanged,
    IsrChanged,
    NodeEvent,
    PartitionKey,
)
from floodmark.contracts.results import Anomaly


def admitted_behind_hw(events: Mapping[str, Sequence[NodeEvent]]) -> list[Anomaly]:
    """Expansions that landed while the leader's HW was beyond what the joiner held."""
    anomalies: list[Anomaly] = []
    for node, story in sorted(events.items()):
        hws: dict[PartitionKey, tuple[int, int]] = {}  # partition -> (leader epoch, HW as leader)
        for event in story:
            body = event.body
            if type(body) is BecameLeader or (type(body) is HwChanged and body.role == "leader"):
                hws[(body.topic, body.partition)] = (body.leader_epoch, body.high_watermark)
            elif type(body) is IsrChanged and body.joined is not None and body.joined_progress is not None:
                key = (body.topic, body.partition)
                epoch, hw = hws.get(key, (None, 0))
                if epoch != body.leader_epoch or hw <= body.joined_progress:
                    continue
                anomalies.append(Anomaly(
                    "isr-admitted-behind-hw",
                    f"{node}, leader of {key[0]}/{key[1]} in epoch {body.leader_epoch}, added broker "
                    f"{body.joined} to its ISR {list(body.isr)} while its HW was {hw} and that broker had "
                    f"reported its log ending at {body.joined_progress}: the HW had not waited for the "
                    f"follower it was admitting, which lacked offsets {body.joined_progress}..{hw - 1}.",
                    key[0], key[1], tuple(range(body.joined_progress, min(hw, body.joined_progress + 100))),
                    events=((node, event.seq),),
                    details={"joined": body.joined, "joined_progress": body.joined_progress,
                             "joined_log_end": body.joined_log_end, "high_watermark": hw,
                             "leader_epoch": body.leader_epoch, "isr": list(body.isr)}))
    return anomalies
