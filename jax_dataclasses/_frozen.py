"""Frozen instances, and the per-context permission to assign that `copy_and_mutate` grants.

Permission lives outside the instances, in a `ContextVar` mapping `id(obj)` to the function
that performs the assignment (which validates it). A `ContextVar` is per thread and per
asyncio task, so a copy being mutated in one context stays frozen in every other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, NoReturn

from jax_dataclasses._registry import layout_of

Assign = Callable[[Any, str, Any], None]
"""Performs `obj.name = value` for an object that may be mutated: `assign(obj, name, value)`."""

_MUTABLE: ContextVar[Mapping[int, Assign] | None] = ContextVar(
    "jax_dataclasses_mutable", default=None
)


def frozen_setattr(self: object, name: str, value: object) -> None:
    """`__setattr__` of every pytree dataclass: refused unless the object is being mutated."""
    allowed = _MUTABLE.get()
    assign = None if allowed is None else allowed.get(id(self))
    if assign is None:
        refuse_assignment(self, name)
    assign(self, name, value)


def refuse_assignment(obj: object, name: str) -> NoReturn:
    raise dataclasses.FrozenInstanceError(
        f"cannot assign to field {name!r} of {type(obj).__qualname__}: pytree dataclass "
        f"instances are frozen. Use jdc.replace(obj, {name}=...) for a changed copy, or "
        "`with jdc.copy_and_mutate(obj) as copy:` to edit a copy in place."
    )


def refuse_non_field(obj: object, name: str) -> NoReturn:
    raise dataclasses.FrozenInstanceError(
        f"cannot assign to {name!r} of {type(obj).__qualname__}: it is not a field. A pytree "
        "dataclass has no state besides its fields (JAX rebuilds objects from them, without "
        "__init__), so declare it as a field (Static[...] if it is not an array), or compute "
        "it in a method or property."
    )


def frozen_delattr(self: object, name: str) -> None:
    """`__delattr__` of every pytree dataclass: always refused (a field cannot go missing)."""
    raise dataclasses.FrozenInstanceError(
        f"cannot delete field {name!r} of {type(self).__qualname__}: pytree dataclass "
        "instances are frozen, and a pytree node cannot lose a field."
    )


@contextmanager
def mutable(objects: Mapping[int, Assign]) -> Generator[None, None, None]:
    """Within the block, and only in the current context, allow assignment to `objects`.

    `objects` maps `id(obj)` to the function that performs assignments to `obj`. The caller
    keeps the objects alive while its assign functions accept them (so no id is reused), and
    makes the functions refuse once its block ends: a context copied inside the block (an
    asyncio task) keeps the mapping, but not the objects. Nested blocks see the union of
    their own and the enclosing permissions.
    """
    outer = _MUTABLE.get()
    token = _MUTABLE.set(objects if outer is None else {**outer, **objects})
    try:
        yield
    finally:
        _MUTABLE.reset(token)


class _Construction:
    """Permission for the `__init__` now constructing `obj` to assign its fields.

    It ends with construction (`end_permission`), also for contexts copied meanwhile (a task
    or callback scheduled from `__init__`): those keep the mapping, not the permission.
    """

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj: object | None = obj

    def assign(self, obj: object, name: str, value: object) -> None:
        """Fields only, since a pytree dataclass has no other state (JAX rebuilds objects
        from their fields, without `__init__`)."""
        if obj is not self.obj:  # Construction has ended, or the id now names another object.
            refuse_assignment(obj, name)
        layout = layout_of(type(obj))
        if layout is not None and name not in layout.children and name not in layout.statics:
            refuse_non_field(obj, name)
        object.__setattr__(obj, name, value)


Construction = tuple[_Construction, Token[Mapping[int, Assign] | None]]


def begin_construction(obj: object) -> Construction:
    """Let the `__init__` now constructing `obj` assign its fields, until `end_permission`.

    Plain functions rather than a context manager: this runs on every construction of a class
    with its own `__init__`.
    """
    construction = _Construction(obj)
    outer = _MUTABLE.get()
    entry = {id(obj): construction.assign}
    return construction, _MUTABLE.set(entry if outer is None else {**outer, **entry})


def end_permission(started: Construction) -> None:
    construction, token = started
    construction.obj = None
    _MUTABLE.reset(token)


def is_constructing(obj: object) -> bool:
    """Whether an `__init__` further out is constructing `obj` (and will finish it)."""
    allowed = _MUTABLE.get()
    assign = None if allowed is None else allowed.get(id(obj))
    owner = getattr(assign, "__self__", None)
    return isinstance(owner, _Construction) and owner.obj is obj
