"""The ranges of node events' integer fields: the numbers a node can write in each, and why.

JSON puts no bound on an integer, so a damaged or hostile event file may hold any; read as
it stands, one no node can write gives a wrong verdict, not an error (an acknowledgement at
an offset of 41 digits lies beyond every read and passes as durable; a leader epoch of 23
digits is newer than every election and reads as a self-promoted leader). Each field's range
is what the field is in Kafka's protocol, declared once by field name (the same name means
the same thing in every kind, see :mod:`floodmark.contracts.node_event_kinds`):

- offsets, high watermarks and log ends are int64, from 0;
- leader epochs are int32, from -1 (:data:`~floodmark.contracts.node_event_kinds.NO_EPOCH`,
  "none known"); controller epochs and ZooKeeper versions are int32 (any sign: the protocol
  writes -1 for "none" in messages, and a negative one harms no checker);
- partition numbers are int32, from 0;
- broker ids are int32, from 0 (Kafka's ``broker.id``); a ``leader`` or a fetching
  ``replica`` from -1 (no leader; a fetch from a client);
- ZooKeeper transaction ids (``zxid``) are int64, from 0; a broker's ``incarnation`` (the
  zxid of its registration, Kafka's broker epoch) is int64, from -1 (an unknown one);
- ``acks`` is -1 (all), 0 or 1: a produce of any other is refused, never acknowledged.

A field of a kind may be held tighter where the kind makes a value impossible
(:data:`KIND_RANGES`): a broker that says it leads has a leader epoch from 0, never -1.
Every integer field of every known kind has a range: a kind declaring one without it fails
when the schemas are built, so a new field is bounded deliberately or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_HIGHEST = {INT32_MAX: "2**31-1", INT64_MAX: "2**63-1"}


@dataclass(frozen=True, slots=True)
class Range:
    """What a field's integers may be: from ``lowest`` to ``highest``. ``what``: what the
    field must be (a message's words for a value below ``lowest``, or for any value out of
    range when ``why`` is None); ``why``: why no value beyond ``highest`` can be written
    (the field's width in the protocol)."""

    lowest: int
    highest: int
    what: str
    why: str | None

    def problem(self, name: str, value: int) -> str | None:
        """Why ``value`` cannot be field ``name``'s, or None."""
        if value < self.lowest or (value > self.highest and self.why is None):
            return f"{name} must be {self.what}, got {value if abs(value) < 10**30 else 'a number ' + of_digits(value)}"
        if value > self.highest:
            return (f"{name} {value if value < 10**30 else of_digits(value)} is beyond "
                    f"{_HIGHEST.get(self.highest, self.highest)} ({self.why})")
        return None


def of_digits(value: int) -> str:
    """How long a huge integer is, for a message (Python refuses to write one of more than
    4,300 digits as text)."""
    return f"of {len(str(abs(value)))} digits" if abs(value) < 10**4000 else "of more than 4000 digits"


_OFFSET = Range(0, INT64_MAX, "a whole number from 0", "no log has such an offset: offsets are 64-bit")
_HIGH_WATERMARK = Range(0, INT64_MAX, "a whole number from 0",
                        "no log has such a high watermark: offsets are 64-bit")
_LOG_END = Range(0, INT64_MAX, "a whole number from 0", "no log ends there: offsets are 64-bit")
_LEADER_EPOCH = Range(-1, INT32_MAX, "a leader epoch (-1 for none known, or more)",
                      "no leader has such an epoch: leader epochs are 32-bit")
_PARTITION = Range(0, INT32_MAX, "a whole number from 0",
                   "no topic has such a partition: partition numbers are 32-bit")
_BROKER = Range(0, INT32_MAX, "a broker id (from 0)", "no broker has such an id: broker ids are 32-bit")
_LEADER = Range(-1, INT32_MAX, "a broker id (-1 for none, or from 0)",
                "no broker has such an id: broker ids are 32-bit")
_CONTROLLER_EPOCH = Range(-2**31, INT32_MAX, "a 32-bit integer",
                          "no controller has such an epoch: controller epochs are 32-bit")
_ZK_VERSION = Range(-2**31, INT32_MAX, "a 32-bit integer",
                    "no ZooKeeper node has such a version: versions are 32-bit")
_ZXID = Range(0, INT64_MAX, "a whole number from 0",
              "no ZooKeeper transaction has such an id: zxids are 64-bit")
_INCARNATION = Range(-1, INT64_MAX, "a broker incarnation (-1 for none known, or more)",
                     "no broker registration has such an incarnation: incarnations are 64-bit zxids")

RANGES: dict[str, Range] = {
    **dict.fromkeys(("offset", "first_offset", "from_offset", "to_offset"), _OFFSET),
    **dict.fromkeys(("high_watermark", "previous"), _HIGH_WATERMARK),
    **dict.fromkeys(("log_end", "joined_log_end", "joined_progress"), _LOG_END),
    **dict.fromkeys(("leader_epoch", "epoch", "epochs", "request_epoch", "current_leader_epoch",
                     "requested_leader_epoch"), _LEADER_EPOCH),
    # ``partitions``: the partition numbers of a list of (topic, partition)
    **dict.fromkeys(("partition", "partitions"), _PARTITION),
    **dict.fromkeys(("broker", "isr", "joined", "requester"), _BROKER),
    **dict.fromkeys(("leader", "replica"), _LEADER),
    "controller_epoch": _CONTROLLER_EPOCH,
    "zk_version": _ZK_VERSION,
    "zxid": _ZXID,
    **dict.fromkeys(("incarnation", "requester_incarnation"), _INCARNATION),
    "acks": Range(-1, 1, "-1 (all), 0 or 1", None),
}
"""Each integer field's range, by name."""

# A leader epoch where the event says a broker leads (or the controller chose one to): a
# leader always has an epoch, from 0; -1 ("none known") is a follower's or a refusal's.
_LEADS = Range(0, INT32_MAX, "a leader's epoch (from 0: a leader always has one)", _LEADER_EPOCH.why)

KIND_RANGES: dict[tuple[str, str], Range] = {
    ("became_leader", "leader_epoch"): _LEADS,
    ("acked", "leader_epoch"): _LEADS,  # the leader acknowledged the produce in it
    ("isr_changed", "leader_epoch"): _LEADS,  # the leader changed its ISR in it
    ("leader_elected", "leader_epoch"): _LEADS,  # the epoch the controller chose (from 0)
    ("isr_written", "leader_epoch"): _LEADS,  # the leader the controller wrote the ISR of
    ("isr_written", "requested_leader_epoch"): _LEADS,  # the requester proposed itself as leader in it
    ("isr_written", "leader"): _BROKER,  # the ISR of a leader, never of none
}
"""Ranges held tighter in one kind than the name's, by (kind, field)."""


def range_of(kind: str, name: str) -> Range | None:
    """The range of field ``name`` of ``kind``, or None if it is not an integer field."""
    return KIND_RANGES.get((kind, name)) or RANGES.get(name)
