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
map, as our JSONL writes it. Register ops may name their key those ways too
(:func:`names_keys_beside`): each key is then its own register (:func:`key_beside_split`),
as for ``[key value]`` ops. Judged as one register, ``write a 1``, ``write b 2``, ``read a
2`` passed, a read of key ``a`` returning what only key ``b`` was given. A mutex's ops name
their lock either way too (:func:`looks_independent_locks`): one mutex per key, so that two
clients holding two locks at once are not called two holders of one.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from floodmark.checkers.linearizability.values import canonical, ordered, shown
from floodmark.contracts.history import NEMESIS, Op

REGISTER_FUNCTIONS = frozenset(("read", "write", "cas"))
LOCK_FUNCTIONS = frozenset(("acquire", "release"))


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


def looks_independent_locks(ops: Iterable[Op]) -> bool:
    """True if the history is ``jepsen.independent`` lock ops: only acquires and releases, each
    invoked with a ``[key value]`` pair (a mutex's ops carry no value of their own)."""
    seen = False
    for op in ops:
        if op.process == NEMESIS or op.type != "invoke":
            continue
        if op.f not in LOCK_FUNCTIONS or not _pair(op.value):
            return False
        seen = True
    return seen


def names_keys_beside(ops: Iterable[Op]) -> bool:
    """True if the history's register ops name their key beside their value: one of them
    has a ``key`` field (Porcupine's ``:key``), or every one's value is a ``{"key",
    "value"}`` map (our JSONL's key-value ops)."""
    maps = 0
    for op in ops:
        if op.process == NEMESIS or op.type != "invoke":
            continue
        if "key" in op.extra:
            return True
        if maps >= 0:
            maps = maps + 1 if type(op.value) is dict and "key" in op.value else -1
    return maps > 0


def key_beside_split(value: Any, extra: dict[str, Any]) -> tuple[Hashable, Any]:
    """(the key a register op names beside its value, the value for that key's register):
    its ``key`` field, or the key of a ``{"key", "value"}`` map; refused if it names none."""
    if "key" in extra:
        return canonical(extra["key"]), value
    if type(value) is dict and "key" in value:
        return canonical(value["key"]), map_value(value)
    raise ValueError(f"it names no key, where the history's other ops name theirs beside their value, "
                     f"with {shown(value)}")


class PerKey:
    """What makes a model one object per key (the register and mutex models): its ops are
    ``[key value]`` pairs (``independent``) or name their key beside their value
    (``keys_beside``), or neither (one object, key None). A model mixes it in before
    :class:`~floodmark.checkers.linearizability.models.contract.Model`, whose ``keyed`` and
    ``split`` it gives."""

    def __init__(self, *, independent: bool = False, keys_beside: bool = False) -> None:
        self.independent = independent
        self.keys_beside = keys_beside and not independent
        self.keyed = independent or keys_beside

    def split(self, value: Any, extra: dict[str, Any]) -> tuple[Hashable, Any]:
        if self.independent:
            return independent_split(value)
        return key_beside_split(value, extra) if self.keys_beside else (None, value)


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
