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
from typing import Any

Assign = Callable[[Any, str, Any], None]
"""Performs `obj.name = value` for an object that may be mutated: `assign(obj, name, value)`."""

_MUTABLE: ContextVar[Mapping[int, tuple[object, Assign]] | None] = ContextVar(
    "jax_dataclasses_mutable", default=None
)


def frozen_setattr(self: object, name: str, value: object) -> None:
    """`__setattr__` of every pytree dataclass: refused unless the object is being mutated."""
    allowed = _MUTABLE.get()
    entry = None if allowed is None else allowed.get(id(self))
    if entry is None:
        raise dataclasses.FrozenInstanceError(
            f"cannot assign to field {name!r} of {type(self).__qualname__}: pytree dataclass "
            f"instances are frozen. Use jdc.replace(obj, {name}=...) for a changed copy, or "
            "`with jdc.copy_and_mutate(obj) as copy:` to edit a copy in place."
        )
    entry[1](self, name, value)


def frozen_delattr(self: object, name: str) -> None:
    """`__delattr__` of every pytree dataclass: always refused (a field cannot go missing)."""
    raise dataclasses.FrozenInstanceError(
        f"cannot delete field {name!r} of {type(self).__qualname__}: pytree dataclass "
        "instances are frozen, and a pytree node cannot lose a field."
    )


@contextmanager
def mutable(objects: Mapping[int, tuple[object, Assign]]) -> Generator[None, None, None]:
    """Within the block, and only in the current context, allow assignment to `objects`.

    `objects` maps `id(obj)` to `(obj, assign)`; holding `obj` keeps its id from being reused.
    Nested blocks see the union of their own and the enclosing permissions.
    """
    outer = _MUTABLE.get()
    token = _MUTABLE.set(objects if outer is None else {**outer, **objects})
    try:
        yield
    finally:
        _MUTABLE.reset(token)


class mutating:  # Used like a function: `with mutating(obj):`.
    """Allow plain assignment to one object for the block (a class's own `__init__`).

    A small class rather than `@contextmanager`, because it runs on every construction of a
    class with a custom `__init__`.
    """

    __slots__ = ("_obj", "_token")

    def __init__(self, obj: object) -> None:
        self._obj = obj

    def __enter__(self) -> None:
        outer = _MUTABLE.get()
        entry = (self._obj, object.__setattr__)
        permission = {id(self._obj): entry} if outer is None else {**outer, id(self._obj): entry}
        self._token = _MUTABLE.set(permission)

    def __exit__(self, *exc_info: object) -> None:
        _MUTABLE.reset(self._token)
