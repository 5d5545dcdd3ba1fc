"""Frozen instances, and the per-context permission to assign that `copy_and_mutate` grants.

Permission lives outside the instances, in a `ContextVar` mapping `id(obj)` to the function
that performs the assignment (which validates it). A `ContextVar` is per thread and per
asyncio task, so a copy being mutated in one context stays frozen in every other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn

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


class mutating:  # Used like a function: `with mutating(obj, assign):`.
    """Let a class's own `__init__` assign to the object it is constructing.

    A small class rather than `@contextmanager`, because it runs on every construction of a
    class with a custom `__init__`.
    """

    __slots__ = ("_assign", "_obj", "_token")

    def __init__(self, obj: object, assign: Assign) -> None:
        self._obj: object | None = obj
        self._assign = assign

    def assign(self, obj: object, name: str, value: object) -> None:
        if obj is not self._obj:  # A stale mapping whose id now names another object.
            refuse_assignment(obj, name)
        self._assign(obj, name, value)

    def constructs(self, obj: object) -> bool:
        return obj is self._obj

    def __enter__(self) -> None:
        outer = _MUTABLE.get()
        key = id(self._obj)
        self._token = _MUTABLE.set(
            {key: self.assign} if outer is None else {**outer, key: self.assign}
        )

    def __exit__(self, *exc_info: object) -> None:
        self._obj = None
        _MUTABLE.reset(self._token)


def is_constructing(obj: object) -> bool:
    """Whether an `__init__` further out is constructing `obj` (and will finish it)."""
    allowed = _MUTABLE.get()
    assign = None if allowed is None else allowed.get(id(obj))
    owner = getattr(assign, "__self__", None)
    return isinstance(owner, mutating) and owner.constructs(obj)
