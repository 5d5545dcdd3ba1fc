"""Arrays against their declarations: `check_shardings` compares where they are with where
they are declared, `constrain_shardings` and `with_logical_constraint` put them there inside
`jax.jit` (docs/design/sharding.md).

Inside `jit`, only a mesh's Explicit axes are part of an array's type (`jax.typeof(x)`), and
the two constraints JAX offers each take one kind of axis: `jax.sharding.reshard` the Explicit
ones, `jax.lax.with_sharding_constraint` the Auto ones. So a check that would need an Auto
axis inside `jit` is an error saying it cannot be made there (never a false mismatch), and a
constraint is split by axis type, which works on Auto, Explicit and mixed meshes alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import jax
from jax import core
from jax.sharding import NamedSharding, PartitionSpec

from jax_dataclasses._field_declarations.forms import AxisEntry, ShardingDeclarationError, is_entry
from jax_dataclasses._sharding_layouts.rules import (
    AxisRules,
    Wanted,
    dims_of,
    show_spec,
    spec_from_dims,
)
from jax_dataclasses._sharding_layouts.trees import (
    Given,
    Leaf,
    Report,
    Walk,
    is_array,
    map_leaves,
    resolve,
    summary,
)
from jax_dataclasses._sharding_layouts.vocabulary import (
    REPLICATED,
    AnyMesh,
    Default,
    Rules,
)
from jax_dataclasses._tree_api import path_text

T = TypeVar("T")
_AXIS_TYPE: Any = getattr(jax.sharding, "AxisType", None)  # jax 0.5+
_EXPLICIT: object = getattr(_AXIS_TYPE, "Explicit", None)
_AUTO: object = getattr(_AXIS_TYPE, "Auto", None)
_with_sharding_constraint = cast(
    "Callable[[Any, NamedSharding], Any]",
    jax.lax.with_sharding_constraint,  # pyright: ignore[reportUnknownMemberType]  # no stubs
)
_reshard: Callable[[Any, NamedSharding], Any] | None = getattr(jax.sharding, "reshard", None)
"""JAX's two constraints, typed (jax gives them no annotations)."""


def check_shardings(
    tree: Any,
    rules: Rules | None = None,
    *,
    mesh: AnyMesh | None = None,
    default: Default = REPLICATED,
) -> None:
    """Check that the arrays of `tree` carry the shardings they declare; raise one
    `ShardingDeclarationError` listing every array that does not.

    Concrete arrays are read from their `.sharding`. Inside `jax.jit`, an array's type
    (`jax.typeof(x).sharding`) carries only the mesh's Explicit axes
    (`jax.sharding.AxisType.Explicit`, jax 0.5 or newer): there an array declared along an
    Auto axis cannot be checked, and that is an error saying so. With a mesh (given, or that
    of `jax.set_mesh`), each array must also be on a mesh of that shape. Useful after model
    surgery (`jdc.replace` with an array placed elsewhere), and inside the body of a
    `lax.scan` over stacked layers. Leaves without a sharding (NumPy arrays, Python scalars)
    pass if they are declared replicated.

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
        Place the tree as declared: jax.device_put(tree, jdc.shardings(tree, rules, ...
    """
    given = resolve("check_shardings", rules, mesh=mesh)
    wrong, unchecked = Report(), Report()
    for leaf in Walk(given, default).leaves(tree):
        where = leaf.declaration.where if leaf.declaration is not None else "undeclared leaf"
        value: object = leaf.value
        if isinstance(value, core.Tracer):
            problem, checked = _traced_mismatch(leaf, given)
        else:
            problem, checked = _mismatch(leaf, given.mesh), True
        if problem is not None:
            report = wrong if checked else unchecked
            report.add(where, leaf.path, leaf.value, problem)
    if not (wrong.entries or unchecked.entries):
        return
    parts: list[str] = []
    if wrong.entries:
        n = wrong.count
        parts.append(
            f"{n} array{'s do' if n > 1 else ' does'} not carry {'their' if n > 1 else 'its'} "
            f"declared sharding{'s' if n > 1 else ''}"
        )
    if unchecked.entries:
        n = unchecked.count
        parts.append(f"{n} array{'s' if n > 1 else ''} cannot be checked inside jax.jit")
    lines = [f"{' and '.join(parts)} ({given.header()}):", *wrong.lines()]
    if wrong.entries:
        lines.append(
            "Place the tree as declared: jax.device_put(tree, jdc.shardings(tree, rules, "
            "mesh=mesh)), or inside jax.jit jdc.constrain_shardings(tree, rules)."
        )
    lines += unchecked.lines()
    if unchecked.entries:
        lines.append(
            "Inside jax.jit an array's type carries only the Explicit axes of its mesh: check "
            "outside jit, on the concrete arrays, or make those axes Explicit "
            "(jax.make_mesh(..., axis_types=...))."
        )
    raise ShardingDeclarationError("\n".join(lines))


def _mismatch(leaf: Leaf, mesh: AnyMesh | None) -> str | None:
    """How a concrete array's sharding differs from its spec, else None."""
    value = leaf.value
    rank = len(getattr(value, "shape", ()))
    expected = dims_of(leaf.spec, rank)
    declared = f"declared {show_spec(leaf.spec)}"
    actual = getattr(value, "sharding", None)
    if actual is None:
        replicated = not any(expected)
        return None if replicated else f"has no sharding (not a device array), {declared}"
    if isinstance(actual, NamedSharding):
        return _differs(dims_of(actual.spec, rank), actual, expected, declared, mesh)
    if not any(expected) and actual.is_fully_replicated:
        return None
    return f"has {type(actual).__name__}, {declared}"


def _traced_mismatch(leaf: Leaf, given: Given) -> tuple[str | None, bool]:
    """How a traced array's type differs from its spec (and True), or why it cannot be told
    here (and False). Raises when the mesh has no Explicit axis at all."""
    typeof: Callable[[Any], Any] | None = getattr(jax, "typeof", None)
    sharding: object = getattr(typeof(leaf.value), "sharding", None) if typeof else None
    types = dict(zip(*_axes_and_types(getattr(sharding, "mesh", None)), strict=True))
    if not isinstance(sharding, NamedSharding) or _EXPLICIT not in types.values():
        where = leaf.declaration.where if leaf.declaration is not None else "undeclared leaf"
        raise ShardingDeclarationError(
            f"check_shardings met a traced array whose type carries no sharding, {where} at "
            f"{path_text(leaf.path)} ({given.header()}): inside jax.jit an array's sharding is part of its type only on "
            "a mesh with explicit axes (jax 0.5 or newer: jax.make_mesh(..., "
            "axis_types=(AxisType.Explicit, ...)) and jax.set_mesh(mesh)). Check outside jit "
            "instead, on the concrete arrays."
        )
    rank = len(leaf.value.shape)
    expected = dims_of(leaf.spec, rank)
    hidden = [a for axes in expected for a in axes if types.get(a) is not _EXPLICIT]
    declared = f"declared {show_spec(leaf.spec)}"
    if hidden:
        names = ", ".join(map(repr, dict.fromkeys(hidden)))
        return f"{declared}, along {names}, not an Explicit axis of the mesh", False
    return _differs(dims_of(sharding.spec, rank), sharding, expected, declared, given.mesh), True


def _differs(
    has: tuple[tuple[str, ...], ...],
    actual: NamedSharding,
    expected: tuple[tuple[str, ...], ...],
    declared: str,
    mesh: AnyMesh | None,
) -> str | None:
    mesh_differs = mesh is not None and dict(actual.mesh.shape) != dict(mesh.shape)
    if has == expected and not mesh_differs:
        return None
    on = f" on mesh {dict(actual.mesh.shape)}" if mesh_differs else ""
    return f"has {show_spec(spec_from_dims(has))}{on}, {declared}"


def _axes_and_types(mesh: object) -> tuple[tuple[str, ...], tuple[object, ...]]:
    """A mesh's axis names and their types (none on jax before 0.5, or without a mesh)."""
    names: tuple[str, ...] = tuple(getattr(mesh, "axis_names", ()))
    types: tuple[object, ...] = tuple(getattr(mesh, "axis_types", None) or ())  # jax 0.4: None
    return (names, types) if len(types) == len(names) else ((), ())


# -- constraints inside jit -------------------------------------------------------------------


def constrain_shardings(
    tree: T,
    rules: Rules | None = None,
    *,
    mesh: AnyMesh | None = None,
    default: Default = REPLICATED,
) -> T:
    """`tree` with every array constrained to its declared sharding: inside `jax.jit`, what
    `jax.lax.with_sharding_constraint` does for the mesh's Auto axes and
    `jax.sharding.reshard` for its Explicit ones, with the specs of
    `partition_specs(tree, rules, mesh=mesh, default=default)`. For gradients, updated
    parameters and other intermediate trees of a jitted step; the mesh is given, or that of
    `jax.set_mesh`.

    Examples:
        >>> from jax.sharding import Mesh
        >>> import numpy as np
        >>> mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "embed", "mlp"]
        >>> rules = {"embed": "data", "mlp": "model"}
        >>> @jax.jit
        ... def doubled(layer: Dense) -> Dense:
        ...     twice = jax.tree.map(lambda w: 2 * w, layer)
        ...     return jdc.constrain_shardings(twice, rules, mesh=mesh)  # w over data x model
        >>> doubled(Dense(jnp.ones((4, 8)))).w.shape
        (4, 8)
    """
    given = resolve("constrain_shardings", rules, mesh=mesh)
    on = given.needs_mesh("constrain_shardings")
    leaves = Walk(given, default).leaves(tree)
    constrained: T = map_leaves(tree, leaves, lambda leaf: _constrain(leaf.value, leaf.spec, on))
    return constrained


def with_logical_constraint(
    x: T, axes: Sequence[AxisEntry], rules: Rules | None = None, *, mesh: AnyMesh | None = None
) -> T:
    """The array `x` constrained, inside `jax.jit`, to the layout its logical `axes` (one
    name, None or tuple of names per dimension) get through the rules: the activations'
    counterpart of a `Sharded` declaration, as linen's `nn.with_logical_constraint`. Rules
    and mesh are given, or those of `jdc.sharding_rules` and `jax.set_mesh`; on Auto axes it
    is `jax.lax.with_sharding_constraint`, on Explicit ones `jax.sharding.reshard`.

    Examples:
        >>> from jax.sharding import Mesh
        >>> import numpy as np
        >>> mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
        >>> @jax.jit
        ... def hidden(x: jax.Array) -> jax.Array:
        ...     y = jax.nn.relu(x)  # rows over "data", columns not sharded:
        ...     return jdc.with_logical_constraint(y, ("batch", None), {"batch": "data"}, mesh=mesh)
        >>> hidden(jnp.ones((8, 4))).shape
        (8, 4)
    """
    if isinstance(axes, str) or not all(map(is_entry, axes)):
        raise TypeError(
            f"with_logical_constraint got the axes {axes!r}: give a tuple with one entry per "
            "dimension of the array, each a logical axis name, None, or a tuple of names, for "
            "example ('batch', None)."
        )
    given = resolve("with_logical_constraint", rules, mesh=mesh)
    on = given.needs_mesh("with_logical_constraint")
    shape: tuple[int, ...] = tuple(getattr(x, "shape", ()))
    fit = AxisRules.of(given.rules, given.mesh).fit(Wanted((), tuple(axes)), shape)
    if fit.problems:
        count = len(fit.problems)
        raise ShardingDeclarationError(
            f"{count} problem{'s' if count > 1 else ''} with the logical axes {tuple(axes)!r} "
            f"of with_logical_constraint ({given.header()}):\n"
            + "\n".join(f"- the array ({summary(x)}): {problem}" for problem in fit.problems)
        )
    constrained: T = _constrain(x, fit.spec, on)
    return constrained


def _constrain(value: Any, spec: PartitionSpec, mesh: AnyMesh) -> Any:
    """`value` constrained to `spec` on `mesh`: `reshard` along its Explicit axes, then
    `with_sharding_constraint` along its Auto ones (each refuses the other kind); Manual axes
    (inside `shard_map`) are already the blocks' own."""
    if not is_array(value):
        return value  # A Python scalar, kept as it is.
    names, types = _axes_and_types(mesh)
    if not names or _reshard is None:  # jax before explicit axes: every axis is Auto.
        return _with_sharding_constraint(value, NamedSharding(mesh, spec))
    kinds = dict(zip(names, types, strict=True))
    dims = dims_of(spec, len(value.shape))
    if _EXPLICIT in types:
        explicit = [tuple(a for a in axes if kinds[a] is _EXPLICIT) for axes in dims]
        value = _reshard(value, NamedSharding(mesh, spec_from_dims(explicit)))
    if _AUTO in types:
        auto = [tuple(a for a in axes if kinds[a] is _AUTO) for axes in dims]
        value = _with_sharding_constraint(value, NamedSharding(mesh, spec_from_dims(auto)))
    return value
