"""Frozen instances, and the per-context permissions to assign: while a class's own `__init__`
constructs an object, and inside a `copy_and_mutate` block.

Permissions live outside the instances, in `ContextVar`s, which are per thread and per asyncio
task: an object being constructed or mutated in one context stays frozen in every other. A
context copied while a permission holds (a task created inside the block) keeps the variable's
value but not the permission, because each permission is revoked in place when it ends.
1.6's mutability marks on instances (`Mutability`, `mark_mutable`, at the end) come first.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn

from jax_dataclasses._core.codegen import FILENAME_PREFIX
from jax_dataclasses._core.construct import is_constructing, is_initvar, raise_unregistered
from jax_dataclasses._core.record import layout_of
from jax_dataclasses._tree_api import flatten_one_level
from jax_dataclasses._validate import check_field

Assign = Callable[[Any, str, Any], None]
"""Performs `obj.name = value` for an object that may be mutated: `assign(obj, name, value)`."""

_MUTABLE: ContextVar[tuple[Mapping[int, Assign], ...]] = ContextVar(
    "jax_dataclasses_mutable", default=()
)
"""The objects of each open block in this context, innermost block first."""


def frozen_setattr(self: object, name: str, value: object) -> None:
    """`__setattr__` of every pytree dataclass: refused unless the object may be assigned.

    1.6's marks (`Mutability`, below) come first: code that marks an object decides alone.
    """
    legacy = getattr(self, MUTABILITY_ATTR, None)
    if legacy is Mutability.MUTABLE:
        assign_field(self, name, value, validate=True)
        return
    if legacy is Mutability.MUTABLE_NO_VALIDATION:  # 1.6 let this set anything.
        object.__setattr__(self, name, value)
        return
    if is_constructing(self):
        fields = layout_of(type(self)).fields  # type: ignore[union-attr]  # Registered: it is being constructed.
        if name not in fields and not _is_initvar_of(type(self), name):
            refuse_non_field(self, name)
        object.__setattr__(self, name, value)
        return
    for allowed in _MUTABLE.get():
        assign = allowed.get(id(self))
        if assign is not None:
            assign(self, name, value)
            return
    if layout_of(type(self)) is None:  # An undecorated subclass's own `__init__`.
        raise_unregistered(type(self))
    refuse_assignment(self, name)


def _is_initvar_of(cls: type, name: str) -> bool:
    """Whether `name` is an `InitVar` of `cls`: an `__init__` may assign it while constructing
    (a base's, when `cls` re-declares the base's field `name` as one), as on a frozen
    dataclass; it is not part of the pytree."""
    declared: dataclasses.Field[Any] | None = getattr(cls, "__dataclass_fields__", {}).get(name)
    return declared is not None and is_initvar(declared)


def assign_field(
    obj: object, name: str, value: object, validate: bool, original: object | None = None
) -> None:
    """Assign field `name` of a registered `obj` that may be mutated: with `validate`, a child
    must keep the structure, shapes and dtypes of the field's value in `original` (the object
    `obj` copies; `obj` itself by default) and a static value must pass the static-value
    checks. A property's setter runs; other attributes are refused: JAX rebuilds objects from
    their fields alone."""
    cls = type(obj)
    layout = layout_of(cls)
    if layout is None or name not in layout.fields:
        # A property's setter runs, as in 1.6; the fields it assigns come back here.
        # Looked up without running the getter.
        prop = inspect.getattr_static(cls, name, None)
        if layout is None or not isinstance(prop, property) or prop.fset is None:
            refuse_non_field(obj, name)
        prop.fset(obj, value)
        return
    if validate:
        check_field(layout, name, value, obj if original is None else original)
    object.__setattr__(obj, name, value)


def frozen_delattr(self: object, name: str) -> None:
    """`__delattr__` of every pytree dataclass: always refused (a field cannot go missing)."""
    raise dataclasses.FrozenInstanceError(
        f"cannot delete field {name!r} of {type(self).__qualname__}: pytree dataclass "
        "instances are frozen, and a pytree node cannot lose a field."
    )


def refuse_assignment(obj: object, name: str) -> NoReturn:
    """Refuse `obj.name = ...`, with a fix that works for the class: `jdc.replace` where it
    can make the copy, `jdc.copy_and_mutate` (which works on every class) where it cannot."""
    cls = type(obj)
    start = f"cannot assign to field {name!r} of {cls.__qualname__}: pytree dataclass instances are frozen."
    why_not = _why_replace_fails(cls, name)
    if why_not is None:
        raise dataclasses.FrozenInstanceError(
            f"{start} Use jdc.replace(obj, {name}=...) for a changed copy, or "
            "`with jdc.copy_and_mutate(obj) as copy:` to edit a copy in place."
        )
    raise dataclasses.FrozenInstanceError(
        f"{start} Edit a copy in place: `with jdc.copy_and_mutate(obj) as copy: copy.{name} = "
        f"...`. (jdc.replace(obj, {name}=...) cannot make this copy: {why_not}.)"
    )


def _why_replace_fails(cls: type, name: str) -> str | None:
    """Why `dataclasses.replace(obj, name=...)` cannot copy an instance of `cls`, or None: it
    calls `cls.__init__` with every `init` field as a keyword, which only our generated
    `__init__` takes as fields (an own one may mean other things by them), and it refuses an
    `init=False` field and a missing `InitVar` without default."""
    code = getattr(inspect.getattr_static(cls, "__init__"), "__code__", None)
    if code is None or not code.co_filename.startswith(FILENAME_PREFIX):
        return (
            f"it calls {cls.__qualname__}.__init__ again with every field as a keyword, and that "
            "__init__ is not the one generated from the fields (an own __init__ may take other "
            "parameters, or treat the stored values as new input)"
        )
    declared: dict[str, dataclasses.Field[Any]] = getattr(cls, "__dataclass_fields__", {})
    if name in declared and not declared[name].init:
        return f"field {name!r} has init=False, which replace refuses"
    initvar = next(
        (f.name for f in declared.values() if is_initvar(f) and f.default is dataclasses.MISSING),
        None,
    )
    if initvar is not None:
        return f"it needs the InitVar {initvar!r} given again, which the instance does not keep"
    return None


def refuse_non_field(obj: object, name: str) -> NoReturn:
    raise dataclasses.FrozenInstanceError(
        f"cannot assign to {name!r} of {type(obj).__qualname__}: it is not a field. A pytree "
        "dataclass has no state besides its fields (JAX rebuilds objects from them, without "
        "__init__), so declare it as a field (Static[...] if it is not an array), or compute "
        "it in a method or property."
    )


@contextmanager
def mutable(objects: Mapping[int, Assign]) -> Generator[None, None, None]:
    """Within the block, and only in the current context, allow assignment to `objects`.

    `objects` maps `id(obj)` to the function that performs assignments to `obj`. The caller
    keeps the objects alive while its assign functions accept them (so no id is reused), and
    makes the functions refuse once its block ends. Blocks may close in any order (two
    generators, each inside a block): each removes only its own objects. Blocks are chained,
    not merged, so that opening one inside another costs nothing per object of the outer one.
    """
    _MUTABLE.set((objects, *_MUTABLE.get()))
    try:
        yield
    finally:
        _MUTABLE.set(tuple(layer for layer in _MUTABLE.get() if layer is not objects))


# -- hashing and pickling frozen instances ---------------------------------------------


def hash_naming_the_field(generated: Callable[[object], int]) -> Callable[[object], int]:
    """The hash `dataclasses` generated, whose error for an unhashable field (an array) says
    which field, and why something hashed the instance."""

    @functools.wraps(generated)
    def __hash__(self: object) -> int:
        try:
            return generated(self)
        except TypeError:
            raise TypeError(_unhashable_message(self)) from None

    return __hash__


def _unhashable_message(obj: object) -> str:
    cls = type(obj)
    field = next(
        (
            f.name
            for f in dataclasses.fields(obj)  # type: ignore[arg-type]
            if (f.hash or (f.hash is None and f.compare)) and not _hashable(getattr(obj, f.name))
        ),
        "?",
    )
    value = type(getattr(obj, field, None)).__name__
    return (
        f"cannot hash {cls.__qualname__}: field {field!r} holds a value of type {value}, which "
        "is unhashable "
        "(a pytree dataclass hashes its fields, as a frozen dataclass does). Given to jax.jit "
        "as the function to compile (jax.jit(model)), an instance is hashed: compile its "
        "method instead, jax.jit(type(model).__call__)(model, ...), or decorate the method "
        "with @jdc.jit. As a static value, hold hashable values in it."
    )


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def slots_getstate(self: object) -> list[object]:
    """`__getstate__` of a `slots=True` class that `dataclasses` does not see as frozen: the
    fields' values, set back by `slots_setstate` without our `__setattr__`."""
    return [getattr(self, f.name) for f in dataclasses.fields(self)]  # type: ignore[arg-type]


def slots_setstate(self: object, state: list[object]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=True):  # type: ignore[arg-type]
        object.__setattr__(self, f.name, value)


# -- jax_dataclasses 1.6's mutability marks ------------------------------------------------
# jax_dataclasses 1.6's private mutability API, kept because downstream libraries use it.
#
# 1.6 stored a `_Mutability` state in each instance's `__mutability__` attribute, and
# `_mark_mutable(obj, mutable, visited)` (here `mark_mutable`) set it on `obj` and every
# dataclass under it, in place and until marked again. Those libraries import both names from
# `jax_dataclasses._copy_and_mutate`, read `obj.__mutability__` to restore the previous state,
# and assign fields of marked objects outside any `copy_and_mutate` block. Marked objects are
# assigned by `frozen_setattr`: `MUTABLE` validates like `copy_and_mutate(obj)` (fields
# only); `MUTABLE_NO_VALIDATION` sets anything, as 1.6 did (attributes that are not fields do not
# survive JAX transformations). New code uses `copy_and_mutate`.

MUTABILITY_ATTR = "__mutability__"


class Mutability(enum.Enum):
    """1.6's `_Mutability`: the state `_mark_mutable` stores in `__mutability__`."""

    FROZEN = enum.auto()
    MUTABLE = enum.auto()
    MUTABLE_NO_VALIDATION = enum.auto()


def mark_mutable(obj: Any, mutable: Mutability, visited: set[int]) -> None:
    """Set the mutability of `obj` and of every dataclass inside it, in place.

    `visited` holds the ids of objects already marked (shared between calls to mark several
    trees once, and what stops cycles).
    """
    if id(obj) in visited:
        return
    visited.add(id(obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if not hasattr(obj, "__dict__"):
            raise TypeError(
                f"cannot mark {type(obj).__qualname__} mutable: 1.6's mutability marks live in "
                "the instance __dict__, which slots=True classes do not have. Use "
                "`with jdc.copy_and_mutate(obj) as copy:` instead."
            )
        object.__setattr__(obj, MUTABILITY_ATTR, mutable)
    flattened = flatten_one_level(obj)
    if flattened is not None:
        for child in flattened[0]:
            mark_mutable(child, mutable, visited)
