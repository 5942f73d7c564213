"""Whether a log partition's nonlinearizability is a loss its run's configuration permits.

A partition with no linearization is reported whatever the configuration (the run is
invalid, as the queue checkers' permitted losses leave it), but where the configuration
permits losing records (:mod:`floodmark.checkers.permitted`) the anomaly carries
``permitted_by`` if, and only if, a loss of that kind explains it. The search cannot say
which record went missing, so the partition is searched again with the permitted losses
allowed, each as the history shows it:

* ``acks`` below all permits losing what only an acknowledgement vouched for: every
  acknowledged append whose value no read returned is taken as of unknown outcome (Jepsen's
  ``info``: it took effect anywhere after its invocation, or never, which is what a record
  lost with its offset handed out again looks like). A record a read returned stays
  acknowledged at its offset: reads see only committed records, which the whole ISR had
  whatever the producer asked for, so losing one is still a violation.
* A permission that reaches every record (``min.insync.replicas`` of 1, unclean elections,
  no stated configuration, a recovery after every in-sync replica of the partition lost its
  tail): besides those, where reads saw different records at one offset (or a record and
  nothing) a record read there was lost and the offset written again, so the reads of that
  offset (a final read reads them all) are left out and the appends acknowledged there are
  taken as unknown too. An append acknowledged at one offset and read at another stays a
  violation: a lost record is gone, it does not move (only a producer's retry writes a
  value twice).

Only a relaxed search that finds a linearization excuses the anomaly. One that finds none
leaves it a violation (something other than a permitted loss happened too: a record from
nowhere, or one that moved), and so does one that stops before a verdict (said in
``permission_unjudged``). What an experienced Jepsen user expects of "permitted" is that
*this* history is explained by what the configuration allows, not that the configuration
allows some loss so any anomaly goes; a loss the relaxation cannot express (a record read
once, lost, its offset never read again, yet a later read below it shows the log shrank)
stays a violation: a false alarm can be looked into, a bug stamped permitted is hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from floodmark.checkers.linearizability.models import Model
from floodmark.checkers.linearizability.wgl import Call, SearchResult, search_either
from floodmark.checkers.permitted import LossPermissions


def relaxed_calls(calls: list[Call], *, every_record: bool) -> list[Call]:
    """One partition's calls with the permitted losses allowed (see the module docstring):
    ``every_record`` for a permission that reaches what consumers read, else acks below all."""
    seen_at: dict[int, set[Any]] = {}  # offset -> what reads saw there (None: nothing)
    for made in calls:
        for offset, value in _seen(made.call):
            seen_at.setdefault(offset, set()).add(value)
    read_values = {value for values in seen_at.values() for value in values if value is not None}
    rewritten = {offset for offset, values in seen_at.items() if len(values) > 1} if every_record else set()
    relaxed: list[Call] = []
    for made in calls:
        kind = made.call[0]
        if kind == "append" and made.call[2] is not None and (made.call[1] not in read_values
                                                              or made.call[2] in rewritten):
            relaxed.append(made._replace(call=("append", made.call[1], None), completed_at=None))
        elif kind == "append" or not any(offset in rewritten for offset, _ in _seen(made.call)):
            relaxed.append(made)
    return relaxed


def _seen(call: tuple[Any, ...]) -> list[tuple[int, Any]]:
    """What a read saw, offset by offset (a final read: every record, then nothing at its end)."""
    if call[0] == "read":
        return [(call[1], call[2])]
    if call[0] == "final-read":
        return [*enumerate(call[1]), (len(call[1]), None)]
    return []


def loss_permission(calls: list[Call], where: tuple[str, int], permissions: LossPermissions,
                    build: Callable[[], Model], deadline: float | None, cache_limit: int) -> dict[str, Any]:
    """What the anomaly of the partition ``where`` (without a linearization) carries:
    ``permitted_by`` when a permitted loss explains it, ``permission_unjudged`` when the
    search for that stopped before a verdict, nothing otherwise."""
    topic, partition = where
    reason = permissions.reason(topic, partition, committed=True)
    every_record = reason is not None
    reason = reason or permissions.reason(topic, partition, committed=False)
    if reason is None:
        return {}
    result = _finish(search_either(build(), relaxed_calls(calls, every_record=every_record), build,
                                   deadline=deadline, cache_limit=cache_limit))
    if result.valid is True:
        return {"permitted_by": reason}
    if result.valid == "unknown":
        return {"permission_unjudged": f"whether {reason} explains it: {result.reason}"}
    return {}


def _finish(steps: Generator[None, None, tuple[Model, SearchResult]]) -> SearchResult:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value[1]  # type: ignore[no-any-return]
