"""Field layouts of pytree dataclasses and their registration with JAX (docs/design.md §3).

Every class is a keyed Python node with generated functions: flatten reads the fields (nothing
is cached on instances, so it cannot go stale), and unflatten creates the object with
`object.__new__` and sets the fields, so it never runs `__init__` or `__post_init__` (JAX's
C++ dataclass node would call the class, and with it any wrapper a later decorator puts on
`__init__`).

A class is registered when it is decorated, or adopted as an undecorated subclass. It can be
registered again while it is being created (adopted by its base's `__init_subclass__`, then
decorated; or rebuilt by cloudpickle): JAX keeps the functions it was first given, so those
are updated in place with the new layout's code.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

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
    marks: tuple[str, ...]
    """What makes each of `statics` static: `Static` (its annotation) or a field metadata key."""
    flatten: Flatten
    """`flatten(obj) -> (children, statics)`, tuples in field order."""
    fill: Fill
    """`fill(obj, statics, children)`: set every field of a blank `object.__new__` instance."""
    flatten_with_keys: Callable[[Any], Any]
    unflatten: Callable[[Any, Any], Any]

    @property
    def fields(self) -> tuple[str, ...]:
        return self.children + self.statics

    @property
    def functions(self) -> tuple[Callable[..., Any], ...]:
        return (self.flatten, self.fill, self.flatten_with_keys, self.unflatten)


_LAYOUTS: dict[type, Layout] = {}
_ON_REGISTER: list[Callable[[Layout], None]] = []


def layout_of(cls: type) -> Layout | None:
    """The layout of a registered pytree dataclass (or adopted subclass), else None."""
    return _LAYOUTS.get(cls)


def on_register(hook: Callable[[Layout], None]) -> None:
    """Call `hook(layout)` for every class registered so far and for each one registered later.

    Used to register classes with optional libraries (flax serialization) once they are
    imported. `hook` must be idempotent: a class registered by another thread while this runs
    may be passed to it twice, and a class registered again is passed again.
    """
    _ON_REGISTER.append(hook)
    for layout in list(_LAYOUTS.values()):
        hook(layout)


def register(
    cls: type, children: tuple[str, ...], statics: tuple[str, ...], marks: tuple[str, ...]
) -> None:
    """Generate the tree functions of `cls` and register it with JAX as a keyed pytree node."""
    old = _LAYOUTS.get(cls)
    if old is not None and (old.children, old.statics, old.marks) == (children, statics, marks):
        return
    layout = _generate(cls, children, statics, marks)
    if old is None:
        try:
            tree_util.register_pytree_with_keys(  # pyright: ignore[reportUnknownMemberType]  # jaxlib: no stub for the key types
                cls, layout.flatten_with_keys, layout.unflatten, layout.flatten
            )
        except ValueError as error:  # JAX's "Duplicate custom PyTreeDef type registration".
            raise ValueError(
                f"{cls.__qualname__} is already registered with JAX as a pytree node, by "
                "something other than pytree_dataclass (jax.tree_util.register_dataclass, "
                "register_pytree_node or another library's decorator or base class). Remove "
                "that registration: pytree_dataclass registers the class itself."
            ) from error
    else:  # JAX and the old layout's users hold the old functions: give them the new code.
        for target, source in zip(old.functions, layout.functions, strict=True):
            _take_code(target, source)
        layout = dataclasses.replace(old, children=children, statics=statics, marks=marks)
    _LAYOUTS[cls] = layout
    setattr(cls, REGISTRATION_ATTR, _Registration(cls, children, statics, marks))
    for hook in _ON_REGISTER:
        hook(layout)


def _generate(
    cls: type, children: tuple[str, ...], statics: tuple[str, ...], marks: tuple[str, ...]
) -> Layout:
    """Flatten, fill, flatten-with-keys and unflatten for one layout. Each function's closure
    variables are the same for every layout, so `_take_code` can move code between them."""
    fields = children + statics
    child_values = tuple_source([f"o.{name}" for name in children])
    static_values = tuple_source([f"o.{name}" for name in statics])
    local = [f"c{i}" for i in range(len(children))] + [f"s{i}" for i in range(len(statics))]
    unpack: list[str] = []
    if statics:
        unpack.append(f"{tuple_source(local[len(children) :])} = statics")
    if children:
        unpack.append(f"{tuple_source(local[: len(children)])} = children")
    store = [f"__jdc_setattr(o, {name!r}, {var})" for name, var in zip(fields, local, strict=True)]
    if not store:  # Referenced anyway, so that every layout's code has the same closure.
        store = ["__jdc_setattr"]
    setter = {"__jdc_setattr": object.__setattr__}
    keys = tuple(tree_util.GetAttrKey(name) for name in children)
    return Layout(
        cls,
        children,
        statics,
        marks,
        flatten=make_function(
            cls, "flatten", ["o"], [f"return ({child_values}, {static_values})"], {}
        ),
        fill=make_function(cls, "fill", ["o", "statics", "children"], unpack + store, setter),
        flatten_with_keys=make_function(
            cls,
            "flatten_with_keys",
            ["o"],
            [f"return (__jdc_tuple(__jdc_zip(__jdc_keys, {child_values})), {static_values})"],
            {"__jdc_keys": keys, "__jdc_tuple": tuple, "__jdc_zip": zip},
        ),
        unflatten=make_function(
            cls,
            "unflatten",
            ["statics", "children"],
            ["o = __jdc_new(__jdc_cls)", *unpack, *store, "return o"],
            {**setter, "__jdc_new": object.__new__, "__jdc_cls": cls},
        ),
    )


def _take_code(target: Callable[..., Any], source: Callable[..., Any]) -> None:
    """Make function `target` run `source`'s code with `source`'s closure values."""
    target.__code__ = source.__code__
    for target_cell, source_cell in zip(
        target.__closure__ or (), source.__closure__ or (), strict=True
    ):
        target_cell.cell_contents = source_cell.cell_contents


REGISTRATION_ATTR = "__jdc_registration__"


class _Registration:
    """Kept on each registered class, so that a class that cloudpickle copies by value (one
    defined in `__main__`, a notebook or a function) is registered again where it is loaded:
    unpickling this attribute registers the rebuilt class. (Pickling by reference, the
    normal case, never copies class attributes.)"""

    __slots__ = ("args",)

    def __init__(self, *args: object) -> None:
        self.args = args  # `register`'s arguments

    def __reduce__(self) -> tuple[object, ...]:
        return (_register_loaded, self.args)


def _register_loaded(
    cls: type, children: tuple[str, ...], statics: tuple[str, ...], marks: tuple[str, ...]
) -> object:
    """A class cloudpickle rebuilds, while it restores the class's attributes."""
    register(cls, children, statics, marks)
    return cls.__dict__[REGISTRATION_ATTR]


# -- subclasses that are not registered, and why ------------------------------------------

_CLASSVAR_SOURCE = re.compile(r"^\s*(?:[\w.]+\.)?ClassVar\b")


def new_fields(sub: type) -> list[str]:
    """Fields an undecorated subclass of a pytree dataclass adds to those of its pytree base:
    its own annotations (not `ClassVar`s, not re-annotated inherited fields) and fields of
    plain dataclass bases. Only `@pytree_dataclass` can make those part of the pytree."""
    parent = next(found for base in sub.__mro__[1:] if (found := layout_of(base)) is not None)
    known = set(parent.fields)
    inherited = {
        f.name
        for base in sub.__mro__[1:]
        if dataclasses.is_dataclass(base)
        for f in dataclasses.fields(base)
    }
    declared = [name for name in _annotated_names(sub) if name not in known | inherited]
    return declared + sorted(inherited - known)


def _annotated_names(cls: type) -> list[str]:
    """Annotated names a class body declares itself, other than `ClassVar`s."""
    names: list[str] = []
    for name, annotation in inspect.get_annotations(cls).items():
        if isinstance(annotation, str):
            if _CLASSVAR_SOURCE.match(annotation):
                continue
        elif annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar:
            continue
        names.append(name)
    return names


def raise_unregistered(cls: type) -> NoReturn:
    """Explain why subclass `cls` of a pytree dataclass is not a pytree itself."""
    declared = new_fields(cls)
    if declared:
        raise TypeError(
            f"{cls.__qualname__} subclasses a pytree dataclass and declares fields "
            f"{', '.join(map(repr, declared))} but is not decorated. Add @jdc.pytree_dataclass "
            f"above `class {cls.__name__}` so the new fields become part of the pytree."
        )
    raise TypeError(
        f"{cls.__qualname__} subclasses a pytree dataclass but was never registered as one, "
        "because a base class's __init_subclass__ does not call super().__init_subclass__(). "
        "Decorate it with @jdc.pytree_dataclass, or make that __init_subclass__ call super()."
    )
