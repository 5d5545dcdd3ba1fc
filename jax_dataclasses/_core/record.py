"""The record of every pytree dataclass (`Layout`), its flatten and unflatten sources, and its
registration with JAX (docs/design/core.md).

Every class is a keyed Python node with generated functions: flatten reads the fields (nothing
is cached on instances, so it cannot go stale), and unflatten creates the object with
`object.__new__` and sets the fields, so it never runs `__init__` or `__post_init__` (JAX's
C++ dataclass node would call the class, and with it any wrapper a later decorator puts on
`__init__`). The class builder (`_core.builder`) makes the record and is the only caller of
`register`; every other feature reads the record (`layout_of`), never the annotations.

A class can be registered again while it is created (adopted by its base's
`__init_subclass__`, then decorated; rebuilt by cloudpickle; built again once its pending
names are decided): JAX keeps the functions it was first given, so those take the new
layout's code in place (`_core.codegen.take_code`).
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, cast

from jax import tree_util

from jax_dataclasses._core import messages
from jax_dataclasses._core.codegen import FunctionSource, take_code
from jax_dataclasses._field_declarations.forms import NO_EVOLUTION, Evolution, Mark
from jax_dataclasses._field_declarations.reader import Declaration

Flatten = Callable[[Any], tuple[tuple[Any, ...], Any]]
Unflatten = Callable[[Any, Any], Any]
TREE_FUNCTIONS = ("flatten", "flatten_with_keys", "unflatten")
"""The names of the functions JAX holds for a class (`Layout.functions`)."""
Changes = tuple[tuple[str, object, object], ...]
"""What a build changed on a class: per attribute, its name, value before and value left."""


class Layout:
    """The record of one registered class: its fields' declarations, how its checkpoints
    changed (`Evolution`), how instances are split into children and static values, and its
    generated functions. Immutable: every attribute is set as it is made, and a change is a
    new record (`replace`), so whoever holds one reads what was decided then.

    The static values travel as the treedef's aux data in the cheapest form JAX compares:
    None without static fields, the bare value with one, a tuple with several.

    Attributes:
        cls: The class.
        declarations: Every field's, in `dataclasses.fields` order.
        evolution: How checkpoints of the class changed: its own declaration and its bases'.
        children, statics: The fields' names, children and static values apart.
        marks: What makes each of `statics` static.
        frozen: The children declared `Frozen`: not trained.
        flatten: `flatten(obj) -> (children, aux)`: children a tuple in field order.
        flatten_with_keys: The same, each child with its `GetAttrKey`.
        unflatten: `unflatten(aux, children)`: a new instance, built field by field (no
            `__init__`).
        init: Our generated `__init__`, if the class has it: built again, it takes new code.
        reload: The builder's entry point for a class cloudpickle rebuilds (`__reduce__`).
        built: What a build as the class was created (a subclass of a base that makes pytree
            subclasses) changed on it, attribute by attribute: the name, the value before (or
            the builder's mark of none) and the value it left; None for a decorated class. A
            decorator that follows takes back only what still holds the value left.
    """

    __slots__ = (
        "_by_name",
        "_settle",
        "built",
        "children",
        "cls",
        "declarations",
        "evolution",
        "flatten",
        "flatten_with_keys",
        "frozen",
        "init",
        "marks",
        "reload",
        "statics",
        "unflatten",
    )

    cls: type
    declarations: tuple[Declaration, ...]
    evolution: Evolution
    children: tuple[str, ...]
    statics: tuple[str, ...]
    marks: tuple[Mark, ...]
    frozen: frozenset[str]
    flatten: Flatten
    flatten_with_keys: Callable[[Any], Any]
    unflatten: Unflatten
    init: Callable[..., None] | None
    reload: Callable[..., Layout]
    built: Changes | None
    _by_name: dict[str, Declaration]
    _settle: Callable[[], None] | None

    def __init__(
        self,
        cls: type,
        declarations: tuple[Declaration, ...],
        functions: Mapping[str, Callable[..., Any]],
        reload: Callable[..., Layout],
        settle: Callable[[], None] | None = None,
        evolution: Evolution = NO_EVOLUTION,
        built: Changes | None = None,
    ) -> None:
        values: dict[str, object] = {
            "cls": cls,
            "declarations": declarations,
            "evolution": evolution,
            "_by_name": {d.name: d for d in declarations},
            "children": tuple(d.name for d in declarations if d.static is None),
            "statics": tuple(d.name for d in declarations if d.static is not None),
            "marks": tuple(d.static for d in declarations if d.static is not None),
            "frozen": frozenset(d.name for d in declarations if d.frozen),
            "flatten": functions["flatten"],
            "flatten_with_keys": functions["flatten_with_keys"],
            "unflatten": functions["unflatten"],
            "init": functions.get("__init__"),
            "reload": reload,
            "_settle": settle,
            "built": built,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"a Layout is immutable ({name}): make a new one with Layout.replace")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"a Layout is immutable: {name} stays")

    def replace(
        self,
        *,
        functions: Mapping[str, Callable[..., Any]] | None = None,
        built: Changes | None = None,
    ) -> Layout:
        """A new record like this one, with `functions` (by name, as the constructor takes
        them) in place of some of its functions, and `built`, if given."""
        mine: dict[str, Callable[..., Any]] = dict(zip(TREE_FUNCTIONS, self.functions, strict=True))
        if self.init is not None:
            mine["__init__"] = self.init
        return Layout(
            self.cls,
            self.declarations,
            {**mine, **(functions or {})},
            self.reload,
            self._settle,
            self.evolution,
            self.built if built is None else built,
        )

    @property
    def fields(self) -> tuple[str, ...]:
        return self.children + self.statics

    @property
    def functions(self) -> tuple[Callable[..., Any], ...]:
        """The functions JAX holds, in `TREE_FUNCTIONS` order."""
        return (self.flatten, self.flatten_with_keys, self.unflatten)

    @property
    def pending(self) -> bool:
        """Whether a field's annotation named something not defined yet (`settle`)."""
        return self._settle is not None

    def settle(self) -> None:
        """Decide the pending fields for good, building the class again (a no-op once done;
        the generated functions of a pending class call it first)."""
        if self._settle is not None:
            self._settle()

    def declaration(self, name: str) -> Declaration:
        return self._by_name[name]

    def with_children(self, obj: object, children: Sequence[object]) -> Any:
        """A new instance like `obj` (of this class), with `children` in field order and
        `obj`'s static values; no `__init__` runs."""
        return self.unflatten(self.flatten(obj)[1], tuple(children))

    def static_values(self, aux: object) -> tuple[object, ...]:
        """The static values of one instance, in `statics` order, from its aux data."""
        if not self.statics:
            return ()
        return (aux,) if len(self.statics) == 1 else cast("tuple[object, ...]", aux)

    def __reduce__(self) -> tuple[object, ...]:
        """A class that cloudpickle copies by value (defined in `__main__`, a notebook or a
        function) carries its layout as an attribute: unpickling it registers the rebuilt
        class with these declarations, decided first, and our `__init__` as decided (cloudpickle
        pickles `__init__` before this, still deciding if the class was never used; it calls
        the record's). Pickling by reference never copies class attributes."""
        current = layout_of(self.cls) or self
        init = current.init
        if init is not None:  # A copy: cloudpickle has pickled `__init__` (maybe undecided).
            init = types.FunctionType(
                init.__code__, init.__globals__, init.__name__, init.__defaults__, init.__closure__
            )
        return (current.reload, (current.cls, current.declarations, current.evolution, init))


LAYOUT_ATTR = "__jdc_layout__"
"""The class attribute that holds a registered class's `Layout`: its one record."""
_REGISTERED: list[type] = []
"""Every registered class, in order, for hooks added later (`on_register`)."""
_ON_REGISTER: list[Callable[[Layout], None]] = []
_LOCK = threading.RLock()
"""Held while a class is registered, and while a hook is added (`on_register`)."""


def inherited_evolution(cls: type) -> Evolution:
    """The `Evolution`s of the registered bases of `cls`, merged, as recorded (not a use of
    a base: its pending names may wait)."""
    evolution = NO_EVOLUTION
    for base in reversed(cls.__mro__[1:]):
        layout = recorded(base)
        if layout is not None:
            evolution = evolution | layout.evolution
    return evolution


def layout_of(cls: type) -> Layout | None:
    """The record of a registered pytree dataclass (or adopted subclass), else None; a class
    with names still pending decides them first (its first use), so every reader gets the
    declarations for good. Read from the class's own namespace (a subclass does not inherit
    it, and the `slots=True` copy that `dataclasses` makes of a class carries the original's,
    which is not its own)."""
    layout = recorded(cls)
    if layout is not None and layout.pending:
        layout.settle()
        layout = recorded(cls)
    return layout


def recorded(cls: type) -> Layout | None:
    """The record as it is, pending names and all: for the builder, which decides them, and
    for what must not count as a use (a subclass inheriting them, adoption)."""
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
        layout = recorded(cls)  # Registering with flax is not a use of the class.
        if layout is not None:
            hook(layout)


def register(layout: Layout) -> None:
    """Register `layout.cls` with JAX as a keyed pytree node with `layout`'s functions, or, if
    it is registered already, give the functions JAX holds their code; then keep `layout` (with
    the functions JAX holds) as the class's record (`layout_of`) and tell the hooks (`on_register`)."""
    cls = layout.cls
    with _LOCK:  # A check and a set: one registration with JAX per class, whichever thread.
        old = recorded(cls)
        if old is None:
            try:
                tree_util.register_pytree_with_keys(  # pyright: ignore[reportUnknownMemberType]  # jaxlib: no stub for the key types
                    cls, layout.flatten_with_keys, layout.unflatten, layout.flatten
                )
            except ValueError as error:  # JAX's "Duplicate custom PyTreeDef type registration".
                raise ValueError(
                    messages.REGISTERED_ELSEWHERE.format(cls=cls.__qualname__)
                ) from error
            _REGISTERED.append(cls)
        else:  # JAX and the old layout's users hold the old functions: give them the new code.
            for target, source in zip(old.functions, layout.functions, strict=True):
                take_code(target, source)
            layout = layout.replace(functions=dict(zip(TREE_FUNCTIONS, old.functions, strict=True)))
        setattr(cls, LAYOUT_ATTR, layout)
        for hook in _ON_REGISTER:
            hook(layout)


def tree_sources(
    cls: type, children: tuple[str, ...], statics: tuple[str, ...]
) -> list[FunctionSource]:
    """Flatten, flatten-with-keys and unflatten for one layout, as JAX's custom nodes are
    fastest: literal tuples, aux data as in `Layout`, fields set with `object.__setattr__`
    (writing `__dict__` directly is about twice as fast, but gives every instance JAX builds
    a dict of its own: 64 bytes more than a constructed one, on Python 3.11 to 3.13). Each
    function's closure variables are the same for every layout, so `take_code` can move
    code between them; each has the class as `__jdc_cls`, as every generated function does
    (`waiting`)."""
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
    unflatten = ["o = __jdc_new(__jdc_cls)", *unpack, *store, "return o"]
    return [
        FunctionSource("flatten", ["o"], [f"return ({child_values}, {aux})"], {"__jdc_cls": cls}),
        FunctionSource(
            "flatten_with_keys",
            ["o"],
            [f"return ({pairs}, {aux})"],
            {"__jdc_keys": keys, "__jdc_cls": cls},
        ),
        FunctionSource(
            "unflatten",
            ["aux", "children"],
            unflatten,
            {"__jdc_setattr": object.__setattr__, "__jdc_new": object.__new__, "__jdc_cls": cls},
        ),
    ]


def waiting(source: FunctionSource) -> FunctionSource:
    """The one trampoline: `source` for a class whose names are still pending. After the
    checks of its arguments (`FunctionSource.checks`), it decides them
    (`Layout.settle`, which builds the class again and gives this function the decided code,
    `take_code`), then calls the decided function through the class's record, so it runs
    once at most. Same parameters and helpers as `source` (the class among them, as
    `__jdc_cls`), so the decided code can take its place. Every generated function waits,
    unflatten too: a treedef may come decided (unpickled from another process, or from a
    thread whose flatten took its new code first)."""
    record = f"__jdc_cls.{LAYOUT_ATTR}"
    names = [param.partition("=")[0] for param in source.params if param != "*"]
    passed = ", ".join(f"{name}={name}" for name in names)
    decided = "init" if source.name == "__init__" else source.name  # Its `Layout` attribute.
    body = [*source.body[: source.checks], f"{record}.settle()"]
    body.append(f"return {record}.{decided}({passed})")
    return source._replace(body=body)


def _tuple_source(items: Sequence[str]) -> str:
    """Python source of a tuple display with `items`: `(a, b, )`, `()`."""
    return "(" + "".join(f"{item}, " for item in items) + ")"
