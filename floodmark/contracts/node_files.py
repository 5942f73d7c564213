"""A node's event file: what makes it that node's story, line by line and as a whole.

An event file is read line by line, and some of its rules are decided by one line alone
(:func:`line_problem`): the event is the file's node's, its ``seq`` is not one an earlier line
had (:func:`seq_again`), and it names only topics and partitions the run had. Others are
decided by the lines together: every ``started`` and ``controller_elected`` event says the node is the
same broker (:class:`Claim`, :func:`claim_mismatch`), and no two files say they are the same
one (:func:`claim_problem`); and, in the node's own order (by ``seq``), its first event,
its starts and its lives (:func:`judge_node_story`: the run ids of
:mod:`floodmark.contracts.run_ids`, the stops of :mod:`floodmark.contracts.node_lives`).

The rules are stated here once, as functions of what a reader has gathered, so that every
reader applies the same ones with the same words: the sequential one
(:func:`floodmark.contracts.node_events.read_events_dir`) and the Spark pipeline's, which
reads a large file in chunks and gathers each chunk's part of the story apart.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from floodmark.contracts.node_event_fields import NodeEventError, short
from floodmark.contracts.node_event_kinds import KnownKind, LogDirOffline, UnknownKind
from floodmark.contracts.node_lives import life_after_a_stop
from floodmark.contracts.run_ids import RunIdCheck

# (seq, line, kind) of a node's first event in its order; (seq, line, run id) of a start;
# (line, kind, the stop's line) of the first event after a clean stop that is no start.
First = tuple[int, int, str]
Start = tuple[int, int, str | None]
Life = tuple[int, str, int]


def line_problem(event_node: str, seq: int, body: KnownKind | UnknownKind, node: str | None, seen: int | None,
                 topics: Collection[str] | None, partitions: Mapping[str, int] | None) -> str | None:
    """What is wrong with one event (of ``event_node``, numbered ``seq``, with ``body``) in the
    file of ``node`` (None: of no node in particular), where an earlier line had its ``seq``
    (``seen``, None: none did), given the run's ``topics`` and ``partitions`` (None: unknown);
    None when nothing is."""
    if node is not None and event_node != node:
        return f"an event of node {event_node!r} in the file of node {node!r}"
    if seen is not None:
        return seq_again(seq, seen)
    if topics is not None or partitions is not None:
        outside = _outside_the_run(body, topics, partitions)
        if outside is not None:
            return f"{body.kind} {outside}"
    return None


def _outside_the_run(body: KnownKind | UnknownKind, topics: Collection[str] | None,
                     partitions: Mapping[str, int] | None) -> str | None:
    """What ``body`` names that the run never had (a topic not among ``topics``, a partition
    beyond its topic's count in ``partitions``), said for a message; None if nothing."""
    topic = getattr(body, "topic", None)  # (partition events, and fenced and rejected ones that say)
    named: Iterable[tuple[str, Any]]
    if topic is not None:
        named = ((topic, getattr(body, "partition", None)),)
    elif type(body) is LogDirOffline:
        named = body.partitions
    else:
        return None
    for topic, partition in named:
        if topics is not None and topic not in topics:
            return f"names topic {short(topic)}, which the run does not have (its topics: {', '.join(sorted(topics))})"
        if partitions is not None and type(partition) is int and topic in partitions and partition >= partitions[topic]:
            count = partitions[topic]
            return (f"names partition {short(partition)} of topic {short(topic)}, which never had more than "
                    f"{count} (0 to {count - 1})")
    return None


def seq_again(seq: int, first_line: int) -> str:
    """Why a line whose ``seq`` an earlier line (``first_line``) had is refused."""
    return f"seq {seq} again (first on line {first_line})"


@dataclass(frozen=True)
class Claim:
    """A file's word for which broker its node is (a ``started`` or ``controller_elected`` event)."""

    broker: int
    node: str
    source: str
    line: int


def claim_mismatch(kind: str, node: str, broker: int, claim: Claim) -> str:
    """Why an event of ``kind`` saying ``node`` is ``broker``, in a file whose ``claim`` says
    it is another, is refused."""
    return f"{kind} says node {node!r} is broker {broker}, but line {claim.line} says it is broker {claim.broker}"


def claim_problem(claims: dict[int, Claim], claim: Claim) -> tuple[str, NodeEventError] | None:
    """Record ``claim`` in ``claims`` (broker -> the file that said it is that broker); if
    another file already said it is that broker, one of the two holds the other node's
    events: that file's node and the error naming it. The one blamed is the file whose name
    is not the broker's (``n<id>``, as the harness names them), else the later."""
    earlier = claims.setdefault(claim.broker, claim)
    if earlier is claim:
        return None
    copy, owner = (earlier, claim) if earlier.node != f"n{claim.broker}" == claim.node else (claim, earlier)
    claims[claim.broker] = owner
    return copy.node, NodeEventError(copy.source, copy.line,
                                     f"an event of node {owner.node!r} in the file of node {copy.node!r}: it says "
                                     f"it is broker {claim.broker}, as {owner.source}:{owner.line} does")


def judge_node_story(source: str, first: First | None, starts: Iterable[Start], life: Life | None,
                     runs: RunIdCheck) -> None:
    """Hold a node's events, in its own order, to the run ``runs`` judges and to its lives:
    its ``first`` event, its ``starts`` (the first of each run id they name suffices) and the
    first ``life`` after a clean stop, if any. Raises :class:`NodeEventError` naming the line."""
    if first is not None:
        runs.first_event(first[2], source, first[1])
    for _, line, run_id in sorted(starts, key=lambda start: start[0]):
        runs.started(run_id, source, line)
    if life is not None:
        raise NodeEventError(source, life[0], life_after_a_stop(life[1], life[2]))
