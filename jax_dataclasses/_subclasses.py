"""The rules for subclasses of pytree dataclasses that are not decorated (docs/design.md §6).

An undecorated subclass is a pytree with its base's fields when it adds none; one that adds
fields (itself, or through an undecorated class between it and its pytree base) is refused
when it is constructed, with a message that names them and says to decorate it. `_dataclass`
applies these rules when a subclass is created (adoption); the frozen `__setattr__` and the
generated `__init__` use them to explain a class that was never registered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NoReturn

from jax_dataclasses._annotations import class_annotations, pseudo_field_kind
from jax_dataclasses._registry import layout_of


def new_fields(sub: type) -> list[str]:
    """Fields an undecorated subclass of a pytree dataclass adds to those of its pytree base:
    annotations that it, or an undecorated class between it and that base, declares (not
    `ClassVar`s, not re-annotated inherited fields), fields of plain dataclass bases, and
    the base's fields when `dataclasses` finds the subclass's fields elsewhere (a plain
    dataclass listed before the pytree base). Only `@pytree_dataclass` can make those part
    of the pytree; each comes with the class that declares it."""
    parent = next(found for base in sub.__mro__[1:] if (found := layout_of(base)) is not None)
    known = set(parent.fields)
    inherited = {
        f.name
        for base in sub.__mro__[1:]
        if dataclasses.is_dataclass(base)
        for f in dataclasses.fields(base)
    }
    declared = [
        f"{name!r}" + ("" if klass is sub else f" (declared by {klass.__qualname__})")
        for klass in sub.__mro__
        if issubclass(klass, parent.cls) and layout_of(klass) is None
        for name in _annotated_names(klass)
        if name not in known | inherited
    ]
    declared += [repr(name) for name in sorted(inherited - known)]
    resolved = {f.name for f in dataclasses.fields(sub)}
    if not declared and resolved != known:
        owner = next(k for k in sub.__mro__ if "__dataclass_fields__" in k.__dict__)
        declared = [
            f"{name!r} (of {parent.cls.__qualname__}, which dataclasses does not see: it reads "
            f"the fields of {owner.__qualname__}, an earlier base)"
            for name in parent.fields
        ]
    return declared


def _annotated_names(cls: type) -> list[str]:
    """Annotated names a class body declares itself, other than `ClassVar`s."""
    names: list[str] = []
    for name, annotation in class_annotations(cls).items():
        if pseudo_field_kind(annotation) != "ClassVar":
            names.append(name)
    return names


def raise_unregistered(cls: type) -> NoReturn:
    """Explain why subclass `cls` of a pytree dataclass is not a pytree itself."""
    declared = new_fields(cls)
    decorator = _other_decorator(cls)
    if declared and decorator is not None:
        base = next(b for b in cls.__mro__[1:] if layout_of(b) is not None)
        raise TypeError(
            f"{cls.__qualname__} subclasses the pytree dataclass {base.__qualname__} and is "
            f"decorated with {decorator}, which does not make a subclass of a pytree dataclass "
            f"one: its fields {', '.join(declared)} would not be part of the pytree. Decorate "
            f"it with @jdc.pytree_dataclass instead (it takes the same arguments, and flax's "
            "field(pytree_node=False) marks a static field there too)."
        )
    if declared:
        raise TypeError(
            f"{cls.__qualname__} subclasses a pytree dataclass and declares fields "
            f"{', '.join(declared)} but is not decorated. Add @jdc.pytree_dataclass "
            f"above `class {cls.__name__}` so the new fields become part of the pytree."
        )
    raise TypeError(
        f"{cls.__qualname__} subclasses a pytree dataclass but was never registered as one, "
        "because a base class's __init_subclass__ does not call super().__init_subclass__(). "
        "Decorate it with @jdc.pytree_dataclass, or make that __init_subclass__ call super()."
    )


def _other_decorator(cls: type) -> str | None:
    """The dataclass decorator other than ours that was applied to `cls`, if one was."""
    if cls.__dict__.get("_flax_dataclass"):
        return "@flax.struct.dataclass"
    if "__dataclass_params__" in cls.__dict__:
        return "@dataclasses.dataclass"
    return None


UNDECORATED_ATTR = "__jdc_undecorated__"
"""On an `__init__` that adoption installed on an undecorated subclass: the class's own
`__init__` it stands for (None if the class body defined none), which a decorator that runs
later takes instead."""


def undecorated_init(cls: type, own: Callable[..., None] | None) -> Callable[..., None]:
    """`__init__` for an undecorated subclass `cls` that adds fields, which would not be in the
    pytree: constructing it, or an undecorated subclass of it, raises. A registered subclass
    constructed through it (`super().__init__()`) runs `own`, or the next `__init__` in its
    MRO, as without it. A decorator that runs later on `cls` puts back `own` (kept on it)."""

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        if layout_of(type(self)) is None:
            raise_unregistered(type(self))
        if own is not None:
            own(self, *args, **kwargs)
        else:
            super(cls, self).__init__(*args, **kwargs)  # type: ignore[arg-type]  # mypy wants a class literal

    setattr(__init__, UNDECORATED_ATTR, own)
    if own is not None:  # `dataclasses` follows it to mend `super()` in a `slots=True` copy.
        __init__.__wrapped__ = own  # type: ignore[attr-defined]
    return __init__


def check_constructible(obj: object) -> None:
    """An inherited or own `__init__` is about to construct `obj`: its class must be a
    registered pytree, with its pending annotations settled (`Layout.settle`)."""
    cls = type(obj)
    layout = layout_of(cls)
    if layout is None:
        raise_unregistered(cls)
    if layout.pending:
        layout.settle()
