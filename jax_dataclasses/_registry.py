"""Field layouts of pytree dataclasses and their registration with JAX (DESIGN.md §2).

Unflatten never runs `__init__`: it creates the object with `object.__new__` and fills the
fields. Classes whose fields live in the instance `__dict__` (the common case) keep their
flattened form `(children, statics)` in the instance under `FLAT_ATTR`, maintained by every
path that sets fields (construction, unflatten, `copy_and_mutate`), so flatten is a C-level
attribute read (`operator.attrgetter`) rather than a Python call. Other classes (`slots=True`,
fields behind descriptors) flatten with a generated function.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from jax import tree_util

from jax_dataclasses._static_values import OK_TYPES, check_static_value

FLAT_ATTR = "__jdc_flat__"
"""Instance attribute holding `(children, statics)` for classes with `Layout.cached`."""


@dataclasses.dataclass(frozen=True)
class Layout:
    """How instances of one registered class are split into children and static values."""

    cls: type
    children: tuple[str, ...]
    statics: tuple[str, ...]
    cached: bool
    """Instances keep `(children, statics)` in their `__dict__` under `FLAT_ATTR`."""

    def same_fields(self, other: Layout) -> bool:
        return (self.children, self.statics, self.cached) == (
            other.children,
            other.statics,
            other.cached,
        )


_LAYOUTS: dict[type, Layout] = {}


def layout_of(cls: type) -> Layout | None:
    """The layout of a registered pytree dataclass (or adopted subclass), else None."""
    return _LAYOUTS.get(cls)


def compile_function(name: str, source: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """Define function `name` from generated `source`, with `namespace` as its globals."""
    exec(compile(source, f"<jax_dataclasses {name}>", "exec"), namespace)
    function: Callable[..., Any] = namespace[name]
    return function


def dict_setter(cls: type) -> Callable[[object, dict[str, Any]], None]:
    """The C-level setter of `obj.__dict__` for instances of `cls` (cheaper than `.update`)."""
    for klass in cls.__mro__:
        descriptor = klass.__dict__.get("__dict__")
        if descriptor is not None:
            setter: Callable[[object, dict[str, Any]], None] = descriptor.__set__
            return setter
    raise TypeError(f"instances of {cls.__qualname__} have no __dict__")


def _tuple_source(items: Iterable[str]) -> str:
    return "(" + "".join(f"{item}, " for item in items) + ")"


def _make_functions(layout: Layout) -> dict[str, Callable[..., Any]]:
    """Generate flatten, flatten-with-keys, unflatten, fill, refresh and finish for a layout.

    Generated locals are dunder-prefixed so that no field name can shadow them.
    """
    namespace: dict[str, Any] = {
        "__new": object.__new__,
        "__setattr": object.__setattr__,
        "__cls": layout.cls,
        "__flat": FLAT_ATTR,
        "__type": type,
        "__ok": OK_TYPES,
        "__check": check_static_value,
        "__missing": _raise_missing_field,
    }
    if layout.cached:
        namespace["__set_dict"] = dict_setter(layout.cls)
    for i, name in enumerate(layout.children):
        namespace[f"__key{i}"] = tree_util.GetAttrKey(name)
    fields = layout.children + layout.statics
    children = _tuple_source(f"__o.{name}" for name in layout.children)
    statics = _tuple_source(f"__o.{name}" for name in layout.statics)
    keyed = _tuple_source(f"(__key{i}, __o.{name})" for i, name in enumerate(layout.children))
    local = {name: f"__c{i}" for i, name in enumerate(layout.children)}
    local.update({name: f"__s{i}" for i, name in enumerate(layout.statics)})
    unpack_statics = ""
    if layout.statics:
        unpack_statics = f"    {_tuple_source(local[n] for n in layout.statics)} = __statics\n"
    unpack = unpack_statics
    if layout.children:
        unpack += f"    {_tuple_source(local[n] for n in layout.children)} = __children\n"
    functions = {
        "flatten_with_keys": compile_function(
            "flatten_with_keys",
            f"def flatten_with_keys(__o):\n    return ({keyed}, {statics})\n",
            namespace,
        ),
    }
    flat = compile_function(
        "flat", f"def flat(__o):\n    return ({children}, {statics})\n", namespace
    )
    if layout.cached:
        functions["flatten"] = operator.attrgetter(FLAT_ATTR)
        functions["flat_fallback"] = flat
        entries = "".join(f"{name!r}: {local[name]}, " for name in fields)
        store = f"    __set_dict(__o, {{{entries}__flat: (__children, __statics)}})\n"
        refresh = f"    __o.__dict__[__flat] = ({children}, {statics})\n"
        keep = "    __o.__dict__[__flat] = (__children, __statics)\n"
    else:
        functions["flatten"] = flat
        store = "".join(f"    __setattr(__o, {name!r}, {local[name]})\n" for name in fields)
        refresh = "    pass\n"
        keep = ""
    checks = "".join(
        f"    if __type({local[name]}) not in __ok: __check(__type(__o), {name!r}, {local[name]})\n"
        for name in layout.statics
    )
    functions["finish"] = compile_function(
        "finish",
        "def finish(__o):\n"
        f"    try:\n        __children = {children}\n        __statics = {statics}\n"
        "    except AttributeError:\n        __missing(__o)\n        raise\n"
        f"{unpack_statics}{checks}{keep}",
        namespace,
    )
    functions["unflatten"] = compile_function(
        "unflatten",
        "def unflatten(__statics, __children):\n"
        f"    __o = __new(__cls)\n{unpack}{store}    return __o\n",
        namespace,
    )
    functions["fill"] = compile_function(
        "fill",
        f"def fill(__o, __statics, __children):\n{unpack}{store}    return None\n",
        namespace,
    )
    functions["refresh"] = compile_function("refresh", f"def refresh(__o):\n{refresh}", namespace)
    return functions


class _FlatFallback:
    """Class-level `FLAT_ATTR` of cached classes: the flat form of an instance without one.

    A non-data descriptor, so the instance's own cache wins. Instances built without our
    `__init__` (`object.__new__` plus `object.__setattr__`, an `init=False` class) are still
    flattened correctly, just without the fast path.
    """

    def __init__(self, flat: Callable[[Any], object]) -> None:
        self.flat = flat

    def __get__(self, obj: object, owner: type | None = None) -> object:
        return self if obj is None else self.flat(obj)


class _Generated(NamedTuple):
    refresh: Callable[[Any], None]
    fill: Callable[[Any, tuple[Any, ...], tuple[Any, ...]], None]
    finish: Callable[[Any], None]


_GENERATED: dict[type, _Generated] = {}
_ON_REGISTER: list[Callable[[Layout], None]] = []


def on_register(hook: Callable[[Layout], None]) -> None:
    """Call `hook(layout)` for every class registered so far and for each one registered later.

    Used to register classes with optional libraries (flax serialization) once they are
    imported. Runs once per class, never per instance. `hook` must be idempotent: a class
    registered by another thread while this runs may be passed to it twice.
    """
    _ON_REGISTER.append(hook)
    for layout in list(_LAYOUTS.values()):
        hook(layout)


def register(layout: Layout) -> None:
    """Record `layout` and register its class as a keyed pytree node."""
    functions = _make_functions(layout)
    tree_util.register_pytree_with_keys(  # pyright: ignore[reportUnknownMemberType]  # jaxlib: no stub for the key types
        layout.cls,
        functions["flatten_with_keys"],
        functions["unflatten"],
        functions["flatten"],
    )
    if layout.cached:
        setattr(layout.cls, FLAT_ATTR, _FlatFallback(functions["flat_fallback"]))
    _LAYOUTS[layout.cls] = layout
    _GENERATED[layout.cls] = _Generated(
        functions["refresh"], functions["fill"], functions["finish"]
    )
    for hook in _ON_REGISTER:
        hook(layout)


def finish_construction(obj: object) -> None:
    """After a class's own `__init__` or `__post_init__`: check that every field is set and
    every static value is good, and build the flatten cache."""
    generated = _GENERATED.get(type(obj))
    if generated is None:
        cls = type(obj)
        raise TypeError(
            f"{cls.__qualname__} subclasses a pytree dataclass but was never registered as one, "
            "because a base class's __init_subclass__ does not call "
            "super().__init_subclass__(). Decorate it with @jdc.pytree_dataclass, or make that "
            "__init_subclass__ call super()."
        )
    generated.finish(obj)


def _raise_missing_field(obj: object) -> None:
    cls = type(obj)
    layout = _LAYOUTS[cls]
    for name in layout.children + layout.statics:
        if not hasattr(obj, name):
            raise TypeError(
                f"{cls.__qualname__}.__init__ did not set field {name!r}. Every field is part "
                "of the pytree: give it a default, or set it in __init__ or __post_init__."
            )


def filler_of(cls: type) -> Callable[[Any, tuple[Any, ...], tuple[Any, ...]], None]:
    """`fill(obj, statics, children)`: set every field of a blank `object.__new__(cls)` instance
    as unflatten does (cache included), so `copy_and_mutate` can create an object before copying
    its children and copy cycles."""
    return _GENERATED[cls].fill


def refresh(obj: object) -> None:
    """Rebuild the flatten cache of `obj` from its fields (no-op for uncached classes)."""
    _GENERATED[type(obj)].refresh(obj)


def set_field(obj: object, name: str, value: object) -> None:
    """Set one field of a registered instance, keeping its flatten cache in step."""
    object.__setattr__(obj, name, value)
    _GENERATED[type(obj)].refresh(obj)
