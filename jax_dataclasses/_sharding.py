"""`Sharded[T, *axes]`: a field's layout over a device mesh, declared in its annotation, and
how a class's declarations are read.

A field declares how its array is laid out over a device mesh in its annotation, as `Static`
declares a static field: `w: jdc.Sharded[jax.Array, "embed", "mlp"]`, one logical axis name
(or None, or a tuple of names) per dimension; on a field holding a pytree dataclass, the axes
that stack its layers. Why here: the declaration lives next to the field, and one declaration
serves every tree that holds the class. The trees made from declarations (`partition_specs`,
`shardings`, ...) are in `_sharded_trees`, the rules that turn logical names into mesh axes in
`_sharding_rules` (docs/design.md §16).

Declarations are read when a call first meets a class, not at decoration, so names defined
after the class, string annotations and lazy annotations (Python 3.14) all work; they are read
with the package's own reader (`_annotations.class_annotations`) in the scope that defines the
class.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, NoReturn, TypeAlias, cast, final

from jax.sharding import AbstractMesh, Mesh, PartitionSpec

from jax_dataclasses._annotations import (
    class_annotations,
    class_namespace,
    defining_scope,
    spelled,
    unalias,
)
from jax_dataclasses._codegen import module_globals
from jax_dataclasses._registry import layout_of
from jax_dataclasses._tree_api import KeyPath

AnyMesh: TypeAlias = Mesh | AbstractMesh
"""A concrete mesh, or an abstract one (`jax.sharding.AbstractMesh`): axis names and sizes."""

AxisEntry: TypeAlias = str | tuple[str, ...] | None
"""One dimension of a declaration: a logical axis name, None (not sharded), or several names."""
MeshAxes: TypeAlias = str | tuple[str, ...] | None
"""What a rule maps a logical name to: a mesh axis, several, or None (not sharded)."""
Rules: TypeAlias = Mapping[str, MeshAxes] | Sequence[tuple[str, MeshAxes]] | Sequence[list[Any]]
"""`{"embed": None, "mlp": "model"}`, flax's `[("embed", None), ("mlp", "model")]`, or the
same as lists of lists, as JSON and YAML configs load them."""
Default: TypeAlias = PartitionSpec | Callable[[KeyPath, Any], PartitionSpec]
"""What an undeclared leaf gets: a spec in mesh axes, or a function of (key path, leaf)."""

REPLICATED: PartitionSpec = cast("Callable[..., PartitionSpec]", PartitionSpec)()

__all__ = ["Sharded", "ShardingDeclarationError", "_class_declarations"]
"""What other modules use: the marker, the error, and the one reader of declarations."""


class ShardingDeclarationError(ValueError):
    """A sharding declaration that does not fit the arrays, the rules or the mesh; or arrays
    that do not carry the shardings they declare (`check_shardings`).

    Raised by `partition_specs`, `shardings`, `sharded_shapes`, `check_shardings` and the
    constraints before JAX or XLA see the shardings. The message lists every problem, each
    naming the class, field and key path, once however many copies of the tree carry it,
    under a header naming the mesh and the rules, with the fix.

    Examples:
        >>> from jax.sharding import AbstractMesh
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "embed"]
        >>> try:
        ...     jdc.partition_specs(Dense(jnp.ones((4, 2))))
        ... except jdc.ShardingDeclarationError as error:
        ...     print(error)
        1 sharding declaration does not fit (no mesh given; no rules):
        - field 'w' of Dense at .w (f32[4,2]): declares 1 axis ('embed',) for an array of rank 2. ...
    """


@final
class _Axes:
    """The metadata that `Sharded[T, *axes]` puts in `Annotated`: the declared axes."""

    __slots__ = ("names",)
    names: tuple[AxisEntry, ...]

    def __init__(self, names: tuple[AxisEntry, ...]) -> None:
        object.__setattr__(self, "names", names)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{self!r} is immutable")

    def __repr__(self) -> str:
        return f"jax_dataclasses.Sharded{self.names!r}"

    def __reduce__(self) -> tuple[type[_Axes], tuple[tuple[AxisEntry, ...]]]:
        """Pickled and copied by its names (slots and the refusing `__setattr__` would stop
        the default way): classes with `Sharded` fields travel by value (cloudpickle)."""
        return (_Axes, (self.names,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Axes) and other.names == self.names

    def __hash__(self) -> int:
        return hash((_Axes, self.names))


class Sharded:
    """`Sharded[T, *axes]` is `T` to type checkers; on a field it declares how the field's
    array is laid out over a device mesh.

    Give one entry per dimension of the array: a logical axis name, None (not sharded along
    that dimension), or a tuple of names (sharded over several mesh axes, as in
    `PartitionSpec`). Logical names become mesh axes through the `rules` given to
    `partition_specs`, `shardings`, `sharded_shapes` and `check_shardings`; without rules a
    name must be a mesh axis. A `Sharded` field is a child, never static. Like `Static`, it
    works in strings, aliases and under `from __future__ import annotations`: the
    declaration is read when a tree holding the class first meets one of those functions.
    If the field holds a subtree (a tuple of arrays, or None), each array in it gets the
    declaration and None gets nothing; a pytree dataclass decides for its own fields, so a
    declaration on a field holding one is an error.
    Linters that read the strings as forward references (ruff and flake8's F821, as with
    jaxtyping's shapes) need that rule turned off where `Sharded` is used.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "embed", "mlp"]
        ...     b: jdc.Sharded[jax.Array, "mlp"]
        ...     scale: jax.Array  # undeclared: replicated
        >>> layer = Dense(jnp.ones((4, 8)), jnp.zeros(8), jnp.ones(()))
        >>> specs = jdc.partition_specs(layer, {"embed": None, "mlp": "model"})
        >>> tuple(specs.w), tuple(specs.b), tuple(specs.scale)
        ((None, 'model'), ('model',), ())
    """

    __jdc_type_then_metadata__ = True  # Its axis names are not types (`_annotations`).

    def __class_getitem__(cls, params: object) -> Any:
        """`Annotated[T, <the axes>]`, after checking that each axis entry is a name, None or a
        tuple of names (the mistake is reported where it is written)."""
        items = cast("tuple[object, ...]", params if isinstance(params, tuple) else (params,))
        kind, axes = items[0], items[1:]
        for entry in axes:
            if not _is_entry(entry):
                raise TypeError(
                    f"Sharded[{_type_name(kind)}, ...] got the axis entry {entry!r}: each entry "
                    "must be a logical axis name (str), None, or a tuple of names, one entry "
                    "per dimension, for example Sharded[jax.Array, 'batch', None]."
                )
        return Annotated[kind, _Axes(cast("tuple[AxisEntry, ...]", axes))]

    def __new__(cls) -> NoReturn:
        raise TypeError("Sharded is used in annotations only: Sharded[jax.Array, 'embed', None]")


def _is_entry(entry: object) -> bool:
    if entry is None or isinstance(entry, str):
        return True
    items = cast("tuple[object, ...]", entry) if isinstance(entry, tuple) else (0,)
    return all(isinstance(item, str) for item in items)


def _type_name(kind: object) -> str:
    return getattr(kind, "__qualname__", None) or repr(kind)


# -- reading a class's declarations ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Declaration:
    """A field's declared axes, and where they were declared (for messages)."""

    axes: tuple[AxisEntry, ...]
    owner: str
    field: str

    @property
    def where(self) -> str:
        return f"field {self.field!r} of {self.owner}"


def _class_declarations(cls: type) -> dict[str, _Declaration]:
    """The declared fields of pytree dataclass `cls` (its child fields annotated `Sharded`),
    read from each field's current annotation in the class that declared it."""
    layout = layout_of(cls)
    statics = layout.statics if layout is not None else ()
    found: dict[str, _Declaration] = {}
    problems: list[str] = []
    annotations = {klass: class_annotations(klass) for klass in cls.__mro__[:-1]}
    for f in dataclasses.fields(cls):
        owner = next((k for k, own in annotations.items() if f.name in own), cls)
        where = f"field {f.name!r} of {cls.__qualname__}"
        axes = _read_axes(annotations.get(owner, {}).get(f.name, f.type), owner, where)
        if axes is None:
            continue
        if f.name in statics:
            problems.append(
                f"{where} is static and declares sharding axes {axes!r}: a static value is part "
                "of the tree structure, not an array on devices. Drop Static[...] to make it a "
                "sharded child, or drop Sharded[...] to keep it static."
            )
        found[f.name] = _Declaration(axes, cls.__qualname__, f.name)
    if problems:
        raise ShardingDeclarationError("\n".join(problems))
    return found


def _read_axes(annotation: object, owner: type, where: str) -> tuple[AxisEntry, ...] | None:
    """The axes `annotation` declares at its outermost level (as in `Sharded[T, ...]`, an alias
    of one, or `Annotated[<one of these>, ...]`), else None. A string (or a `ForwardRef` of
    Python 3.14) is evaluated in the scope that defines `owner`; if a name in it is not
    defined, the declaration is read from its spelling (`Sharded[...]` with literal axes)."""
    source: str | None = None
    extra: Mapping[str, Any] = {}
    if isinstance(annotation, typing.ForwardRef):
        extra = getattr(annotation, "__extra_names__", None) or {}
        annotation = annotation.__forward_arg__
    while isinstance(annotation, str):  # A string in a string under the future import, too.
        source = annotation
        globalns = module_globals(owner.__module__)
        _, localns = defining_scope(owner.__qualname__, owner.__module__, globalns)
        scope = ChainMap(dict(extra), dict(class_namespace(owner)), dict(localns or {}))
        try:
            annotation = eval(source, globalns, scope)  # As `typing.get_type_hints` does.
        except Exception:  # A name not defined (yet): read the spelling.
            axes = _axes_from_source(source, where)
            if axes is None and localns is None:
                raise ShardingDeclarationError(
                    f"cannot tell whether the annotation {source!r} of {where} declares a "
                    "sharding: a name in it is not defined at module level, and the function "
                    "that defines the class has returned, so its local names cannot be read. "
                    "Define the name at module level, or write Sharded[...] in the annotation."
                ) from None
            return axes
    nested = list(_nested_axes(annotation))
    top = _outermost_axes(annotation)
    if len(top) > 1:
        raise ShardingDeclarationError(
            f"{where} declares its sharding twice ({', '.join(map(repr, top))}): give one "
            "Sharded[T, ...] per field."
        )
    if len(nested) > len(top):
        raise ShardingDeclarationError(
            f"Sharded must be the outermost part of the annotation of {where}, got "
            f"{source or annotation!r}. Write Sharded[...] around the whole type, for example "
            "Sharded[Optional[jax.Array], 'batch'] instead of Optional[Sharded[jax.Array, 'batch']]."
        )
    return top[0].names if top else None


def _outermost_axes(annotation: object) -> list[_Axes]:
    """The `_Axes` in the metadata of `annotation` (through type aliases), outermost level."""
    annotation = unalias(annotation)
    metadata: tuple[object, ...] = getattr(annotation, "__metadata__", ())
    found = [m for m in metadata if isinstance(m, _Axes)]
    origin: object = getattr(annotation, "__origin__", None)
    if not found and metadata and origin is not None and origin is not annotation:
        return _outermost_axes(origin)  # `Annotated[Alias, "doc"]`
    return found


def _nested_axes(annotation: object) -> Iterator[_Axes]:
    """Every `_Axes` anywhere in `annotation`, the outermost included."""
    annotation = unalias(annotation)
    yield from _outermost_axes(annotation)
    for arg in typing.get_args(annotation):
        yield from _nested_axes(arg)


def _axes_from_source(source: str, where: str) -> tuple[AxisEntry, ...] | None:
    """The axes of `Sharded[T, 'a', None]` read from its spelling (for an annotation naming
    something not defined where the class is); None if it does not spell Sharded at all."""
    try:
        expr = ast.parse(source, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(expr, ast.Subscript) and spelled(expr.value, "Sharded"):
        items = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        try:
            axes = tuple(ast.literal_eval(item) for item in items[1:])
        except ValueError:
            axes = None
        if axes is not None and all(map(_is_entry, axes)):
            return axes
    if any(spelled(node, "Sharded") for node in ast.walk(expr) if isinstance(node, ast.expr)):
        raise ShardingDeclarationError(
            f"cannot read the sharding declared by the annotation {source!r} of {where}: a name "
            "in it is not defined where the class is defined, and it is not of the form "
            "Sharded[T, 'axis', None, ...] with literal axes. Define the names it uses at "
            "module level, or write the axes as string literals."
        )
    return None
