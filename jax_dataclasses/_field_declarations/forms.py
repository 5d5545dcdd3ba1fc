"""The declarations users write: on fields, `Static[T]` (and 1.6's `static_field()` and field
metadata marks), `Sharded[T, *axes]` and `Frozen[T]`; on a class, `Evolution` (how its
checkpoints changed); and the errors that name a misused one.

Each field form is an `Annotated` form (a type to checkers), whose metadata object is what the
one reader (`_field_declarations.reader`) looks for: `STATIC_MARKER` (which compares equal to 1.6's marker
string, so 1.6 code reading `__metadata__` still finds it), `Axes` and `FROZEN_MARKER`. The
class builder reads a class's `Evolution` once, when it builds the class.
"""

from __future__ import annotations

import dataclasses
import enum
import warnings
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, NoReturn, TypeAlias, TypeVar, cast, final

T = TypeVar("T")

# -- Static ---------------------------------------------------------------------------------


class _StaticMarker:
    """The metadata object that `Static[T]` carries inside `Annotated`.

    It compares and hashes as 1.6's marker string (`LEGACY_STATIC_MARKER`), so that code
    written against 1.6's private `_dataclasses.JDC_STATIC_MARKER` (`marker in
    hint.__metadata__`) sees our `Static` fields as static.

    There is one per process (`STATIC_MARKER`): it pickles by name, and a copy, or one that a
    pickle made before it did so rebuilds, is it. A second, equal marker would take the place
    of ours in `typing`'s cache of `Annotated[...]` aliases, so that `Static[int]` would carry
    it from then on and be read as a plain annotation.
    """

    def __new__(cls) -> _StaticMarker:
        try:
            return STATIC_MARKER
        except NameError:  # Making `STATIC_MARKER` itself.
            return super().__new__(cls)

    def __reduce__(self) -> str:
        return "STATIC_MARKER"

    def __repr__(self) -> str:
        return "jax_dataclasses.Static"

    def __eq__(self, other: object) -> bool:
        return other is self or other == LEGACY_STATIC_MARKER

    def __hash__(self) -> int:
        return hash(LEGACY_STATIC_MARKER)


STATIC_MARKER = _StaticMarker()
LEGACY_STATIC_MARKER = "__jax_dataclasses_static_field__"
"""What jax_dataclasses 1.6 put in `Annotated` metadata and field metadata; still honoured."""


class Mark(enum.Enum):
    """What makes a field static, read where a message says how to undo it or where 1.6's
    reading matters. A metadata mark's value is its field metadata key."""

    ANNOTATION = "Static"
    """`Static[...]` in the field's annotation (it counts first)."""
    STATIC_FIELD = LEGACY_STATIC_MARKER
    """1.6's `static_field()`: its marker in the field metadata."""
    STATIC = "static"
    """Field metadata `static=True`, as equinox spells it."""
    PYTREE_NODE = "pytree_node"
    """Field metadata `pytree_node=False`, as flax spells it."""


_METADATA_MARKS = ((Mark.STATIC_FIELD, True), (Mark.STATIC, True), (Mark.PYTREE_NODE, False))


def metadata_mark(metadata: Mapping[str, object]) -> Mark | None:
    """The mark of field metadata that makes a field static (1.6's marker, or `static=True` /
    `pytree_node=False` as other libraries spell it), compared with `==`; else None."""
    for mark, value in _METADATA_MARKS:
        if mark.value in metadata and metadata[mark.value] == value:
            return mark
    return None


Static = Annotated[T, STATIC_MARKER]
Static.__doc__ = """`Static[T]` is `T` to type checkers; on a field or `jit` parameter it marks the value static.

A static value is part of the tree structure (the treedef), not a traced child: Python code
may branch on it under `jax.jit`, equal values reuse a compilation and different values
recompile. It must be hashable and compare by value; arrays are refused (`TypeError`) and
values JAX cannot cache reliably warn (`StaticFieldWarning`). `Static` must be the outermost
part of the annotation (`Static[Optional[int]]`, not `Optional[Static[int]]`); the annotation
is read, not evaluated, so `from __future__ import annotations`, strings and aliases work.

Examples:
    >>> @jdc.pytree_dataclass
    ... class Layer:
    ...     w: jax.Array
    ...     activation: jdc.Static[str] = "tanh"
    >>> leaves, treedef = jax.tree.flatten(Layer(jnp.ones(2)))
    >>> len(leaves), "tanh" in str(treedef)
    (1, True)
"""


class StaticAnnotationError(TypeError):
    """`Static` is used somewhere other than the outermost part of an annotation.

    A `TypeError`, raised when the class is decorated (or the function passed to `jdc.jit`).
    The message names the class and field (or parameter) and shows the fix.

    Examples:
        >>> from typing import Optional
        >>> try:
        ...     @jdc.pytree_dataclass
        ...     class Config:
        ...         depth: Optional[jdc.Static[int]] = None
        ... except jdc.StaticAnnotationError as error:
        ...     print(error)
        Static must be the outermost part of the annotation of field 'depth' of Config, ...
    """


def static_field(**kwargs: Any) -> Any:
    """Deprecated: `dataclasses.field(**kwargs)` with field metadata that marks it static.

    Takes exactly the arguments of `dataclasses.field`, and emits a `DeprecationWarning`.
    Type checkers see it as `dataclasses.field`. Annotate the field `jdc.Static[T]` instead.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", DeprecationWarning)
        ...     @jdc.pytree_dataclass
        ...     class Old:
        ...         x: jax.Array
        ...         n: int = jdc.static_field(default=3)
        >>> jax.tree.leaves(Old(jnp.zeros(2)))  # `n` is static: not a leaf
        [Array([0., 0.], dtype=float32)]
    """
    warnings.warn(
        "jdc.static_field() is deprecated: annotate the field as jdc.Static[T] instead "
        "(for example `n: jdc.Static[int] = 3`).",
        DeprecationWarning,
        stacklevel=2,
    )
    # `static=True` as other libraries spell it, and 1.6's own marker, which 1.6 checkpoints
    # depend on: a field 1.6 saw as static was not saved (`Declaration.legacy_static`).
    metadata: dict[str, Any] = {
        **(kwargs.pop("metadata", None) or {}),
        "static": True,
        LEGACY_STATIC_MARKER: True,
    }
    return dataclasses.field(metadata=metadata, **kwargs)


# -- Sharded --------------------------------------------------------------------------------

AxisEntry: TypeAlias = str | tuple[str, ...] | None
"""One dimension of a declaration: a logical axis name, None (not sharded), or several names."""


class ShardingDeclarationError(ValueError):
    """A sharding declaration that does not fit the arrays, the rules or the mesh; or arrays
    that do not carry the shardings they declare (`check_shardings`).

    Raised by `partition_specs`, `shardings`, `sharded_shapes` and `check_shardings` before
    JAX or XLA see the shardings, and by `pytree_dataclass` for a declaration that cannot
    mean anything (on a static field, nested, twice). The message lists every problem, each
    naming the class, field and key path, with the mesh and the fix.

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
class Axes:
    """The metadata that `Sharded[T, *axes]` puts in `Annotated`: the declared axes."""

    __slots__ = ("names",)
    names: tuple[AxisEntry, ...]

    def __init__(self, names: tuple[AxisEntry, ...]) -> None:
        object.__setattr__(self, "names", names)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{self!r} is immutable")

    def __repr__(self) -> str:
        return f"jax_dataclasses.Sharded{self.names!r}"

    def __reduce__(self) -> tuple[type[Axes], tuple[tuple[AxisEntry, ...]]]:
        """Pickled and copied by its names (slots and the refusing `__setattr__` would stop
        the default way): classes with `Sharded` fields travel by value (cloudpickle)."""
        return (Axes, (self.names,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Axes) and other.names == self.names

    def __hash__(self) -> int:
        return hash((Axes, self.names))


class Sharded:
    """`Sharded[T, *axes]` is `T` to type checkers; on a field it declares how the field's
    array is laid out over a device mesh.

    Give one entry per dimension of the array: a logical axis name, None (not sharded along
    that dimension), or a tuple of names (sharded over several mesh axes, as in
    `PartitionSpec`). Logical names become mesh axes through the `rules` given to
    `partition_specs`, `shardings`, `sharded_shapes` and `check_shardings`; without rules a
    name must be a mesh axis. A `Sharded` field is a child, never static. Like `Static`, it
    works in strings, aliases and under `from __future__ import annotations`: the
    declaration is read when the class is decorated (a name defined after the class, at its
    first use). If the field holds a subtree (a tuple of arrays, or None), each array in it
    gets the declaration and None gets nothing; on a field holding a pytree dataclass (a
    stack of layers made by `vmap`), the axes are the leading axes of every array inside it,
    in front of that class's own declarations.
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

    def __class_getitem__(cls, params: object) -> Any:
        """`Annotated[T, <the axes>]`, after checking that each axis entry is a name, None or a
        tuple of names (the mistake is reported where it is written)."""
        items = cast("tuple[object, ...]", params if isinstance(params, tuple) else (params,))
        return Annotated[items[0], axes_of(items[0], items[1:], "")]

    def __new__(cls) -> NoReturn:
        raise TypeError("Sharded is used in annotations only: Sharded[jax.Array, 'embed', None]")


def axes_of(kind: object, entries: tuple[object, ...], where: str) -> Axes:
    """The `Axes` of `Sharded[kind, *entries]`; a `TypeError` for an entry of another kind."""
    for entry in entries:
        if not is_entry(entry):
            at = f" (the annotation of {where})" if where else ""
            raise TypeError(
                f"Sharded[{_type_name(kind)}, ...]{at} got the axis entry {entry!r}: each entry "
                "must be a logical axis name (str), None, or a tuple of names, one entry per "
                "dimension, for example Sharded[jax.Array, 'batch', None]."
            )
    return Axes(cast("tuple[AxisEntry, ...]", entries))


def is_entry(entry: object) -> bool:
    """Whether `entry` is an axis entry: a name, None, or a tuple of names."""
    if entry is None or isinstance(entry, str):
        return True
    items = cast("tuple[object, ...]", entry) if isinstance(entry, tuple) else (0,)
    return all(isinstance(item, str) for item in items)


def _type_name(kind: object) -> str:
    return getattr(kind, "__qualname__", None) or repr(kind)


# -- Frozen ---------------------------------------------------------------------------------


@final
class _FrozenMarker:
    """The metadata object that `Frozen[T]` carries inside `Annotated`: one object, which
    pickles as itself (classes pickled by value keep their frozen fields)."""

    def __repr__(self) -> str:
        return "jax_dataclasses.Frozen"

    def __reduce__(self) -> str:
        return "FROZEN_MARKER"


FROZEN_MARKER = _FrozenMarker()

Frozen = Annotated[T, FROZEN_MARKER]
Frozen.__doc__ = """`Frozen[T]` is `T` to type checkers; on a field it marks the value as not trained.

A frozen field stays a child: a traced, shardable leaf (or subtree) that `jax.jit`, `jax.grad`
and checkpoints see as any other, so the tree structure is the same with or without it. What
changes is what the training helpers derive from the class: `jdc.trainable_only(tx)` gives
every leaf under a frozen field a zero update and no optimizer state, `jdc.trainable` gives
False for it (the mask), `jdc.stop_frozen_gradients` stops its gradient, and the repr shows the
field as `Frozen(...)`. A subclass re-declaring the field must write `Frozen` again. Use it for pretrained
parts, fixed embeddings and buffers (running statistics, masks, RoPE tables). It composes
with `Sharded` in either order (`Frozen[Sharded[jax.Array, "vocab", "embed"]]`), and like
`Static` it must be the outermost part of the annotation; a field cannot be both static and
frozen (a static value is never trained).

Examples:
    >>> @jdc.pytree_dataclass
    ... class Tower:
    ...     embed: jdc.Frozen[jax.Array]
    ...     head: jax.Array
    >>> tower = Tower(jnp.ones((4, 2)), jnp.zeros(2))
    >>> jdc.trainable(tower)
    Tower(embed=Frozen(False), head=True)
    >>> len(jax.tree.leaves(tower))  # still a child
    2
"""


def refuse_dropped_frozen(name: str, owner: str, base: str) -> NoReturn:
    """A subclass `owner` re-declares field `name`, which its base `base` declares `Frozen`, as
    a child without `Frozen`. A subclass may re-annotate a field, as in the standard library,
    but dropping `Frozen` on the way would silently train what the base froze."""
    raise StaticAnnotationError(
        f"field {name!r} of {owner} re-declares field {name!r} of {base}, which is Frozen, "
        f"without Frozen[...]: the key path .{name} of every {owner} would silently be "
        f"trained. Write {name}: jdc.Frozen[...] again to keep it frozen; to train it in a "
        f"run, keep it frozen and unfreeze it for that run: jdc.trainable(model, "
        f"unfreeze=['.{name}']) (or jdc.trainable_only(tx, unfreeze=['.{name}']))."
    )


# -- Evolution ------------------------------------------------------------------------------

EVOLUTION_ATTR = "__jdc_evolution__"
"""The class attribute that declares how a class's checkpoints changed (an `Evolution`)."""


@final
class Evolution:
    """How a class changed since checkpoints of it were written, declared on the class as
    `__jdc_evolution__ = jdc.Evolution(...)`.

    Restoring a checkpoint (a flax state dict or bytes, an orbax checkpoint through
    `jdc.saved_layout`, or 1.6's layout) into the class then follows the declaration, and only
    it: a field in `added` that the checkpoint lacks takes the target's value, or its default
    where the target is abstract; a field in `renamed` is found under its earlier name(s); an
    entry in `removed` is dropped. Every other difference (a field missing, an entry unknown,
    an array's shape or dtype) is refused, in one error listing each by key path. A subclass
    inherits its bases' declarations; nested classes and lists of them each follow their own.

    Checkpoints in jax_dataclasses 1.6's layout store fields by position, which cannot show
    that they changed order: there, a class that declares an `Evolution` also declares the
    order 1.6 saved its fields in (`v1_6_order`), or is refused.

    Args:
        added: Fields added since: where a checkpoint lacks one, the target's value (its
            copies in an optimizer state hold what `tx.init` gave them), or its default where
            the target is abstract (in the target's shape, dtype and sharding).
        renamed: New name -> earlier name (or several, most recent first).
        removed: Names of fields that no longer exist, or that became static: dropped where
            a checkpoint has them.
        v1_6_order: For checkpoints in 1.6's layout only: the fields 1.6 saved, in the order
            it saved them, by their names now (the fields `__init__` takes, less the static
            and added ones).

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     kernel: jax.Array  # was `w`
        ...     bias: jax.Array
        ...     scale: jax.Array = jnp.ones(())  # new
        ...     __jdc_evolution__ = jdc.Evolution(
        ...         added=["scale"], renamed={"kernel": "w"}, removed=["dropout"]
        ...     )
        >>> Dense.__jdc_evolution__
        Evolution(added=('scale',), renamed={'kernel': ('w',)}, removed=('dropout',))
    """

    __slots__ = ("added", "removed", "renamed", "v1_6_order")
    added: tuple[str, ...]
    renamed: Mapping[str, tuple[str, ...]]
    removed: tuple[str, ...]
    v1_6_order: tuple[str, ...] | None

    def __init__(
        self,
        *,
        added: Iterable[str] = (),
        renamed: Mapping[str, str | Iterable[str]] | None = None,
        removed: Iterable[str] = (),
        v1_6_order: Iterable[str] | None = None,
    ) -> None:
        given = dict(renamed or {})
        pairs = {new: _names(old, f"renamed[{new!r}]") for new, old in given.items()}
        object.__setattr__(self, "added", _names(added, "added"))
        object.__setattr__(self, "renamed", MappingProxyType(pairs))
        object.__setattr__(self, "removed", _names(removed, "removed"))
        order = None if v1_6_order is None else _names(v1_6_order, "v1_6_order")
        object.__setattr__(self, "v1_6_order", order)
        _names(pairs, "renamed")

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{self!r} is immutable")

    def __repr__(self) -> str:
        order = "" if self.v1_6_order is None else f", v1_6_order={self.v1_6_order!r}"
        return (
            f"Evolution(added={self.added!r}, renamed={dict(self.renamed)!r}, "
            f"removed={self.removed!r}{order})"
        )

    def _key(self) -> tuple[object, ...]:
        return (self.added, tuple(self.renamed.items()), self.removed, self.v1_6_order)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_evolution, self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Evolution) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __bool__(self) -> bool:
        return bool(self.added or self.renamed or self.removed or self.v1_6_order is not None)

    def __or__(self, later: Evolution) -> Evolution:
        """This declaration, with `later`'s (a subclass's own) added to it."""
        return Evolution(
            added=dict.fromkeys(self.added + later.added),
            renamed={**self.renamed, **later.renamed},
            removed=dict.fromkeys(self.removed + later.removed),
            v1_6_order=self.v1_6_order if later.v1_6_order is None else later.v1_6_order,
        )


def _evolution(
    added: tuple[str, ...],
    renamed: tuple[tuple[str, tuple[str, ...]], ...],
    removed: tuple[str, ...],
    v1_6_order: tuple[str, ...] | None = None,
) -> Evolution:
    return Evolution(added=added, renamed=dict(renamed), removed=removed, v1_6_order=v1_6_order)


def _names(names: object, what: str) -> tuple[str, ...]:
    """`names` as a tuple of field names (one name alone is one name); a `TypeError` naming
    `what` otherwise."""
    items = (names,) if isinstance(names, str) else names
    if isinstance(items, Iterable):
        found = tuple(cast("Iterable[object]", items))
        if all(isinstance(name, str) and name.isidentifier() for name in found):
            return cast("tuple[str, ...]", found)
    raise TypeError(
        f"Evolution({what}=...) takes field names (identifiers), got {names!r}: for example "
        "Evolution(added=['scale'], renamed={'kernel': 'w'}, removed=['dropout'])."
    )


NO_EVOLUTION = Evolution()
