"""What each chunk of a large file tells the driver, and the file's verdict made from it.

A chunk task (:mod:`floodmark.pipeline.chunks`) judges what one line decides alone with the
very functions ``floodmark check`` reads a run with, and for the rules that several lines
decide together it reports a small summary, in its own line numbers (it does not know how
many lines the chunks before it hold): the first and last index, time and seq it read, the
first op of each process and what each leaves open, its first claim to be a broker, its
first start of each run id, whether it ends in a clean stop. The driver reduces the
summaries in chunk order (:func:`judge_history`, :func:`judge_event_file`): it adds up the
lines of earlier chunks, carries what a rule needs from one chunk to the next, and raises the
error ``check`` raises, naming the same file and physical line in the same words.

A node's file whose seqs do not rise line after line (a seq again, or out of order) cannot
be judged from the summaries alone: which line repeats a seq, and what follows a stop in the
node's order, take one more pass over the file (``reorder``, given by the caller: a Spark
job), asked for only then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floodmark.checkers.run_partitions import PartitionBounds
from floodmark.contracts.history import (
    HistoryError,
    Process,
    TornTail,
    index_out_of_sequence,
    time_out_of_order,
    unpaired,
)
from floodmark.contracts.node_events import NodeEventError
from floodmark.contracts.node_files import (
    Claim,
    Life,
    Start,
    claim_mismatch,
    claim_problem,
    judge_node_story,
    seq_again,
)
from floodmark.contracts.node_lives import Lives
from floodmark.contracts.run_ids import RunIdCheck

# The rank of the problems one line may have, in the order check's reader looks for them: a
# line that is no event of this node, its seq again, a topic or partition the run lacks, a
# claim to be another broker (see floodmark.contracts.node_files).
BEFORE_SEQ, SEQ_AGAIN, AFTER_SEQ, CLAIM = range(4)


@dataclass
class ChunkSummary:
    """What one task saw in its chunk of a file; line numbers are 1-based within the chunk."""

    path: str
    number: int
    lines: int = 0
    rows: int = 0
    error: tuple[int, str] | None = None  # (line, problem): the first that line decides alone
    # The file's last line is not blank and no newline ends it (cut mid-line, or after its
    # last character): what the sequential readers note as cut short.
    cut_short: bool = False
    torn: tuple[int, str] | None = None  # (line, problem): that last line, cut mid-line and skipped


@dataclass
class HistoryChunk(ChunkSummary):
    """A history chunk's part of the cross-line rules (dense indices, time order, pairing)."""

    first_index: int | None = None
    first_row_line: int | None = None
    first_time: int | None = None
    last_time: int | None = None
    index_break: tuple[int, int, int] | None = None  # (line, index found, ops before it in the chunk)
    # The first op that breaks its process's pairing after the process's first op here:
    # (line, type, process, f, the open invocation's (line, f) or None).
    pairing_break: tuple[int, str, Process, str, tuple[int, str] | None] | None = None
    entries: dict[Process, tuple[int, str, str]] = field(default_factory=dict)  # first op: (line, type, f)
    open: dict[Process, tuple[int, str]] = field(default_factory=dict)  # left open: (line, f)
    witness_times: dict[int, int] = field(default_factory=dict)
    bounds: PartitionBounds = field(default_factory=lambda: PartitionBounds(None))


@dataclass
class EventChunk(ChunkSummary):
    """A node event chunk's part of the rules of a node's file (see ``node_files``)."""

    error_rank: int = BEFORE_SEQ  # where ``error`` stands among one line's problems
    head: tuple[int, str] | None = None  # (line, problem) of the file's head, read by chunk 0 only
    seq_again: tuple[int, int, int] | None = None  # (line, seq, the line it was first on)
    first_seq: int | None = None  # of the chunk's first event in the file
    last_seq: int | None = None  # of its last
    rising: bool = True  # every seq above the one of the line before
    first: tuple[int, int, str] | None = None  # (seq, line, kind) of its lowest seq
    starts: dict[str | None, tuple[int, int]] = field(default_factory=dict)  # run id -> its first (seq, line)
    claim: tuple[int, int, str] | None = None  # (broker, line, kind): its first claim
    other_claim: tuple[int, int, str] | None = None  # (broker, line, kind): the first of another broker
    life: Life | None = None  # the first event after a stop within the chunk, in file order
    ends_stopped: int | None = None  # the line of its last event, a clean stop


@dataclass(frozen=True)
class HistoryTotals:
    """What a history's judged chunks add up to."""

    ops: int
    first_time: int | None
    last_time: int | None
    witness_times: dict[int, int]
    bounds: PartitionBounds
    torn_tail: TornTail | None  # the last line, cut short and left unread, as the readers leave it


def _in_order(summaries: Iterable[ChunkSummary]) -> list[Any]:
    """The chunks of one file, first to last (the accumulator gathers them in any order)."""
    return sorted(summaries, key=lambda s: s.number)


def judge_history(summaries: Iterable[HistoryChunk], source: str, bounds: PartitionBounds) -> HistoryTotals:
    """The history's totals; raises :class:`HistoryError` naming its first problem as
    ``read_history(check_pairs=True)`` does. ``bounds`` is shown each chunk's nemesis ops."""
    lines_before = rows_before = 0
    last_time: int | None = None
    first_time: int | None = None
    still_open: dict[Process, tuple[int, str]] = {}  # process -> (global line, f) of its open invocation
    times: dict[int, int] = {}
    torn: TornTail | None = None
    for s in _in_order(summaries):
        problems: list[tuple[int, str]] = [] if s.error is None else [s.error]
        if s.first_index is not None and s.first_row_line is not None and s.first_time is not None:
            if s.first_index != rows_before:
                problems.append((s.first_row_line, index_out_of_sequence(s.first_index, rows_before)))
            elif last_time is not None and s.first_time < last_time:
                problems.append((s.first_row_line, time_out_of_order(s.first_time, last_time)))
            for process, (line, kind, f) in s.entries.items():
                problem = unpaired(kind, process, f, still_open.get(process))
                if problem is not None:
                    problems.append((line, problem))
        if s.index_break is not None:
            line, index, position = s.index_break
            problems.append((line, index_out_of_sequence(index, rows_before + position)))
        if s.pairing_break is not None:
            line, kind, process, f, invoked = s.pairing_break
            where = None if invoked is None else (invoked[0] + lines_before, invoked[1])
            problems.append((line, unpaired(kind, process, f, where) or ""))
        if problems:
            # At one line, what check's reader looks at first comes first: the index, the time, the pairing.
            line, problem = min(problems, key=lambda p: p[0])
            raise HistoryError(source, lines_before + line, problem)
        for process in s.entries:
            still_open.pop(process, None)
        still_open.update({p: (line + lines_before, f) for p, (line, f) in s.open.items()})
        if s.rows:
            first_time = s.first_time if first_time is None else first_time
            last_time = s.last_time
        times.update(s.witness_times)
        bounds.merge(s.bounds)
        if s.torn is not None:
            torn = TornTail(source, lines_before + s.torn[0], s.torn[1])
        lines_before += s.lines
        rows_before += s.rows
    return HistoryTotals(rows_before, first_time, last_time, times, bounds, torn)


Reorder = Callable[[dict[int, int]], tuple[tuple[int, int, int] | None, Life | None]]
"""The extra pass over a file whose seqs do not rise: given the lines before each chunk (by
chunk number), (the first line whose seq an earlier line had: (line, seq, that line's), and the
first event after a clean stop in the node's order that is no start), in global lines."""


def judge_event_file(summaries: Iterable[EventChunk], source: str, runs: RunIdCheck, claims: dict[int, Claim],
                     reorder: Reorder) -> None:
    """Hold one node's file, from its chunks' summaries, to every rule ``check`` holds it to
    (``runs``: the run's ids, seen file by file; ``claims``: which file said it is which
    broker, file by file); raises :class:`NodeEventError` naming the first problem."""
    chunks: list[EventChunk] = _in_order(summaries)
    node = Path(source).stem
    if chunks and chunks[0].head is not None:
        raise NodeEventError(source, *chunks[0].head)
    offsets: dict[int, int] = {}
    lines_before = 0
    for s in chunks:
        offsets[s.number] = lines_before
        lines_before += s.lines
    problems: list[tuple[int, int, str]] = []  # (global line, rank, problem)
    for s in chunks:
        off = offsets[s.number]
        if s.error is not None:
            problems.append((s.error[0] + off, s.error_rank, s.error[1]))
        if s.seq_again is not None:
            line, seq, seen = s.seq_again
            problems.append((line + off, SEQ_AGAIN, seq_again(seq, seen + off)))
    claim = _claims(chunks, offsets, node, source, problems)
    rising = _rising(chunks)
    life: Life | None = None
    if rising:
        life = _life(chunks, offsets)
    else:
        repeated, life = reorder(offsets)
        if repeated is not None:
            problems.append((repeated[0], SEQ_AGAIN, seq_again(repeated[1], repeated[2])))
    if problems:
        line, _, problem = min(problems)
        raise NodeEventError(source, line, problem)
    judge_node_story(source, _first(chunks, offsets), _starts(chunks, offsets), life, runs)
    if claim is not None:
        blamed = claim_problem(claims, claim)
        if blamed is not None:
            raise blamed[1]


def _claims(chunks: list[EventChunk], offsets: dict[int, int], node: str, source: str,
            problems: list[tuple[int, int, str]]) -> Claim | None:
    """The file's claim (its first, in file order), noting in ``problems`` every chunk's
    first claim to be another broker."""
    claim: Claim | None = None
    for s in chunks:
        off = offsets[s.number]
        for said in (s.claim, s.other_claim):
            if said is None:
                continue
            broker, line, kind = said
            if claim is None:
                claim = Claim(broker, node, source, line + off)
            elif broker != claim.broker:
                problems.append((line + off, CLAIM, claim_mismatch(kind, node, broker, claim)))
                break
    return claim


def _rising(chunks: list[EventChunk]) -> bool:
    """Whether every seq of the file is above the one of the line before."""
    last: int | None = None
    for s in chunks:
        if not s.rising:
            return False
        if s.first_seq is not None:
            if last is not None and s.first_seq <= last:
                return False
            last = s.last_seq
    return True


def _life(chunks: list[EventChunk], offsets: dict[int, int]) -> Life | None:
    """The first event after a clean stop that is no start, in a file whose seqs rise."""
    stopped_on: int | None = None
    for s in chunks:
        off = offsets[s.number]
        if s.first is None:
            continue
        lives = Lives(stopped_on)
        lives.see(s.first[1] + off, s.first[2])
        if lives.found is not None:
            return lives.found
        if s.life is not None:
            line, kind, stop = s.life
            return line + off, kind, stop + off
        stopped_on = None if s.ends_stopped is None else s.ends_stopped + off
    return None


def _first(chunks: list[EventChunk], offsets: dict[int, int]) -> tuple[int, int, str] | None:
    """(seq, global line, kind) of the file's lowest seq."""
    firsts = [(s.first[0], s.first[1] + offsets[s.number], s.first[2]) for s in chunks if s.first is not None]
    return min(firsts) if firsts else None


def _starts(chunks: list[EventChunk], offsets: dict[int, int]) -> list[Start]:
    """The first start (by seq) of each run id the file's starts name, as (seq, global line, run id)."""
    first: dict[str | None, tuple[int, int]] = {}
    for s in chunks:
        for run_id, (seq, line) in s.starts.items():
            if run_id not in first or seq < first[run_id][0]:
                first[run_id] = (seq, line + offsets[s.number])
    return [(seq, line, run_id) for run_id, (seq, line) in first.items()]
