"""`Sharded[T, *axes]`, and the trees of shardings that such declarations describe.

A field declares how its array is laid out over a device mesh in its annotation, as `Static`
declares a static field: `w: jdc.Sharded[jax.Array, "embed", "mlp"]`, one logical axis name
(or None, or a tuple of names) per dimension. `partition_specs`, `shardings` and
`sharded_shapes` turn any pytree holding such classes (a model, an optimizer state whose
moments are copies of it, abstract trees from `jax.eval_shape`) into a tree of the same
structure for `jax.jit`, `jax.device_put` and checkpoint restore targets, and
`check_shardings` compares arrays with their declarations. Why here: the declaration lives
next to the field, every mistake (a wrong number of axes, an unknown name, a dimension the mesh
does not divide) is reported naming the class, field and key path before XLA sees it, and one
declaration serves every tree that holds the class.

Declarations are read with every other declaration of the class, once, by the package's one
reader (`_declarations`), and stored with the class: this module reads the stored axes. Logical
names go through rules as flax's `logical_to_mesh_axes` does (docs/design.md §16).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias, cast

import jax
from jax import core
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec
from jax.tree_util import GetAttrKey

from jax_dataclasses._forms import (
    AxisEntry,
    ShardingDeclarationError,
    is_entry,
)
from jax_dataclasses._printing import array_summary
from jax_dataclasses._record import layout_of, settled
from jax_dataclasses._tree_api import (
    KeyPath,
    keyed_children,
    keystr,
    tree_flatten_with_path,
    tree_structure,
    type_of,
)

AnyMesh: TypeAlias = Mesh | AbstractMesh
"""A concrete mesh, or an abstract one (`jax.sharding.AbstractMesh`): axis names and sizes."""

MeshAxes: TypeAlias = str | tuple[str, ...] | None
"""What a rule maps a logical name to: a mesh axis, several, or None (not sharded)."""
Rules: TypeAlias = Mapping[str, MeshAxes] | Sequence[tuple[str, MeshAxes]]
"""`{"embed": None, "mlp": "model"}`, or flax's `[("embed", None), ("mlp", "model")]`."""
Default: TypeAlias = PartitionSpec | Callable[[KeyPath, Any], PartitionSpec]
"""What an undeclared leaf gets: a spec in mesh axes, or a function of (key path, leaf)."""

_spec_of = cast("Callable[..., PartitionSpec]", PartitionSpec)
"""`PartitionSpec(*entries)`, typed (jax gives its constructor no annotations)."""
_shape_dtype_struct = cast("Callable[..., jax.ShapeDtypeStruct]", jax.ShapeDtypeStruct)
REPLICATED = _spec_of()


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
    """The declared fields of pytree dataclass `cls` (its child fields annotated `Sharded`), as
    the class stores them."""
    layout = settled(cls)
    if layout is None:
        return {}
    return {
        d.name: _Declaration(d.axes, cls.__qualname__, d.name)
        for d in layout.declarations
        if d.axes is not None
    }


# -- rules: logical names to mesh axes, as flax's `logical_to_mesh_axes` ---------------------

Rule: TypeAlias = tuple[str, tuple[str, ...] | None]


def _parse_rules(rules: Rules | None) -> tuple[Rule, ...] | None:
    """The rules as (logical name, mesh axes or None) pairs, in order of priority."""
    if rules is None:
        return None
    if isinstance(rules, Mesh | AbstractMesh):
        raise TypeError(
            "a mesh was given where the rules go: partition_specs and check_shardings take the "
            "mesh as a keyword (partition_specs(tree, rules, mesh=mesh)); shardings and "
            "sharded_shapes take it second (shardings(tree, mesh, rules))."
        )
    pairs: Sequence[object] = list(rules.items()) if isinstance(rules, Mapping) else rules
    parsed: list[Rule] = []
    for pair in pairs:
        items = cast("tuple[object, ...]", pair) if isinstance(pair, tuple) else ()
        logical, target = items if len(items) == 2 else (None, 0)
        if not isinstance(logical, str) or not is_entry(target):
            raise TypeError(
                f"the sharding rule {pair!r} is not a (logical name, mesh axes) pair: rules are a "
                "mapping {'mlp': 'model', 'embed': None} or a sequence of pairs [('mlp', "
                "'model'), ('batch', ('data', 'fsdp'))], mesh axes being a name, a tuple of "
                "names or None."
            )
        axes = cast("tuple[str, ...] | None", target)
        parsed.append((logical, (target,) if isinstance(target, str) else axes))
    return tuple(parsed)


def _dims(spec: PartitionSpec, rank: int) -> tuple[tuple[str, ...], ...]:
    """The mesh axes of each of `rank` dimensions that `spec` shards (trailing ones: none)."""
    entries: list[object] = [*spec, *(None,) * (rank - len(spec))]
    return tuple(
        (entry,)
        if isinstance(entry, str)
        else cast("tuple[str, ...]", entry)
        if isinstance(entry, tuple)
        else ()
        for entry in entries
    )


def _spec(dims: Sequence[Sequence[str]]) -> PartitionSpec:
    return _spec_of(*(tuple(d) if len(d) > 1 else d[0] if d else None for d in dims))


def _show_spec(spec: PartitionSpec) -> str:
    """`P(None, 'model')`, alike on every jax version."""
    return f"P({', '.join(map(repr, spec))})"


def _show_mesh(mesh: AnyMesh | None) -> str:
    if mesh is None:
        return "no mesh given"
    return f"mesh {dict(mesh.shape)}"


# -- one call: walking a tree, and what each leaf gets ----------------------------------------


class _Leaf(NamedTuple):
    """A leaf, where it is, its spec, and the declaration that gave it (None: the default)."""

    path: KeyPath
    value: Any
    spec: PartitionSpec
    declaration: _Declaration | None


class _Planner:
    """One call of `partition_specs` (or its siblings): the rules, the mesh and the default,
    the declarations of the classes met so far, and the problems found."""

    def __init__(self, rules: Rules | None, mesh: AnyMesh | None, default: Default) -> None:
        self.rules_given = rules
        self.rules = _parse_rules(rules)
        self.ruled = {logical for logical, _ in self.rules or ()}
        self.mesh = mesh
        self.sizes: Mapping[str, int] | None = dict(mesh.shape) if mesh is not None else None
        self.default = default
        self.declarations: dict[type, dict[str, _Declaration]] = {}
        self.fitted: dict[tuple[_Declaration, tuple[int, ...]], PartitionSpec] = {}
        """The spec of each declaration and shape that fits, computed once per call."""
        self.problems: list[str] = []

    def leaves(self, tree: Any) -> list[_Leaf]:
        """Each leaf of `tree` with its spec, in `jax.tree.leaves` order; raises
        `ShardingDeclarationError` listing every problem."""
        found: list[_Leaf] = []
        self._visit(tree, (), None, found)
        if self.problems:
            count = len(self.problems)
            raise ShardingDeclarationError(
                f"{count} sharding declaration{'s do' if count > 1 else ' does'} not fit "
                f"({self.context()}):\n" + "\n".join(self.problems)
            )
        return found

    def context(self) -> str:
        rules = "no rules" if self.rules_given is None else f"rules {self.rules_given!r}"
        return f"{_show_mesh(self.mesh)}; {rules}"

    def _visit(
        self, node: Any, path: KeyPath, declared: _Declaration | None, found: list[_Leaf]
    ) -> None:
        kind = type_of(node)
        if layout_of(kind) is not None:
            if declared is not None:  # Never silently ignored.
                self._problem(
                    path,
                    node,
                    declared,
                    f"holds a {kind.__qualname__}, a pytree dataclass, which decides for its own "
                    "fields: a declaration on the field holding it reaches none of them. Declare "
                    f"the axes on the fields of {kind.__qualname__}, and remove this one.",
                )
            if kind not in self.declarations:
                self.declarations[kind] = _class_declarations(kind)
            own = self.declarations[kind]
            for (key, *_), child in keyed_children(node):  # Each class decides for its own fields.
                name = key.name if isinstance(key, GetAttrKey) else None
                self._visit(child, (*path, key), own.get(name) if name else None, found)
            return
        items, _ = tree_flatten_with_path(
            node, lambda x: x is not node and layout_of(type_of(x)) is not None
        )
        for subpath, leaf in items:
            if subpath and layout_of(type_of(leaf)) is not None:
                self._visit(leaf, (*path, *subpath), declared, found)
            else:
                found.append(self._leaf((*path, *subpath), leaf, declared))

    def _leaf(self, path: KeyPath, leaf: Any, declared: _Declaration | None) -> _Leaf:
        shape: tuple[int, ...] = tuple(getattr(leaf, "shape", ()))
        if declared is None:
            given = self.default(path, leaf) if callable(self.default) else self.default
            spec = cast(object, given)  # A function may return anything.
            if not isinstance(spec, PartitionSpec):
                self._problem(path, leaf, None, f"default returned {spec!r}, not a PartitionSpec.")
                return _Leaf(path, leaf, REPLICATED, None)
            if len(spec) > len(shape):
                self._problem(
                    path,
                    leaf,
                    None,
                    f"the default {_show_spec(spec)} has {len(spec)} entries for an array of rank "
                    f"{len(shape)}. Give a default with at most one entry per dimension.",
                )
                return _Leaf(path, leaf, spec, None)
            self._check_mesh(path, leaf, None, _dims(spec, len(shape)), shape)
            return _Leaf(path, leaf, spec, None)
        axes = declared.axes
        if len(axes) != len(shape):
            fitted = (*axes[: len(shape)], *(None,) * (len(shape) - len(axes)))
            self._problem(
                path,
                leaf,
                declared,
                f"declares {len(axes)} ax{'is' if len(axes) == 1 else 'es'} {axes!r} for an "
                f"array of rank {len(shape)}. Declare one axis name or None per dimension, "
                f"for example Sharded[jax.Array{''.join(f', {a!r}' for a in fitted)}].",
            )
            return _Leaf(path, leaf, REPLICATED, declared)
        known = self.fitted.get((declared, shape))
        if known is not None:  # Layers alike: resolved and checked once per call.
            return _Leaf(path, leaf, known, declared)
        before = len(self.problems)
        dims = self._mesh_axes(path, leaf, declared)
        self._check_mesh(path, leaf, declared, dims, shape)
        spec = _spec(dims)
        if len(self.problems) == before:
            self.fitted[declared, shape] = spec
        return _Leaf(path, leaf, spec, declared)

    def _mesh_axes(
        self, path: KeyPath, leaf: Any, declared: _Declaration
    ) -> tuple[tuple[str, ...], ...]:
        """The mesh axes of each dimension: each logical name through the rules, in their
        order of priority, a rule used only if its mesh axes are still free in this array (as
        flax's `logical_to_mesh_axes`); a name whose rules are all taken is not sharded."""
        slots = [
            (dim, name)
            for dim, entry in enumerate(declared.axes)
            for name in ((entry,) if isinstance(entry, str) else entry or ())
        ]
        names = [name for _, name in slots]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            self._problem(
                path,
                leaf,
                declared,
                f"names the axis {', '.join(map(repr, twice))} on several dimensions; an array "
                "is sharded along an axis at most once. Use another name, or None.",
            )
        assigned: list[tuple[str, ...] | None] = [None] * len(slots)
        for i, name in enumerate(names):
            if name in self.ruled:
                continue
            if self.rules is not None and self.sizes is not None and name not in self.sizes:
                self._problem(
                    path,
                    leaf,
                    declared,
                    f"the logical axis {name!r} is neither in the rules nor a mesh axis. Add a "
                    f"rule for it (rules={{{name!r}: 'model'}}, or None to replicate), or use a "
                    f"mesh axis ({', '.join(map(repr, self.sizes))}).",
                )
            assigned[i] = (name,)
        for logical, target in self.rules or ():
            for i, name in enumerate(names):
                taken = {axis for axes in assigned if axes for axis in axes}
                if name == logical and assigned[i] is None and taken.isdisjoint(target or ()):
                    assigned[i] = target or ()
        dims: list[list[str]] = [[] for _ in declared.axes]
        for (dim, _), axes in zip(slots, assigned, strict=True):
            dims[dim].extend(axes or ())
        return tuple(tuple(d) for d in dims)

    def _check_mesh(
        self,
        path: KeyPath,
        leaf: Any,
        declared: _Declaration | None,
        dims: tuple[tuple[str, ...], ...],
        shape: tuple[int, ...],
    ) -> None:
        """Each mesh axis is in the mesh, used once, and its size divides its dimension."""
        sizes = self.sizes
        if sizes is None:
            return
        used = [axis for axes in dims for axis in axes]
        via = " (through the rules)" if self.rules is not None and declared is not None else ""
        unknown = [axis for axis in dict.fromkeys(used) if axis not in sizes]
        if unknown:
            self._problem(
                path,
                leaf,
                declared,
                f"shards along {', '.join(map(repr, unknown))}{via}, which the mesh does not "
                f"have. Use its axes ({', '.join(map(repr, sizes))})"
                + (
                    ", or change the rule." if via else ", or give rules that map the name to them."
                ),
            )
            return
        again = sorted({axis for axis in used if used.count(axis) > 1})
        if again:
            self._problem(
                path,
                leaf,
                declared,
                f"shards several dimensions along the mesh axis {', '.join(map(repr, again))}"
                f"{via}; a mesh axis may shard one dimension only. Change the declaration or "
                "the rules.",
            )
            return
        for dim, axes in enumerate(dims):
            parts = math.prod(sizes[axis] for axis in axes)
            if shape[dim] % parts:
                self._problem(
                    path,
                    leaf,
                    declared,
                    f"dimension {dim} has size {shape[dim]}, which the mesh axes "
                    f"{' x '.join(f'{axis!r} ({sizes[axis]})' for axis in axes)}{via} do not "
                    f"divide into {parts} equal parts. Choose a size divisible by {parts}, or "
                    "shard that dimension along other mesh axes (or None).",
                )

    def _problem(
        self, path: KeyPath, leaf: Any, declared: _Declaration | None, problem: str
    ) -> None:
        self.problems.append(f"- {_describe(path, leaf, declared)}: {problem}")


def _describe(path: KeyPath, leaf: Any, declared: _Declaration | None) -> str:
    """`field 'w' of Dense at .layers[0].w (f32[4,8])`: where a leaf is, and what."""
    where = declared.where if declared is not None else "undeclared leaf"
    return f"{where} at {keystr(path) or '(the root)'} ({_summary(leaf)})"


def _summary(leaf: Any) -> str:
    if layout_of(type_of(leaf)) is not None:  # A declared field holding a pytree dataclass.
        return type_of(leaf).__qualname__
    return array_summary(leaf) if hasattr(leaf, "dtype") and hasattr(leaf, "shape") else repr(leaf)


# -- the public functions ---------------------------------------------------------------------


def partition_specs(
    tree: Any,
    rules: Rules | None = None,
    *,
    mesh: AnyMesh | None = None,
    default: Default = REPLICATED,
) -> Any:
    """A tree of the same structure as `tree` holding the `PartitionSpec` of each leaf.

    Fields annotated `Sharded[T, *axes]` give their declared axes, through `rules` (a mapping
    `{"mlp": "model", "embed": None}` or flax's sequence of `(logical, mesh_axes)` pairs, in
    order of priority); every other leaf gets `default`: a `PartitionSpec` in mesh axes
    (replicated unless given), or a function of `(key path, leaf)` returning one. Leaves may
    be arrays, `jax.ShapeDtypeStruct`s (`jax.eval_shape`) or Python scalars, inside any
    containers and other libraries' trees: an optax state whose moments are copies of a
    model gets the model's specs. With `mesh` (a `Mesh` or `AbstractMesh`), mesh axes and
    sizes are checked too; without it, a name that no rule covers is taken for a mesh axis.

    Raises:
        ShardingDeclarationError: A declaration has the wrong number of axes, names an axis
            the rules and the mesh do not know, or a dimension the mesh does not divide.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "embed", "mlp"]
        ...     b: jax.Array
        >>> specs = jdc.partition_specs(
        ...     {"dense": Dense(jnp.ones((4, 8)), jnp.zeros(8)), "step": 0},
        ...     [("embed", None), ("mlp", "model")],
        ... )
        >>> tuple(specs["dense"].w), tuple(specs["dense"].b), tuple(specs["step"])
        ((None, 'model'), (), ())
    """
    return _map(tree, _Planner(rules, mesh, default), lambda leaf: leaf.spec)


def shardings(
    tree: Any, mesh: AnyMesh, rules: Rules | None = None, *, default: Default = REPLICATED
) -> Any:
    """`partition_specs(tree, rules, mesh=mesh, default=default)` as `NamedSharding`s on
    `mesh`: for `jax.jit`'s `in_shardings`/`out_shardings` and `jax.device_put`.

    Examples:
        >>> from jax.sharding import Mesh
        >>> import numpy as np
        >>> mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "embed", "mlp"]
        >>> init = lambda: Dense(jnp.ones((4, 8)))
        >>> placed = jax.jit(init, out_shardings=jdc.shardings(
        ...     jax.eval_shape(init), mesh, {"embed": "data", "mlp": "model"}))()
        >>> tuple(placed.w.sharding.spec)
        ('data', 'model')
    """
    return _map(tree, _Planner(rules, mesh, default), lambda leaf: NamedSharding(mesh, leaf.spec))


def sharded_shapes(
    tree: Any, mesh: AnyMesh, rules: Rules | None = None, *, default: Default = REPLICATED
) -> Any:
    """`tree` with each array (or `ShapeDtypeStruct`) replaced by a `jax.ShapeDtypeStruct` of
    its shape and dtype carrying its `NamedSharding` on `mesh`: a restore target for orbax
    that places every array where it is declared. Other leaves are kept as they are.

    Examples:
        >>> from jax.sharding import Mesh
        >>> import numpy as np
        >>> mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "data", None]
        >>> target = jdc.sharded_shapes(jax.eval_shape(lambda: Dense(jnp.ones((4, 8)))), mesh)
        >>> target.w.shape, tuple(target.w.sharding.spec)
        ((4, 8), ('data', None))
    """

    def shape_of(leaf: _Leaf) -> Any:
        value = leaf.value
        if not (hasattr(value, "shape") and hasattr(value, "dtype")):
            return value
        sharding = NamedSharding(mesh, leaf.spec)
        weak = bool(getattr(value, "weak_type", False))  # As `eval_shape` gave it.
        return _shape_dtype_struct(value.shape, value.dtype, sharding=sharding, weak_type=weak)

    return _map(tree, _Planner(rules, mesh, default), shape_of)


def _map(tree: Any, planner: _Planner, make: Callable[[_Leaf], Any]) -> Any:
    leaves = planner.leaves(tree)
    return tree_structure(tree, None).unflatten([make(leaf) for leaf in leaves])


def check_shardings(
    tree: Any,
    rules: Rules | None = None,
    *,
    mesh: AnyMesh | None = None,
    default: Default = REPLICATED,
) -> None:
    """Check that the arrays of `tree` carry the shardings they declare; raise one
    `ShardingDeclarationError` listing every array that does not.

    Concrete arrays are read from their `.sharding`; inside `jax.jit`, an array's sharding is
    part of its type (`jax.typeof(x).sharding`) only under explicit mesh axes
    (`jax.sharding.AxisType.Explicit`, jax 0.5 or newer), so there it needs them. With `mesh`,
    each array must also be on a mesh of that shape. Useful after model surgery
    (`jdc.replace` with an array placed elsewhere). Leaves without a sharding (NumPy arrays,
    Python scalars) pass if they are declared replicated.

    Examples:
        >>> from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        >>> import numpy as np
        >>> mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "data"]
        >>> ok = jax.device_put(Dense(jnp.ones(4)), NamedSharding(mesh, P("data")))
        >>> jdc.check_shardings(ok)
        >>> try:
        ...     jdc.check_shardings(jdc.replace(ok, w=jnp.ones(4)))
        ... except jdc.ShardingDeclarationError as error:
        ...     print(error)
        1 array does not carry its declared sharding (no mesh given; no rules):
        - field 'w' of Dense at .w (f32[4]): has SingleDeviceSharding, declared P('data')
        Place the tree as declared: jax.device_put(tree, jdc.shardings(tree, mesh, rules)), ...
    """
    planner = _Planner(rules, mesh, default)
    mismatches = [
        f"- {_describe(leaf.path, leaf.value, leaf.declaration)}: {problem}"
        for leaf in planner.leaves(tree)
        if (problem := _mismatch(leaf, mesh)) is not None
    ]
    if mismatches:
        count = len(mismatches)
        raise ShardingDeclarationError(
            f"{count} array{'s do' if count > 1 else ' does'} not carry "
            f"{'their' if count > 1 else 'its'} declared sharding{'s' if count > 1 else ''} "
            f"({planner.context()}):\n" + "\n".join(mismatches) + "\nPlace the tree as "
            "declared: jax.device_put(tree, jdc.shardings(tree, mesh, rules)), or inside jit "
            "under explicit axes jax.sharding.reshard(tree, jdc.partition_specs(tree, rules))."
        )


def _mismatch(leaf: _Leaf, mesh: AnyMesh | None) -> str | None:
    """How an array's sharding differs from its spec, else None."""
    value = leaf.value
    rank = len(getattr(value, "shape", ()))
    expected = _dims(leaf.spec, rank)
    declared = f"declared {_show_spec(leaf.spec)}"
    if isinstance(value, core.Tracer):
        actual: Any = _traced_sharding(leaf.value)
    else:
        actual = getattr(value, "sharding", None)
    if actual is None:
        replicated = not any(expected)
        return None if replicated else f"has no sharding (not a device array), {declared}"
    if isinstance(actual, NamedSharding):
        has = _dims(actual.spec, rank)
        mesh_differs = mesh is not None and dict(actual.mesh.shape) != dict(mesh.shape)
        if has == expected and not mesh_differs:
            return None
        on = f" on mesh {dict(actual.mesh.shape)}" if mesh_differs else ""
        return f"has {_show_spec(_spec(has))}{on}, {declared}"
    if not any(expected) and actual.is_fully_replicated:
        return None
    return f"has {type(actual).__name__}, {declared}"


def _traced_sharding(value: object) -> NamedSharding:
    """The sharding in a traced array's type; only explicit mesh axes put one there."""
    typeof: Callable[[Any], Any] | None = getattr(jax, "typeof", None)
    sharding: object = getattr(typeof(value), "sharding", None) if typeof is not None else None
    explicit = getattr(getattr(jax.sharding, "AxisType", None), "Explicit", None)
    mesh: object = getattr(sharding, "mesh", None)
    if not isinstance(sharding, NamedSharding) or explicit not in getattr(mesh, "axis_types", ()):
        raise ShardingDeclarationError(
            "check_shardings met a traced array whose type carries no sharding: inside jax.jit "
            "an array's sharding is part of its type only on a mesh with explicit axes (jax "
            "0.5 or newer: jax.make_mesh(..., axis_types=(AxisType.Explicit, ...)) and "
            "jax.set_mesh(mesh)). Check outside jit instead, on the concrete arrays."
        )
    return sharding
