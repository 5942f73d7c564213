"""Cheaper construction of hot frozen dataclasses, which stay frozen dataclasses.

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__(self, name, value)``: a global lookup, an attribute lookup and a call
per field, because its own ``__setattr__`` refuses. A simulated run builds some 300,000
messages, events and history entries a minute, and for a nine-field ``FetchResponse`` that
store costs about twice the rest of the construction.

:func:`fast_frozen_init` replaces the generated ``__init__`` of one frozen dataclass with
one that stores the same values in the same order straight into the instance's ``__dict__``
(or, for ``slots=True``, through each slot's descriptor), skipping the refusing
``__setattr__`` the way ``object.__setattr__`` does. Nothing else changes: the class keeps
its fields, defaults, ``__eq__``, ``__hash__``, ``__repr__`` and frozen ``__setattr__``, and
an instance holds exactly what the generated ``__init__`` would have stored, in field order
(orjson and ``dataclasses.asdict`` see the same thing).

It takes the signature the generated ``__init__`` has (positional or ``kw_only``, defaults,
``default_factory``) and calls ``__post_init__`` if the class has one. Fields with
``init=False`` and ``InitVar`` pseudo-fields are refused when the class is decorated, not
mishandled later.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T")

_FACTORY = object()  # the default of a parameter whose field has a default_factory


def fast_frozen_init(cls: type[T]) -> type[T]:
    """Give the frozen dataclass ``cls`` an ``__init__`` that skips ``object.__setattr__``
    (see the module docstring); returns ``cls``. Put it above ``@dataclass(frozen=True)``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: fast_frozen_init is for frozen dataclasses")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    # An InitVar is a parameter of the generated __init__ but no field: its signature tells.
    parameters = list(inspect.signature(cls.__init__).parameters)[1:]
    if parameters != [f.name for f in fields if f.init]:
        raise TypeError(f"{cls.__name__}: fast_frozen_init does not handle InitVar fields")
    # The generated code's own names start with __ffi_; a field may not take one, nor self.
    if any(f.name == "self" or f.name.startswith("__ffi_") for f in fields):
        raise TypeError(f"{cls.__name__}: a field name clashes with fast_frozen_init's own names")
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__}: fast_frozen_init does not handle init=False fields")
    # A field lives in a slot if a class of the MRO declares it (slots=True, here or in a
    # base), else in the instance's __dict__.
    slots = {name for klass in cls.__mro__ for name in _slot_names(klass)}
    namespace: dict[str, Any] = {"__ffi_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = [] if all(f.name in slots for f in fields) else ["  __ffi_dict = self.__dict__"]
    for n, f in enumerate(fields):
        if f.default is not dataclasses.MISSING:
            namespace[f"__ffi_default_{n}"] = f.default
            param = f"{f.name}=__ffi_default_{n}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"__ffi_factory_{n}"] = f.default_factory
            param = f"{f.name}=__ffi_FACTORY"
            body.append(f"  if {f.name} is __ffi_FACTORY: {f.name} = __ffi_factory_{n}()")
        else:
            param = f.name
        (keyword if f.kw_only else positional).append(param)
        if f.name in slots:
            namespace[f"__ffi_set_{n}"] = getattr(cls, f.name).__set__
            body.append(f"  __ffi_set_{n}(self, {f.name})")
        else:
            body.append(f"  __ffi_dict[{f.name!r}] = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append("  self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n" + "\n".join(body or ["  pass"]) + "\n"
    exec(source, namespace)  # noqa: S102 (built from field names, as dataclasses does)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _slot_names(klass: type) -> tuple[str, ...]:
    slots = klass.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)
