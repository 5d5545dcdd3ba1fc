"""Field layouts of pytree dataclasses and their registration with JAX (docs/design.md §3).

Unflatten never runs a user's `__init__` or `__post_init__`. A class whose `__init__` is our
generated one and only sets fields (no `__post_init__`, `InitVar` or `init=False` field) is
registered as JAX's C++ dataclass node (`register_dataclass`): it flattens in C++, and its
unflatten calls that `__init__`, which is the same as setting the fields. Every other class is
a keyed Python node whose generated unflatten creates the object with `object.__new__` and
sets the fields. Nothing is cached on instances: flatten reads the fields themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jax import tree_util

from jax_dataclasses._codegen import make_function, tuple_source

Flatten = Callable[[Any], tuple[tuple[Any, ...], tuple[Any, ...]]]
Fill = Callable[[Any, tuple[Any, ...], tuple[Any, ...]], None]


@dataclasses.dataclass(frozen=True)
class Layout:
    """How instances of one registered class are split into children and static values."""

    cls: type
    children: tuple[str, ...]
    statics: tuple[str, ...]
    cpp_node: bool
    """Registered with `register_dataclass` (else as a generated Python node)."""
    flatten: Flatten
    """`flatten(obj) -> (children, statics)`, tuples in field order."""
    fill: Fill
    """`fill(obj, statics, children)`: set every field of a blank `object.__new__` instance."""

    @property
    def fields(self) -> tuple[str, ...]:
        return self.children + self.statics


_LAYOUTS: dict[type, Layout] = {}
_ON_REGISTER: list[Callable[[Layout], None]] = []


REGISTRATION_ATTR = "__jdc_registration__"


class _Registration:
    """Kept on each registered class, so that a class that cloudpickle copies by value (one
    defined in `__main__`, a notebook or a function) is registered again where it is loaded:
    unpickling this attribute registers the rebuilt class. (Pickling by reference, the
    normal case, never copies class attributes.)"""

    __slots__ = ("children", "cls", "statics")

    def __init__(self, cls: type, children: tuple[str, ...], statics: tuple[str, ...]) -> None:
        self.cls, self.children, self.statics = cls, children, statics

    def __reduce__(self) -> tuple[object, ...]:
        return (_register_loaded, (self.cls, self.children, self.statics))


def _register_loaded(cls: type, children: tuple[str, ...], statics: tuple[str, ...]) -> object:
    """A rebuilt class, while cloudpickle restores its attributes: a Python node, since its
    dataclass fields may not be restored yet (which `register_dataclass` would check)."""
    if layout_of(cls) is None:
        register(cls, children, statics, cpp_node=False)
    return cls.__dict__[REGISTRATION_ATTR]


def layout_of(cls: type) -> Layout | None:
    """The layout of a registered pytree dataclass (or adopted subclass), else None."""
    return _LAYOUTS.get(cls)


def on_register(hook: Callable[[Layout], None]) -> None:
    """Call `hook(layout)` for every class registered so far and for each one registered later.

    Used to register classes with optional libraries (flax serialization) once they are
    imported. `hook` must be idempotent: a class registered by another thread while this runs
    may be passed to it twice.
    """
    _ON_REGISTER.append(hook)
    for layout in list(_LAYOUTS.values()):
        hook(layout)


def register(
    cls: type, children: tuple[str, ...], statics: tuple[str, ...], cpp_node: bool
) -> None:
    """Generate the tree functions of `cls` and register it with JAX as a keyed pytree node."""
    fields = children + statics
    flat = f"return ({tuple_source([f'o.{n}' for n in children])}, "
    flat += f"{tuple_source([f'o.{n}' for n in statics])})"
    flatten: Flatten = make_function(cls, "flatten", ["o"], [flat], {})
    local = [f"c{i}" for i in range(len(children))] + [f"s{i}" for i in range(len(statics))]
    unpack: list[str] = []
    if statics:
        unpack.append(f"{tuple_source(local[len(children) :])} = statics")
    if children:
        unpack.append(f"{tuple_source(local[: len(children)])} = children")
    store = [f"__jdc_setattr(o, {name!r}, {var})" for name, var in zip(fields, local, strict=True)]
    helpers = {"__jdc_setattr": object.__setattr__}
    fill: Fill = make_function(cls, "fill", ["o", "statics", "children"], unpack + store, helpers)
    if cpp_node:
        tree_util.register_dataclass(cls, data_fields=list(children), meta_fields=list(statics))
    else:
        keys = {f"__jdc_key{i}": tree_util.GetAttrKey(name) for i, name in enumerate(children)}
        keyed = tuple_source([f"(__jdc_key{i}, o.{name})" for i, name in enumerate(children)])
        flatten_with_keys = make_function(
            cls,
            "flatten_with_keys",
            ["o"],
            [f"return ({keyed}, {tuple_source([f'o.{n}' for n in statics])})"],
            keys,
        )
        unflatten = make_function(
            cls,
            "unflatten",
            ["statics", "children"],
            ["o = __jdc_new(__jdc_cls)", *unpack, *store, "return o"],
            {**helpers, "__jdc_new": object.__new__, "__jdc_cls": cls},
        )
        tree_util.register_pytree_with_keys(  # pyright: ignore[reportUnknownMemberType]  # jaxlib: no stub for the key types
            cls, flatten_with_keys, unflatten, flatten
        )
    layout = Layout(cls, children, statics, cpp_node, flatten, fill)
    _LAYOUTS[cls] = layout
    setattr(cls, REGISTRATION_ATTR, _Registration(cls, children, statics))
    for hook in _ON_REGISTER:
        hook(layout)
