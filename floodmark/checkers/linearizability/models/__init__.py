"""Sequential models: what a single correct copy of an object would do.

Linearizability is judged against a model (:mod:`.contract` says what one is), one module
per family of objects: ``register`` and ``cas-register`` (:mod:`.registers`: read/write,
plus compare-and-set), ``kv`` (:mod:`.kv`: one string register per key with get/put/append,
Porcupine's key-value model; Jepsen's independent ``[key value]`` ops are also accepted),
``multi-register`` (:mod:`.multi_register`: transactions of reads and writes over several
registers), ``mutex`` (:mod:`.mutex`: acquire/release) and ``log`` (:mod:`.log`: the
append-only log of the ``log-lin`` workload: appends return their offset, reads of an
offset return the record there or nothing past the end).

This package is where the checker picks a model by name (:func:`make_model`), so it names
every model and the contract they keep, for callers that ask for one directly.
"""

from __future__ import annotations

from typing import Any, Final

from floodmark.checkers.linearizability.models.contract import INCONSISTENT, Model
from floodmark.checkers.linearizability.models.kv import KeyValue
from floodmark.checkers.linearizability.models.log import Log
from floodmark.checkers.linearizability.models.multi_register import MultiRegister
from floodmark.checkers.linearizability.models.mutex import Mutex
from floodmark.checkers.linearizability.models.registers import CasRegister, Register

__all__ = ["INCONSISTENT", "KEYED_MODELS", "MODEL_NAMES", "CasRegister", "KeyValue", "Log", "Model", "MultiRegister", "Mutex",
           "Register", "make_model"]

MODEL_NAMES: tuple[str, ...] = ("cas-register", "register", "kv", "multi-register", "mutex", "log")

KEYED_MODELS: tuple[str, ...] = ("cas-register", "register", "mutex")  # one object per key, if ops name keys
_UNSET: Final = object()  # no initial value given (None is one: nil)


def make_model(name: str, initial: Any = _UNSET, *, independent: bool = False, keys_beside: bool = False,
               **register_options: bool) -> Model:
    """A fresh model instance (models may keep per-search tables, so one per search).
    ``register_options`` (failed_cas_observed, nil_reads_unknown) apply to register models,
    nil_reads_unknown to kv and multi-register too; ``independent``: one register per key
    of ``[key value]`` ops, ``keys_beside``: of ops that name their key beside their value
    (register and mutex models only). Without ``initial``, registers start at
    nil (and kv's keys at the empty string, as in Porcupine)."""
    if (independent or keys_beside) and name not in KEYED_MODELS:
        what = "independent [key value] ops" if independent else "ops that name their key"
        raise ValueError(f"{what} are judged one object per key by the {', '.join(KEYED_MODELS)} models, "
                         f"not by {name}")
    start = None if initial is _UNSET else initial
    if name == "cas-register":
        return CasRegister(start, independent=independent, keys_beside=keys_beside, **register_options)
    if name == "register":
        return Register(start, independent=independent, keys_beside=keys_beside, **register_options)
    if name == "kv":
        return KeyValue("" if initial is _UNSET else initial, **register_options)
    if name == "multi-register":
        return MultiRegister(start, nil_reads_unknown=register_options.get("nil_reads_unknown", False))
    if name == "mutex":
        return Mutex(independent=independent, keys_beside=keys_beside)
    if name == "log":
        return Log()
    raise ValueError(f"unknown model {name!r}; choose one of: {', '.join(MODEL_NAMES)}")
