"""Jepsen histories in EDN, read into our :class:`~floodmark.contracts.history.Op` and written back.

Jepsen and Knossos store a history either as one EDN vector of op maps or as a stream of
op maps (``history.edn``, one map per line; Porcupine's key-value test data is also one map
per line). An op map has ``:process``, ``:type`` (``:invoke``/``:ok``/``:fail``/``:info``),
``:f`` and ``:value``, and optionally ``:time``, ``:index``, ``:error``, ``:node`` and
anything else (Porcupine adds ``:key``).

Reading converts EDN values to the JSON-shaped values our histories use (:func:`plain`:
vectors become lists, sets lists marked as sets, while keywords stay keywords, so that
``:x`` is still not ``"x"`` when values are compared); ops are re-indexed densely in file
order (the order Knossos checks them in), keeping a differing original ``:index`` as
``jepsen_index``. A process is an integer, a keyword or a string, and a string is named as
EDN writes it (``"a"``, quotes included), so that it is never the keyword of its name
(``:a``, or ``:nemesis``, the nemesis). An op printed as a record,
``#jepsen.history.Op{...}`` (as Jepsen 0.3 prints its ops) or ``#knossos.op.Op{...}``, is
read as its map, and an op written as Knossos's older test data writes it, ``[process type
f value]`` (optionally an error after the value), as the map it stands for. Writing does the
reverse, so our own histories can be fed to Jepsen's tools: op fields become keywords, ``f``
and ``type`` keywords, a process that is no integer a keyword (the nemesis ``:nemesis``)
unless it was read as a string, and the string keys of a JSON history's maps keywords (a
history read from EDN is written back as it was).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floodmark.contracts.history import OP_TYPES, HistoryError, Op, ProcessPairing
from floodmark.formats import edn
from floodmark.inputs.sources import decode_utf8, read_source

if TYPE_CHECKING:
    from floodmark.inputs.output_paths import Input

_OP_FIELDS = ("index", "time", "type", "process", "f", "value", "node", "error")


def plain(value: Any) -> Any:
    """An EDN value as the JSON-shaped value our histories hold: vectors and lists become
    lists, maps dicts, sets :class:`~floodmark.formats.edn.EdnSet` (a list that remembers it
    was a set). Keywords, symbols and characters stay the ``str`` subclasses the reader made
    (JSON writes them as strings), and a tagged literal keeps its tag, so the checkers can
    still compare values as EDN does (:mod:`floodmark.checkers.linearizability.values`): ``:x`` is not
    ``"x"`` and ``#{1 2}`` is not ``[1 2]``."""
    kind = type(value)
    if kind is int or kind is str or value is None or kind in _SCALARS:
        return value
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    if kind is dict:
        # (keys are the reader's hashable forms, kept: a dict key cannot be a list)
        return {k: plain(v) for k, v in value.items()}
    if kind is edn.FrozenMap:
        return {k: plain(v) for k, v in value}
    if kind is frozenset:
        return edn.EdnSet(sorted((plain(v) for v in value), key=repr))
    if kind is edn.Tagged:
        return edn.Tagged(value.tag, plain(value.value))
    return value


_SCALARS = frozenset((bool, float, edn.Keyword, edn.Symbol, edn.Char))


def _name(value: Any) -> Any:
    """An op field's keyword (``:ok``, ``:nemesis``) as the plain string our ops hold."""
    return str.__str__(value) if isinstance(value, str) else value


# A Clojure record's tag: a namespace, then a class name (jepsen.history.Op, knossos.op.Op).
_RECORD = re.compile(r"[A-Za-z_*+!?<>=-][\w*+!?<>=-]*(?:\.[\w*+!?<>=-]+)*\.[A-Z][\w$]*")


def op_from_edn(form: Any, position: int, source: str, line: int) -> Op:
    """One EDN op map as an Op; ``position`` becomes its index. An op record as Jepsen prints
    one (``#jepsen.history.Op{:index 0 ...}``, Knossos's ``#knossos.op.Op{...}``) is its map."""
    if isinstance(form, edn.Tagged) and isinstance(form.value, dict) and _RECORD.fullmatch(form.tag):
        form = form.value
    if isinstance(form, list):
        form = _tuple_op(form, source, line)
    if not isinstance(form, dict):
        raise HistoryError(source, line, f"expected an op map, got {shown_edn(form)}")
    fields = {_name(k): v for k, v in form.items()}
    for name in ("process", "type", "f"):
        if name not in fields:
            raise HistoryError(source, line, f"op map has no :{name}")
    op_type = _name(fields["type"])
    if not isinstance(op_type, str) or op_type not in OP_TYPES:
        raise HistoryError(source, line, f":type must be :invoke/:ok/:fail/:info, got {shown_edn(fields['type'])}")
    process = _process(fields["process"], source, line)
    time = fields.get("time")
    if time is None:
        time = position  # no clock recorded: file order is the only order
    elif not isinstance(time, int) or isinstance(time, bool):
        raise HistoryError(source, line, f":time must be an integer, got {shown_edn(time)}")
    f = fields["f"]
    if not isinstance(f, str):
        raise HistoryError(source, line, f":f must be a keyword or a string, got {shown_edn(f)}")
    node = fields.get("node")
    extra = {str(k): plain(v) for k, v in fields.items() if k not in _OP_FIELDS}
    original_index = fields.get("index")
    if isinstance(original_index, int) and original_index != position:
        extra["jepsen_index"] = original_index
    return Op(
        index=position,
        time=time,
        type=op_type,  # type: ignore[arg-type]  # checked against OP_TYPES above
        process=process,
        f=str.__str__(f),
        value=plain(fields.get("value")),
        node=None if node is None else str(_name(node)),
        error=plain(fields.get("error")),
        extra=extra,
    )


def _process(value: Any, source: str, line: int) -> int | str:
    """An op's ``:process`` as our ops name it: an integer as it is, a keyword by its name
    (``:nemesis`` is the nemesis), a string as EDN writes it, quotes included (``"a"``). In
    Clojure ``"a"`` is not ``:a``: named alike, a string process's completion closed the
    keyword process's invocation, and a string ``"nemesis"`` passed for the nemesis, whose
    ops no checker judges. It is an ordinary process, as every other non-integer one is."""
    kind = type(value)
    if kind is int:
        return value
    if kind is edn.Keyword:
        return str.__str__(value)
    if kind is str:
        return edn.dumps(value)
    # (a symbol is no process: 1/2 and 1.5M are read as symbols, and were never one either)
    raise HistoryError(source, line, f":process must be an integer, a keyword or a string, got {shown_edn(value)}")


_STRING_NEMESIS = edn.dumps("nemesis")  # a process the nemesis's ops may be mistaken for


def _process_form(process: int | str) -> Any:
    """A process as EDN writes it, the reverse of :func:`_process`: a string process read
    from EDN (named with its quotes) as that string, and any other name as a keyword (Jepsen
    names its processes that are not clients so: ``:nemesis``)."""
    if type(process) is not str:
        return process
    if process[:1] == '"':
        try:
            value = edn.loads(process)
        except edn.EdnError:
            value = None
        if type(value) is str:
            return value
    return edn.Keyword(process)


def _tuple_op(form: list[Any], source: str, line: int) -> dict[str, Any]:
    """An op written as Knossos's older test data writes it, a vector ``[process type f
    value]`` (``[71 :fail :read nil :conn-lost]``: a fifth element is the error), as the op
    map it stands for; a vector of another shape is refused with its line."""
    if not (3 <= len(form) <= 5 and isinstance(form[1], edn.Keyword) and form[1] in OP_TYPES):
        raise HistoryError(source, line, "an op vector is [process type f value] with an optional error, "
                           f"its type :invoke/:ok/:fail/:info, got {shown_edn(form)}")
    fields = dict(zip(("process", "type", "f", "value", "error"), form))
    fields.setdefault("value", None)
    return fields


def shown_edn(value: Any) -> str:
    """A field's value as EDN, cut short for a message."""
    try:
        text = edn.dumps(value, keyword_keys=False)
    except TypeError:  # (not a value EDN can write: say what Python sees)
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_edn_history(text: str, source: str = "<edn>", *, check_pairs: bool = False,
                      lines: list[int] | None = None) -> list[Op]:
    """A history from EDN text: one vector of op maps, or a stream of op maps; with
    ``check_pairs``, every completion must close its process's invocation; ``lines``, if
    given, receives each op's line (for a later reader's messages: :mod:`.jepsen_kafka`).

    Each op is built as its form is read, so the forms of a stream are never all held
    beside the ops made of them."""
    forms = edn.iter_forms(text, source, spread=True)
    try:
        first = next(forms, None)
        if first is None:
            return []
        numbered: Iterator[tuple[Any, int]]
        vector = first[0] is edn.OPENS or isinstance(first[0], list)
        if first[0] is edn.OPENS:  # a vector's ops, each with its line, up to its ']'
            numbered = itertools.takewhile(lambda numbered_form: numbered_form[0] is not edn.CLOSES, forms)
            head = next(numbered, None)
            if head is not None and not isinstance(head[0], dict | list | edn.Tagged):
                # Not a vector of ops but the first of a stream of [process type f value]
                # vectors: that vector is the first op, and the rest of the file the others.
                numbered = itertools.chain(((_rest_of_vector(head, numbered), first[1]),), forms)
                vector = False
            elif head is not None:
                numbered = itertools.chain((head,), numbered)
        elif vector:
            # A vector read whole (with metadata before it): name the vector's line.
            numbered = ((form, first[1]) for form in first[0])
        else:
            numbered = itertools.chain((first,), forms)
        pairing = ProcessPairing(source) if check_pairs else None
        ops = []
        for position, (form, line) in enumerate(numbered):
            op = op_from_edn(form, position, source, line)
            if pairing is not None:
                try:
                    pairing.see(op, line)
                except HistoryError as e:
                    if op.process != _STRING_NEMESIS:
                        raise
                    raise HistoryError(e.source, e.line, f"{e.problem} (the nemesis is :nemesis; a string "
                                                         "\"nemesis\" is an ordinary process)") from None
            ops.append(op)
            if lines is not None:
                lines.append(line)
        if vector:
            after = next(forms, None)
            if after is not None:
                raise HistoryError(source, after[1], "unexpected form after the history vector")
    except edn.EdnError as e:
        raise HistoryError(e.source, e.line, e.problem) from None
    return ops


def _rest_of_vector(head: tuple[Any, int], elements: Iterator[tuple[Any, int]]) -> list[Any]:
    """A first top-level vector read element by element, whole again."""
    return [head[0], *(form for form, _ in elements)]


def read_edn_history(path: str | os.PathLike[str]) -> list[Op]:
    source = str(path)
    return parse_edn_history(decode_utf8(read_source(source), source), source)


def op_to_edn(op: Op, *, keyword_keys: bool = True) -> str:
    """One op as a Jepsen op map on one line; ``keyword_keys``: the plain string keys of its
    values' maps become keywords (for a JSON history, whose object keys are strings)."""
    fields: dict[Any, Any] = {
        edn.Keyword("index"): op.index,
        edn.Keyword("time"): op.time,
        edn.Keyword("type"): edn.Keyword(op.type),
        edn.Keyword("process"): _process_form(op.process),
        edn.Keyword("f"): edn.Keyword(op.f),
        edn.Keyword("value"): op.value,
    }
    if op.node is not None:
        fields[edn.Keyword("node")] = op.node
    if op.error is not None:
        fields[edn.Keyword("error")] = op.error
    for key, value in op.extra.items():
        fields[edn.Keyword(key)] = value
    return edn.dumps(fields, keyword_keys=keyword_keys)


def write_edn_history(path: str | os.PathLike[str], ops: Iterable[Op], *, keyword_keys: bool = True,
                      flag: str | None = None, inputs: Iterable[Input] = ()) -> Path:
    """Write a history as a Jepsen ``history.edn``: one op map per line (``keyword_keys``:
    as for :func:`op_to_edn`; False for a history read from EDN); return ``path``.

    Written as every file floodmark is told to write (:func:`~floodmark.inputs.output_paths.write_output`,
    whose ``flag`` and ``inputs`` these are): replaced atomically through a temporary file of
    its own in the same directory, which an op that cannot be written leaves nowhere, never
    over a directory or an input."""
    from floodmark.inputs.output_paths import write_output  # (tempfile and fcntl: only for writers)

    return write_output(path, lambda f: f.writelines(op_to_edn(op, keyword_keys=keyword_keys) + "\n" for op in ops),
                        flag=flag, inputs=inputs)
