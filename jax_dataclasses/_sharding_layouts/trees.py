"""The trees of shardings that `Sharded` declarations describe (docs/design/sharding.md): the walk
that the checks and constraints (`_sharding_layouts.checks`) use too, and the rules context.

`partition_specs`, `shardings`, `sharded_shapes`, `check_shardings` and `constrain_shardings`
walk any pytree holding pytree dataclasses (a model, an optimizer state whose moments copy it,
an abstract tree from `jax.eval_shape`) and give each leaf the spec its declaration asks for,
through the rules (`_sharding_layouts.rules.AxisRules`, which knows nothing of trees). The walk decides
what a declaration means by what its field holds: arrays get the declared axes; a pytree
dataclass gets them as leading axes of every array inside it (layers stacked by `vmap`, one
slice each for `scan`), in front of its own fields' declarations, so that the class still
works unstacked. Every problem of a call is reported at once, one entry per field however
many copies of the tree carry it, under a header naming the mesh and the rules.

The rules and the mesh are arguments, or come from the context: `sharding_rules(rules)` for a
block, and the mesh of `jax.set_mesh`; explicit arguments win.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Generator
from contextvars import ContextVar
from typing import Any, NamedTuple, TypeAlias, cast, overload

import jax
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from jax_dataclasses._core.printing import array_summary
from jax_dataclasses._core.record import recorded
from jax_dataclasses._field_declarations.forms import ShardingDeclarationError
from jax_dataclasses._sharding_layouts.rules import (
    AxisRules,
    Fit,
    Stacking,
    Wanted,
    parse_rules,
)
from jax_dataclasses._sharding_layouts.vocabulary import (
    REPLICATED,
    AnyMesh,
    Default,
    FieldAxes,
    Rules,
    class_declarations,
)
from jax_dataclasses._tree_api import (
    KeyPath,
    keyed_children,
    keystr,
    path_text,
    shape_dtype_struct,
    tree_flatten,
    tree_flatten_with_path,
    tree_structure,
    type_of,
)

# -- the rules and the mesh of a call: given, or from the context ----------------------------

_RULES: ContextVar[Rules | None] = ContextVar("jax_dataclasses.sharding_rules", default=None)
"""The rules of the innermost `sharding_rules` block (None: none)."""


@contextlib.contextmanager
def sharding_rules(rules: Rules | None) -> Generator[None]:
    """Use `rules` in the block for every sharding function not given rules of its own.

    With the mesh of `jax.set_mesh`, a block of code needs neither: `jdc.shardings(tree)`,
    `jdc.check_shardings(tree)` and the constraints inside a jitted step take both from the
    context, and explicit arguments still win. Blocks nest (the innermost counts) and are
    per thread and per asyncio task. Like every Python value a traced function reads, the
    rules are read when `jax.jit` traces it: a step traced under one set of rules keeps them
    (JAX retraces for another mesh of `jax.set_mesh`, not for other rules).

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "embed", "mlp"]
        >>> with jdc.sharding_rules([["embed", None], ["mlp", "model"]]):
        ...     specs = jdc.partition_specs(Dense(jnp.ones((4, 8))))
        >>> tuple(specs.w)
        (None, 'model')
    """
    if rules is not None:
        parse_rules(rules)  # A malformed rule is refused where it is written.
    token = _RULES.set(rules)
    try:
        yield
    finally:
        _RULES.reset(token)


class Given(NamedTuple):
    """The rules and the mesh of one call, and where each came from (for messages)."""

    rules: Rules | None
    mesh: AnyMesh | None
    rules_from: str = ""
    mesh_from: str = ""

    def header(self) -> str:
        mesh = "no mesh given" if self.mesh is None else f"mesh {dict(self.mesh.shape)}"
        rules = "no rules" if self.rules is None else f"rules {self.rules!r}"
        return f"{mesh}{self.mesh_from}; {rules}{self.rules_from}"

    def needs_mesh(self, function: str) -> AnyMesh:
        if self.mesh is None:
            raise TypeError(
                f"jdc.{function} needs a mesh: give mesh=mesh, or call it inside "
                "`with jax.set_mesh(mesh):` (jax 0.7 or newer)."
            )
        return self.mesh


def resolve(
    function: str, *positional: object, rules: object = None, mesh: AnyMesh | None = None
) -> Given:
    """The rules and mesh of a call. The arguments after the tree (`positional`, None for
    one not given) are the rules, then the mesh as a keyword; a mesh given positionally is
    recognised by its type, before or after the rules (`shardings(tree, mesh, rules)` is the
    order of earlier versions). What is not given comes from the context: `sharding_rules`,
    and the mesh of `jax.set_mesh`."""
    given = [a for a in positional if a is not None]
    meshes = [a for a in given if isinstance(a, Mesh | AbstractMesh)]
    others = [a for a in given if not isinstance(a, Mesh | AbstractMesh)]
    if len(meshes) > 1 or len(others) > 1 or (meshes and mesh is not None):
        raise TypeError(
            f"jdc.{function} got {len(meshes) + (mesh is not None)} meshes and "
            f"{len(others) + (rules is not None)} sets of rules: give the tree, the rules, and "
            f"the mesh as a keyword, jdc.{function}(tree, rules, mesh=mesh)."
        )
    if others and rules is not None:
        raise TypeError(f"jdc.{function} got the rules twice, positionally and as rules=.")
    rules = others[0] if others else rules
    mesh = meshes[0] if meshes else mesh
    rules_from = mesh_from = ""
    if rules is None and (context := _RULES.get()) is not None:
        rules, rules_from = context, " from jdc.sharding_rules"
    if mesh is None and (mesh := _context_mesh()) is not None:
        mesh_from = " from jax.set_mesh"
    return Given(cast("Rules | None", rules), mesh, rules_from, mesh_from)


def _context_mesh() -> AnyMesh | None:
    """The mesh of `jax.set_mesh` (jax 0.7+): the concrete one, or the abstract one while
    jit traces (where JAX gives only that); None outside such a block."""
    get_abstract: Callable[[], AbstractMesh] | None = getattr(
        jax.sharding, "get_abstract_mesh", None
    )
    abstract = get_abstract() if get_abstract is not None else None
    if abstract is None or not dict(abstract.shape):
        return None
    get_mesh: Callable[[], Mesh] | None = getattr(jax.sharding, "get_mesh", None)
    try:
        concrete = get_mesh() if get_mesh is not None else None
    except ValueError:  # Inside jit: only the abstract mesh is known.
        return abstract
    return concrete if concrete is not None and dict(concrete.shape) else abstract


# -- the walk: one call over one tree ---------------------------------------------------------


class Leaf(NamedTuple):
    """A leaf, where it is, its spec, and the declaration that gave it (None: the default)."""

    path: KeyPath
    value: Any
    spec: PartitionSpec
    declaration: FieldAxes | None


class Report:
    """The problems of one call, one entry per (place, problem): a field's problem is told
    once however many copies of the tree (parameters, optimizer moments) carry it, with the
    key paths of the others."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], list[tuple[KeyPath, str]]] = {}

    @property
    def count(self) -> int:
        """How many leaves (or classes) have a problem."""
        return sum(map(len, self.entries.values()))

    @property
    def declarations(self) -> int:
        """How many declarations (or places that name themselves) have a problem."""
        return len({where or problem for where, problem in self.entries})

    def add(self, where: str, path: KeyPath, leaf: Any, problem: str) -> None:
        """`where`: the declaring field, or "" for a problem that names its own place."""
        self.entries.setdefault((where, problem), []).append((path, summary(leaf)))

    def lines(self) -> list[str]:
        lines: list[str] = []
        for (where, problem), places in self.entries.items():
            (path, summary), others = places[0], [keystr(p) for p, _ in places[1:]]
            at = f"{where} at {path_text(path)} ({summary}): " if where else ""
            lines.append(f"- {at}{problem}")
            if others:
                more = f" and {len(others) - 3} more" if len(others) > 3 else ""
                lines.append(f"  Also at {', '.join(others[:3])}{more}.")
        return lines


_Field: TypeAlias = tuple[type, str]
"""A class and the name of one of its fields."""
_Holder: TypeAlias = tuple[_Field, type, KeyPath]
"""A field holding a pytree dataclass: the field, the class it holds, and where it is."""


def _where(cls: type, name: str) -> str:
    """`field 'w' of Dense`, as `FieldAxes.where` says it."""
    return f"field {name!r} of {cls.__qualname__}"


class Walk:
    """One call of `partition_specs` (or its siblings): the rules applied, the default, the
    declarations of the classes met so far, and the problems found."""

    def __init__(self, given: Given, default: Default) -> None:
        self.given = given
        self.rules = AxisRules.of(given.rules, given.mesh)
        self.default = default
        self.declarations: dict[type, dict[str, FieldAxes] | None] = {}
        self.fitted: dict[tuple[object, ...], Fit] = {}
        """The fit of each declaration (or default), stacking, holders (named in hints) and
        shape: computed once per call."""
        self.report = Report()
        self.stacked_whole: set[tuple[FieldAxes, tuple[str, ...]]] = set()
        """The declarations, and the fields stacking them, that fit a stacked array of full
        rank somewhere in the tree."""
        self.misfits: list[tuple[Leaf, object, tuple[Stacking, ...], tuple[Any, ...]]] = []
        """The leaves that do not fit, what each asks, its stacking and holders: reported
        once the whole tree is seen."""

    def leaves(self, tree: Any) -> list[Leaf]:
        """Each leaf of `tree` with its spec, in `jax.tree.leaves` order; raises
        `ShardingDeclarationError` listing every problem."""
        found: list[Leaf] = []
        self._visit(tree, (), None, (), None, (), found)
        if not self.misfits and not self.report.entries:
            return found
        extra = {leaf.path: 0 for leaf in found if leaf.declaration is not None}
        for leaf, _, stacked, _ in self.misfits:
            if leaf.declaration is not None:  # Dimensions beyond those declared and stacked.
                wanted = sum(len(level.axes) for level in stacked) + len(leaf.declaration.axes)
                extra[leaf.path] = len(getattr(leaf.value, "shape", ())) - wanted
        for leaf, asked, stacked, holders in self.misfits:
            declared = leaf.declaration
            derived = declared is not None and (declared, _by(stacked)) in self.stacked_whole
            where = declared.where if declared is not None else "undeclared leaf"
            helps = _holder_that_helps(holders, extra, extra.get(leaf.path, 0))
            for problem in self._fit(leaf.value, asked, stacked, helps, derived).problems:
                self.report.add(where, leaf.path, leaf.value, problem)
        if self.report.entries:
            count = self.report.declarations
            raise ShardingDeclarationError(
                f"{count} sharding declaration{'s do' if count > 1 else ' does'} not fit "
                f"({self.given.header()}):\n" + "\n".join(self.report.lines())
            )
        return found

    def _visit(
        self,
        node: Any,
        path: KeyPath,
        declared: FieldAxes | None,
        stacked: tuple[Stacking, ...],
        field: _Field | None,
        holders: tuple[_Holder, ...],
        found: list[Leaf],
    ) -> None:
        """`field`: the class and field name that hold `node`; `holders`: the fields around
        it that hold a pytree dataclass, each with that class (both for messages only, so
        kept unformatted)."""
        kind = type_of(node)
        if recorded(kind) is not None:  # Ours (its declarations, decided, come below).
            if declared is not None:  # Leading axes of every array inside: stacked layers.
                level = _stack_level(node, sum(len(level.axes) for level in stacked), declared)
                stacked = (*stacked, level)
            if field is not None:
                holders = (*holders, (field, kind, path))
            own = self._declarations(kind, path, node)
            for (key, *_), child in keyed_children(node) if own is not None else ():
                name: str = key.name  # Our classes are keyed by field name (`GetAttrKey`).
                declaration = own.get(name) if own is not None else None
                self._visit(child, (*path, key), declaration, stacked, (kind, name), holders, found)
            return
        items, _ = tree_flatten_with_path(node, lambda x: recorded(type_of(x)) is not None)
        for subpath, leaf in items:
            if recorded(type_of(leaf)) is not None:
                self._visit(leaf, (*path, *subpath), declared, stacked, field, holders, found)
            else:
                found.append(self._leaf((*path, *subpath), leaf, declared, stacked, holders))

    def _declarations(self, kind: type, path: KeyPath, node: Any) -> dict[str, FieldAxes] | None:
        """The declarations of `kind`, read once per call; None if they cannot be read (the
        problem is reported)."""
        if kind not in self.declarations:
            try:
                self.declarations[kind] = class_declarations(kind)
            except ShardingDeclarationError as error:
                self.declarations[kind] = None
                for line in str(error).splitlines():
                    self.report.add("", path, node, line)
        return self.declarations[kind]

    def _leaf(
        self,
        path: KeyPath,
        leaf: Any,
        declared: FieldAxes | None,
        stacked: tuple[Stacking, ...],
        holders: tuple[_Holder, ...],
    ) -> Leaf:
        asked: object = declared
        if declared is None:
            given = self.default(path, leaf) if callable(self.default) else self.default
            asked = cast(object, given)  # A function may return anything.
            if not isinstance(asked, PartitionSpec):
                self.report.add(
                    "undeclared leaf",
                    path,
                    leaf,
                    f"default returned {asked!r}, not a PartitionSpec.",
                )
                return Leaf(path, leaf, REPLICATED, None)
        shape: tuple[int, ...] = tuple(getattr(leaf, "shape", ()))
        fit = self.fitted.get((asked, stacked, (), shape, False)) or self._fit(
            leaf,
            asked,
            stacked,
            (),
            False,  # Holders: for hints, told in `leaves`.
        )
        found = Leaf(path, leaf, fit.spec, declared)
        if fit.problems:  # Told at the end: whether it is derived needs the whole tree.
            self.misfits.append((found, asked, stacked, holders))
        elif declared is not None and stacked:
            self.stacked_whole.add((declared, _by(stacked)))
        return found

    def _fit(
        self,
        leaf: Any,
        asked: object,
        stacked: tuple[Stacking, ...],
        holders: tuple[_Holder, ...],
        derived: bool,
    ) -> Fit:
        """The fit of a leaf that asks for its declaration (a `FieldAxes`) or a default
        spec, computed once per call for each (asked, stacking, holders, shape, derived):
        layers alike are resolved and checked once."""
        shape: tuple[int, ...] = tuple(getattr(leaf, "shape", ()))
        declared = asked if isinstance(asked, FieldAxes) else None
        key = (asked, stacked, holders if declared else (), shape, derived)  # As `_leaf`'s.
        fit = self.fitted.get(key)
        if fit is None:
            if declared is None:
                wanted = Wanted(stacked, None, cast(PartitionSpec, asked))
            else:
                around = tuple((_where(*f), held.__qualname__) for f, held, _ in holders)
                wanted = Wanted(stacked, declared.axes, REPLICATED, around, derived)
            fit = self.fitted[key] = self.rules.fit(wanted, shape)
        return fit


def _holder_that_helps(
    holders: tuple[_Holder, ...], extra: dict[KeyPath, int], count: int
) -> tuple[_Holder, ...]:
    """The outermost field around an array with `count` dimensions more than declared whose
    every declared array has as many more: declaring a stack there (`Sharded[Block, None]`)
    fits them all, where one further in would leave the others out."""
    for holder in holders if count > 0 else ():
        inside = {n for path, n in extra.items() if path[: len(holder[2])] == holder[2]}
        if inside == {count}:
            return (holder,)
    return ()


def _by(stacked: tuple[Stacking, ...]) -> tuple[str, ...]:
    """The fields that stack an array, whatever the sizes of their layers in this copy."""
    return tuple(level.where for level in stacked)


def _stack_level(node: Any, start: int, declared: FieldAxes) -> Stacking:
    """The stacking that `declared` adds after the first `start` axes (outer stacks'), with
    the sizes of the layers in `node` along them: those of most of its arrays with dimensions
    of their own after them (none: unknown). A shared vector, or a placeholder of adafactor's,
    has none."""
    end = start + len(declared.axes)
    found = Counter(
        tuple(leaf.shape[start:end])
        for leaf in tree_flatten(node)[0]
        if is_array(leaf) and len(leaf.shape) > end
    )
    return Stacking(declared.axes, declared.where, found.most_common(1)[0][0] if found else ())


def summary(leaf: Any) -> str:
    """`f32[4,8]`: what a leaf is, for messages."""
    if recorded(type_of(leaf)) is not None:
        return type_of(leaf).__qualname__
    return array_summary(leaf) if is_array(leaf) else repr(leaf)


def is_array(value: object) -> bool:
    """Whether `value` has a shape and dtype (an array, a `ShapeDtypeStruct`, a tracer): not a
    Python scalar."""
    return hasattr(value, "shape") and hasattr(value, "dtype")


def map_leaves(tree: Any, leaves: list[Leaf], make: Callable[[Leaf], Any]) -> Any:
    return tree_structure(tree, None).unflatten([make(leaf) for leaf in leaves])


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
    order of priority, tuples or lists); every other leaf gets `default`: a `PartitionSpec`
    in mesh axes (replicated unless given), or a function of `(key path, leaf)` returning
    one. A `Sharded[...]` field holding a pytree dataclass (a stack of layers) puts its axes
    in front of those of every array inside it. Leaves may be arrays,
    `jax.ShapeDtypeStruct`s (`jax.eval_shape`) or Python scalars, inside any containers and
    other libraries' trees: an optax state whose moments are copies of a model gets the
    model's specs. With a mesh (a `Mesh` or `AbstractMesh`, given or that of
    `jax.set_mesh`), mesh axes and sizes are checked too; without one, a name that no rule
    covers is taken for a mesh axis. Rules not given come from `jdc.sharding_rules`.

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
    given = resolve("partition_specs", rules, mesh=mesh)
    return map_leaves(tree, Walk(given, default).leaves(tree), lambda leaf: leaf.spec)


@overload
def shardings(
    tree: Any,
    rules: Rules | None = None,
    *,
    mesh: AnyMesh | None = None,
    default: Default = REPLICATED,
) -> Any: ...
@overload
def shardings(
    tree: Any, mesh: AnyMesh, /, rules: Rules | None = None, *, default: Default = REPLICATED
) -> Any: ...
def shardings(  # pyright: ignore[reportInconsistentOverload]  # rules: in *positional
    tree: Any,
    *positional: Any,
    rules: Rules | None = None,
    mesh: AnyMesh | None = None,
    default: Default = REPLICATED,
) -> Any:
    """`partition_specs(tree, rules, mesh=mesh, default=default)` as `NamedSharding`s on
    the mesh (given, or that of `jax.set_mesh`): for `jax.jit`'s `in_shardings` and
    `out_shardings` and `jax.device_put`. `shardings(tree, mesh, rules)` works too.

    Examples:
        >>> from jax.sharding import Mesh
        >>> import numpy as np
        >>> mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "embed", "mlp"]
        >>> init = lambda: Dense(jnp.ones((4, 8)))
        >>> rules = {"embed": "data", "mlp": "model"}
        >>> placed = jax.jit(
        ...     init, out_shardings=jdc.shardings(jax.eval_shape(init), rules, mesh=mesh)
        ... )()
        >>> tuple(placed.w.sharding.spec)
        ('data', 'model')
    """
    given = resolve("shardings", *positional, rules=rules, mesh=mesh)
    on = given.needs_mesh("shardings")
    leaves = Walk(given, default).leaves(tree)
    return map_leaves(tree, leaves, lambda leaf: NamedSharding(on, leaf.spec))


@overload
def sharded_shapes(
    tree: Any,
    rules: Rules | None = None,
    *,
    mesh: AnyMesh | None = None,
    default: Default = REPLICATED,
) -> Any: ...
@overload
def sharded_shapes(
    tree: Any, mesh: AnyMesh, /, rules: Rules | None = None, *, default: Default = REPLICATED
) -> Any: ...
def sharded_shapes(  # pyright: ignore[reportInconsistentOverload]  # rules: in *positional
    tree: Any,
    *positional: Any,
    rules: Rules | None = None,
    mesh: AnyMesh | None = None,
    default: Default = REPLICATED,
) -> Any:
    """`tree` with each array (or `ShapeDtypeStruct`) replaced by a `jax.ShapeDtypeStruct` of
    its shape and dtype carrying its `NamedSharding` on the mesh (given, or that of
    `jax.set_mesh`): a restore target for orbax that places every array where it is
    declared. Other leaves are kept as they are. `sharded_shapes(tree, mesh, rules)` works too.

    Examples:
        >>> from jax.sharding import Mesh
        >>> import numpy as np
        >>> mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jdc.Sharded[jax.Array, "data", None]
        >>> abstract = jax.eval_shape(lambda: Dense(jnp.ones((4, 8))))
        >>> target = jdc.sharded_shapes(abstract, mesh=mesh)
        >>> target.w.shape, tuple(target.w.sharding.spec)
        ((4, 8), ('data', None))
    """
    given = resolve("sharded_shapes", *positional, rules=rules, mesh=mesh)
    on = given.needs_mesh("sharded_shapes")

    def shape_of(leaf: Leaf) -> Any:
        value = leaf.value
        if not is_array(value):
            return value
        weak = bool(getattr(value, "weak_type", False))  # As `eval_shape` gave it.
        sharding = NamedSharding(on, leaf.spec)
        return shape_dtype_struct(value.shape, value.dtype, sharding=sharding, weak_type=weak)

    return map_leaves(tree, Walk(given, default).leaves(tree), shape_of)
