"""Jepsen's independent histories: many registers in one history, each op naming its key.

Most of Jepsen's linearizable-register tests run through ``jepsen.independent``: the clients
work on many keys at once, and every op's value is a ``[key value]`` tuple: a write
``[k v]``, a compare-and-set ``[k [old new]]``, a read invoked as ``[k nil]`` and completed
as ``[k v]``. Knossos checks such a history one key at a time, each key an ordinary register.
Taken as one register holding tuples, it is nonsense: writes to different keys would
overwrite each other, and a valid history would be judged invalid.

Ops on different keys commute, so each key is checked on its own (P-compositionality), as
its register: :func:`independent_split` gives an op's key and the register's value. The
register keeps the conventions of the format the history came in (an EDN register starts at
0 and a nil read tells nothing, as for a plain EDN register).

The shape is recognised when it is unambiguous (:func:`looks_independent`): every op is a
read, write or cas, and every read is *invoked* with a ``[key nil]`` pair. A plain register
history invokes its reads with nil, never with a pair, so no plain register history looks
like this; a register that holds pairs would still be read with nil. ``floodmark check
--independent`` (or ``--no-independent``) says so explicitly instead.

The kv model takes such ops too, and two other ways of naming a key
(:func:`kv_key_and_value`): Porcupine's ``:key`` beside the value, and a ``{"key", "value"}``
map, as our JSONL writes it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from floodmark.checkers.linearizability.values import canonical, ordered, shown
from floodmark.contracts.history import NEMESIS, Op

REGISTER_FUNCTIONS = frozenset(("read", "write", "cas"))


def independent_split(value: Any) -> tuple[Hashable, Any]:
    """(the key an independent op touches, the value for that key's register)."""
    if not ordered(value) or len(value) != 2:
        raise ValueError(f"an independent op's value is [key value], not {shown(value)}")
    return canonical(value[0]), value[1]


def looks_independent(ops: Iterable[Op]) -> bool:
    """True if the history is unmistakably ``jepsen.independent`` register ops: only reads,
    writes and cases, at least one read, every read invoked as ``[key nil]``, every write
    ``[key value]`` and every cas ``[key [old new]]``."""
    reads = 0
    for op in ops:
        if op.process == NEMESIS or op.type != "invoke":
            continue
        f, value = op.f, op.value
        if f not in REGISTER_FUNCTIONS or not _pair(value):
            return False
        if f == "read":
            if value[1] is not None:
                return False
            reads += 1
        elif f == "cas" and not _pair(value[1]):
            return False
    return reads > 0


def _pair(value: Any) -> bool:
    return type(value) is list and len(value) == 2


class MissingValue(ValueError):
    """A ``{"key", "value"}`` map without its value. Not to be taken for a bare value (a
    completion that names no key holds the invocation's key's value whole)."""


def map_value(value: dict[Any, Any]) -> Any:
    """The value of a ``{"key", "value"}`` map. An absent one is refused, not read as nil (a
    get whose field was misspelt passed as a get of nil), as for an op's own value."""
    if "value" not in value:
        raise MissingValue(f"its key-value map {shown(value)} has no value (null if the key holds none)")
    return value["value"]


def kv_key_and_value(value: Any, key: Any) -> tuple[Any, Any]:
    """Split a key-value op's value: Porcupine's separate ``key`` field, Jepsen's
    independent ``[key value]`` tuple, or a ``{"key", "value"}`` map."""
    if key is not None:
        return key, value
    if isinstance(value, dict) and "key" in value:
        return value["key"], map_value(value)
    if ordered(value) and len(value) == 2:
        return value[0], value[1]
    raise ValueError(f"cannot find the key of key-value op value {shown(value)}")
