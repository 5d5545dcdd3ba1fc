"""Field layouts of pytree dataclasses and their registration with JAX (docs/design.md §3).

Every class is a keyed Python node with generated functions: flatten reads the fields (nothing
is cached on instances, so it cannot go stale), and unflatten creates the object with
`object.__new__` and sets the fields, so it never runs `__init__` or `__post_init__` (JAX's
C++ dataclass node would call the class, and with it any wrapper a later decorator puts on
`__init__`).

A class is registered when it is decorated, or adopted as an undecorated subclass. It can be
registered again while it is being created (adopted by its base's `__init_subclass__`, then
decorated; or rebuilt by cloudpickle): JAX keeps the functions it was first given, so those
are updated in place with the new layout's code, as they are when a class whose annotations
named something not defined yet has settled them (`Layout.settle`). Every attribute the
package sets on a user's class goes through `install`, at the end.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jax import tree_util

from jax_dataclasses._annotations import Mark, PendingStatic
from jax_dataclasses._codegen import FunctionSource, make_functions, take_code

Flatten = Callable[[Any], tuple[tuple[Any, ...], Any]]
Unflatten = Callable[[Any, Any], Any]


@dataclasses.dataclass(frozen=True)
class Layout:
    """How instances of one registered class are split into children and static values.

    The static values travel as the treedef's aux data in the cheapest form JAX compares:
    None without static fields, the bare value with one, a tuple with several (`aux`).
    """

    cls: type
    children: tuple[str, ...]
    statics: tuple[str, ...]
    marks: tuple[Mark, ...]
    """What makes each of `statics` static (`Mark`)."""
    flatten: Flatten
    """`flatten(obj) -> (children, aux)`: children a tuple in field order."""
    flatten_with_keys: Callable[[Any], Any]
    unflatten: Unflatten
    """`unflatten(aux, children)`: a new instance, built field by field (no `__init__`)."""
    pending: tuple[PendingStatic, ...] = ()
    """Children whose annotations named something not defined when the class was created."""
    settle: Callable[[], None] = lambda: None
    """Settles `pending`, then registers the class again without them; the generated functions
    of a layout with `pending` call it first."""

    @property
    def fields(self) -> tuple[str, ...]:
        return self.children + self.statics

    @property
    def functions(self) -> tuple[Callable[..., Any], ...]:
        return (self.flatten, self.flatten_with_keys, self.unflatten)

    def __reduce__(self) -> tuple[object, ...]:
        """A class that cloudpickle copies by value (defined in `__main__`, a notebook or a
        function) carries its layout as an attribute: unpickling it registers the rebuilt
        class with these fields. (Pickling by reference never copies class attributes.)"""
        return (_register_loaded, (self.cls, self.children, self.statics, self.marks))


LAYOUT_ATTR = "__jdc_layout__"
"""The class attribute that holds a registered class's `Layout`: its one record."""
_REGISTERED: list[type] = []
"""Every registered class, in order, for hooks added later (`on_register`)."""
_ON_REGISTER: list[Callable[[Layout], None]] = []
_LOCK = threading.RLock()
"""Held while a class is registered, and while a hook is added (`on_register`)."""


def layout_of(cls: type) -> Layout | None:
    """The layout of a registered pytree dataclass (or adopted subclass), else None. Read from
    the class's own namespace (a subclass does not inherit it, and the `slots=True` copy that
    `dataclasses` makes of a class carries the original's, which is not its own)."""
    layout: Layout | None = cls.__dict__.get(LAYOUT_ATTR)
    return layout if layout is not None and layout.cls is cls else None


def on_register(hook: Callable[[Layout], None]) -> None:
    """Call `hook(layout)` for every class registered so far and for each one registered later.

    Used to register classes with optional libraries (flax serialization) once they are
    imported. `hook` must be idempotent: a class registered by another thread while this runs
    may be passed to it twice, and a class registered again is passed again.
    """
    with _LOCK:
        _ON_REGISTER.append(hook)
        registered = list(_REGISTERED)
    for cls in registered:
        layout = layout_of(cls)
        if layout is not None:
            hook(layout)


def register(
    cls: type,
    children: tuple[str, ...],
    statics: tuple[str, ...],
    marks: tuple[Mark, ...],
    functions: Mapping[str, Callable[..., Any]] | None = None,
    pending: tuple[PendingStatic, ...] = (),
    settle: Callable[[], None] | None = None,
) -> None:
    """Register `cls` with JAX as a keyed pytree node, with the tree functions of this layout:
    `functions`, compiled from `tree_sources(cls, children, statics, bool(pending))` with the
    class's other generated functions, or compiled here. With `pending`, `settle` is what
    those functions call first."""
    if functions is None:
        functions = make_functions(cls, tree_sources(cls, children, statics, bool(pending)))
    layout = Layout(
        cls,
        children,
        statics,
        marks,
        flatten=functions["flatten"],
        flatten_with_keys=functions["flatten_with_keys"],
        unflatten=functions["unflatten"],
        pending=pending,
        **({"settle": settle} if settle is not None else {}),
    )
    with _LOCK:  # A check and a set: one registration with JAX per class, whichever thread.
        _register(cls, layout)


def _register(cls: type, layout: Layout) -> None:
    old = layout_of(cls)
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
            take_code(target, source)
        layout = dataclasses.replace(
            old,
            children=layout.children,
            statics=layout.statics,
            marks=layout.marks,
            pending=layout.pending,
            settle=layout.settle,
        )
    install(cls, {LAYOUT_ATTR: layout})
    if old is None:
        _REGISTERED.append(cls)
    for hook in _ON_REGISTER:
        hook(layout)


def tree_sources(
    cls: type, children: tuple[str, ...], statics: tuple[str, ...], pending: bool = False
) -> list[FunctionSource]:
    """Flatten, flatten-with-keys and unflatten for one layout, as JAX's custom nodes are
    fastest: literal tuples, aux data as in `Layout`, fields set with `object.__setattr__`
    (writing `__dict__` directly is about twice as fast, but gives every instance JAX builds
    a dict of its own: 64 bytes more than a constructed one, on Python 3.11 to 3.13). Each
    function's closure variables are the same for every layout, so `take_code` can move
    code between them. With `pending`, flatten first settles the layout's pending fields
    (through the instance's class: no helper of its own)."""
    fields = children + statics
    child_values = _tuple_source([f"o.{name}" for name in children])
    aux = (
        "None"
        if not statics
        else f"o.{statics[0]}"
        if len(statics) == 1
        else _tuple_source([f"o.{name}" for name in statics])
    )
    pairs = _tuple_source([f"(__jdc_keys[{i}], o.{name})" for i, name in enumerate(children)])
    local = [f"c{i}" for i in range(len(children))] + [f"s{i}" for i in range(len(statics))]
    unpack: list[str] = []
    if len(statics) == 1:
        unpack.append(f"{local[-1]} = aux")
    elif statics:
        unpack.append(f"{_tuple_source(local[len(children) :])} = aux")
    if children:
        unpack.append(f"{_tuple_source(local[: len(children)])} = children")
    store = [f"__jdc_setattr(o, {name!r}, {var})" for name, var in zip(fields, local, strict=True)]
    keys = tuple(tree_util.GetAttrKey(name) for name in children)
    settle = [f"o.__class__.{LAYOUT_ATTR}.settle()"] if pending else []
    return [
        FunctionSource("flatten", ["o"], [*settle, f"return ({child_values}, {aux})"], {}),
        FunctionSource(
            "flatten_with_keys",
            ["o"],
            [*settle, f"return ({pairs}, {aux})"],
            {"__jdc_keys": keys},
        ),
        FunctionSource(
            "unflatten",
            ["aux", "children"],
            ["o = __jdc_new(__jdc_cls)", *unpack, *store, "return o"],
            {"__jdc_setattr": object.__setattr__, "__jdc_new": object.__new__, "__jdc_cls": cls},
        ),
    ]


def _tuple_source(items: Sequence[str]) -> str:
    """Python source of a tuple display with `items`: `(a, b, )`, `()`."""
    return "(" + "".join(f"{item}, " for item in items) + ")"


def _register_loaded(
    cls: type, children: tuple[str, ...], statics: tuple[str, ...], marks: tuple[Mark, ...]
) -> Layout:
    """A class cloudpickle rebuilds, while it restores the class's attributes."""
    register(cls, children, statics, marks)
    return cls.__dict__[LAYOUT_ATTR]  # type: ignore[no-any-return]  # Just installed.


# -- installing attributes on a user's class -----------------------------------------------
# The one place where we set attributes on a user's class.
#
# Every attribute this package puts on a class, or takes back, goes through `install`: the
# generated methods and hooks, the registration token, the stand-ins for JAX-array defaults
# while `dataclasses` runs, and the generated docstring. A reader finds here, by its callers,
# everything a decorated class carries that its body did not define.


def install(cls: type, attributes: Mapping[str, object]) -> None:
    """Set each of `attributes` on `cls`."""
    for name, value in attributes.items():
        setattr(cls, name, value)
