"""Logical axes to mesh axes, as a value: the rules and the mesh's axis sizes (docs/design/sharding.md).

`AxisRules(rules, sizes).fit(wanted, shape)` answers, for one array, what every sharding
function asks: given the logical axes that its declaration names (after those of the fields
that stack it) and its shape, which mesh axes shard each dimension, or what is wrong, each
problem with its fix. It knows nothing of trees or classes: the tree walk (`_sharding_layouts.trees`)
applies it to each leaf and says where the leaf is, so these rules are tested without trees.
Logical names go through the rules as flax's `logical_to_mesh_axes` takes them.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple, TypeAlias, cast

from jax.sharding import AbstractMesh, Mesh, PartitionSpec

from jax_dataclasses._field_declarations.forms import AxisEntry, is_entry
from jax_dataclasses._sharding_layouts.vocabulary import (
    REPLICATED,
)

Rule: TypeAlias = tuple[str, tuple[str, ...] | None]
"""A logical name and the mesh axes it maps to (None: not sharded)."""
Dims: TypeAlias = tuple[tuple[str, ...], ...]
"""The mesh axes that shard each dimension of an array (empty: not sharded)."""

_TWICE = (
    ": a mesh axis shards one dimension of an array at most once (flax nnx raises "
    "DuplicateSpecError, flax linen would leave the dimension unsharded without a word)."
)

_DERIVED = (
    "An optimizer state derived from the stacked arrays rather than copying them (adafactor's "
    "factored moments v_row and v_col, and its (1,) placeholders) cannot take their "
    "declarations (flax nnx refuses them too): give that state specs of its own, for example "
    "replicated, jax.tree.map(lambda _: P(), state)."
)

spec_of = cast("Callable[..., PartitionSpec]", PartitionSpec)
"""`PartitionSpec(*entries)`, typed (jax gives its constructor no annotations)."""


def parse_rules(rules: object) -> tuple[Rule, ...]:
    """The rules as (logical name, mesh axes or None) pairs, in order of priority, from a
    mapping, flax's pairs, or lists of lists as JSON and YAML configs load them."""
    if isinstance(rules, Mesh | AbstractMesh):
        raise TypeError(
            "a mesh was given as the rules: give the rules second and the mesh as a keyword, "
            "jdc.shardings(tree, rules, mesh=mesh)."
        )
    if isinstance(rules, Mapping):
        pairs: Iterable[object] = cast("Mapping[object, object]", rules).items()
    elif isinstance(rules, Sequence) and not isinstance(rules, str):
        pairs = cast("Sequence[object]", rules)
    else:
        pairs = [rules]
    parsed: list[Rule] = []
    for pair in pairs:
        items = tuple(cast("Sequence[object]", pair)) if isinstance(pair, tuple | list) else ()
        logical, target = items if len(items) == 2 else (None, 0)
        if isinstance(target, list):
            target = tuple(cast("list[object]", target))
        if not isinstance(logical, str) or not is_entry(target):
            raise TypeError(
                f"the sharding rule {pair!r} is not a (logical name, mesh axes) pair: rules are a "
                "mapping {'mlp': 'model', 'embed': None} or a sequence of pairs [('mlp', "
                "'model'), ('batch', ('data', 'fsdp'))] (lists, as JSON and YAML load them, "
                "too), mesh axes being a name, a sequence of names or None."
            )
        axes = cast("tuple[str, ...] | None", target)
        parsed.append((logical, (target,) if isinstance(target, str) else axes))
    return tuple(parsed)


class Stacking(NamedTuple):
    """Leading axes that a field holding a pytree dataclass declares for every array inside
    it (layers stacked by `vmap` for `scan`), and that field, for messages."""

    axes: tuple[AxisEntry, ...]
    where: str
    sizes: tuple[int, ...] = ()
    """The stack's sizes along these axes, those of most arrays inside it (empty: unknown):
    `lax.scan` needs every array of a stack to have them."""


class Wanted(NamedTuple):
    """What one array is asked to be: the axes of the fields stacking it, then its own
    declared logical axes, or (undeclared) a default spec in mesh axes."""

    stacked: tuple[Stacking, ...]
    axes: tuple[AxisEntry, ...] | None
    default: PartitionSpec = REPLICATED
    holders: tuple[tuple[str, str], ...] = ()
    """The fields around the array that hold a pytree dataclass, outermost first, each with
    the name of that class (for the hint when the array has more dimensions than declared)."""
    derived: bool = False
    """Whether its declaration gave the same stacking to an array of full rank elsewhere in
    the call: one with fewer dimensions is derived from it (adafactor's factored moments)."""


class Fit(NamedTuple):
    """The array's spec, and what does not fit (empty when the spec is right)."""

    spec: PartitionSpec
    problems: tuple[str, ...] = ()


class _Slot(NamedTuple):
    """One logical name of one dimension, and where it comes from (for messages)."""

    dim: int
    name: str
    stacked_by: str | None


@dataclasses.dataclass(frozen=True)
class AxisRules:
    """The rules (None: none given, every name is a mesh axis) and the mesh's axis sizes
    (None: no mesh known, so mesh axes and sizes are not checked)."""

    rules: tuple[Rule, ...] | None
    sizes: tuple[tuple[str, int], ...] | None

    @classmethod
    def of(cls, rules: object, mesh: Mesh | AbstractMesh | None) -> AxisRules:
        sizes = tuple(dict(mesh.shape).items()) if mesh is not None else None
        return cls(None if rules is None else parse_rules(rules), sizes)

    def fit(self, wanted: Wanted, shape: tuple[int, ...]) -> Fit:
        """The spec of an array of `shape` that is `wanted`; problems name no place (the
        walk says where), and the spec is replicated where the rank does not fit."""
        rank_problem = _rank_problem(wanted, shape)
        if rank_problem is None:
            rank_problem = _size_problem(wanted, shape)
        if rank_problem is not None:
            return Fit(REPLICATED, (rank_problem,))
        problems: list[str] = []
        stacked = [(entry, level.where) for level in wanted.stacked for entry in level.axes]
        own: list[tuple[AxisEntry, str | None]] = [(entry, None) for entry in wanted.axes or ()]
        slots = [
            _Slot(dim, name, by)
            for dim, (entry, by) in enumerate([*stacked, *own])
            for name in _names(entry)
        ]
        first_own = len(stacked)
        dims = self._mesh_axes(slots, len(shape), problems)
        if wanted.axes is None:  # The default: mesh axes, after the stacked dimensions.
            for i, axes in enumerate(dims_of(wanted.default, len(shape) - first_own)):
                dims[first_own + i] = (dims[first_own + i][0], axes)
        if not problems:
            self._check_mesh(dims, shape, problems)
        if wanted.axes is None:  # The default as given (`P()` stays `P()`), after the stacked.
            stacked_spec = spec_from_dims([axes for _, axes in dims[:first_own]])
            return Fit(spec_of(*stacked_spec, *wanted.default), tuple(problems))
        return Fit(spec_from_dims([axes for _, axes in dims]), tuple(problems))

    def _mesh_axes(
        self, slots: list[_Slot], rank: int, problems: list[str]
    ) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """For each dimension: the logical names whose rules gave it mesh axes, and those
        mesh axes. A name through the rules in their order of priority, a rule used only if
        its mesh axes are still free in this array (as flax's `logical_to_mesh_axes`); a
        name whose rules are all taken is not sharded."""
        names = [slot.name for slot in slots]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            problems.append(
                f"names the axis {', '.join(map(repr, twice))} on several dimensions"
                f"{_stacked_note(s for s in slots if s.name in twice)}; an array is sharded "
                "along an axis at most once. Use another name, or None."
            )
        ruled = {logical for logical, _ in self.rules or ()}
        sizes = dict(self.sizes) if self.sizes is not None else None
        assigned: list[tuple[str, ...] | None] = [None] * len(slots)
        unknown: set[str] = set()  # Told once each, however many dimensions name them.
        for i, slot in enumerate(slots):
            if slot.name in ruled:
                continue
            if (
                self.rules is not None
                and sizes is not None
                and slot.name not in sizes
                and slot.name not in unknown
            ):
                unknown.add(slot.name)
                close = _close(slot.name, [*ruled, *sizes])
                problems.append(
                    f"the logical axis {slot.name!r}{_stacked_note([slot])} is neither in the "
                    f"rules nor a mesh axis{close or '.'} {'Otherwise add' if close else 'Add'} a "
                    f"rule for it (rules={{{slot.name!r}: 'model'}}, or None to replicate), or "
                    f"use a mesh axis ({', '.join(map(repr, sizes))})."
                )
            assigned[i] = (slot.name,)
        for logical, target in self.rules or ():
            for i, slot in enumerate(slots):
                taken = {axis for axes in assigned if axes for axis in axes}
                if slot.name == logical and assigned[i] is None and taken.isdisjoint(target or ()):
                    assigned[i] = target or ()
        self._all_taken(slots, assigned, problems)
        dims: list[tuple[tuple[str, ...], tuple[str, ...]]] = [((), ())] * rank
        for slot, axes in zip(slots, assigned, strict=True):
            via, found = dims[slot.dim]
            from_rule = (slot.name,) if slot.name in ruled and axes else ()
            dims[slot.dim] = ((*via, *from_rule), (*found, *(axes or ())))
        return dims

    def _all_taken(
        self, slots: list[_Slot], assigned: list[tuple[str, ...] | None], problems: list[str]
    ) -> None:
        """A ruled name left without mesh axes had every rule's axes taken by other
        dimensions of the array: flax linen would replicate it silently, and flax nnx raises
        `DuplicateSpecError`; here it is refused, naming who took them (a name given twice
        is told once, by `_mesh_axes`)."""
        names = [slot.name for slot in slots]
        for slot, axes in zip(slots, assigned, strict=True):
            if axes is not None or names.count(slot.name) > 1:  # Twice: told above.
                continue
            targets = [t for logical, t in self.rules or () if logical == slot.name and t]
            wanted = list(dict.fromkeys(axis for target in targets for axis in target))
            takers = [
                other
                for other, got in zip(slots, assigned, strict=True)
                if other is not slot and got and not set(got).isdisjoint(wanted)
            ]
            by = ", ".join(
                f"{other.name!r}{_stacked_note([other])} on dimension {other.dim}"
                for other in takers
            )
            taken = {axis for got in assigned if got for axis in got}
            free = [axis for axis, _ in self.sizes or () if axis not in taken]
            fallback = (
                f", or add a rule to fall back on ({slot.name!r}, {free[0]!r})" if free else ""
            )
            problems.append(
                f"the logical axis {slot.name!r}{_stacked_note([slot])} on dimension {slot.dim} "
                f"goes to the mesh axis {', '.join(map(repr, wanted))} by its rule"
                f"{'s' if len(targets) > 1 else ''}, which {by} already shards{_TWICE} Map one "
                f"of the names to another mesh axis or None ({slot.name!r}: None){fallback}."
            )

    def _check_mesh(
        self,
        dims: list[tuple[tuple[str, ...], tuple[str, ...]]],
        shape: tuple[int, ...],
        problems: list[str],
    ) -> None:
        """Each mesh axis is in the mesh, used once, and its size divides its dimension."""
        if self.sizes is None:
            return
        sizes = dict(self.sizes)
        used = [(axis, via) for via, axes in dims for axis in axes]
        unknown = [axis for axis in dict.fromkeys(axis for axis, _ in used) if axis not in sizes]
        if unknown:
            rules = sorted({name for axis, via in used if axis in unknown for name in via})
            close = _close(unknown[0], sizes)
            fix = "change the rule" if rules else "give rules that map the name to them"
            problems.append(
                f"shards along {', '.join(map(repr, unknown))}{_via(rules)}, which the mesh does "
                f"not have{close or '.'} {'Otherwise use' if close else 'Use'} its axes "
                f"({', '.join(map(repr, sizes))}), or {fix}."
            )
            return
        axes_used = [axis for axis, _ in used]
        again = sorted({axis for axis in axes_used if axes_used.count(axis) > 1})
        if again:
            rules = sorted({name for axis, via in used if axis in again for name in via})
            problems.append(
                f"shards several dimensions along the mesh axis {', '.join(map(repr, again))}"
                f"{_via(rules)}; a mesh axis may shard one dimension only. Change the declaration"
                " or the rules."
            )
            return
        for dim, (via, axes) in enumerate(dims):
            parts = math.prod(sizes[axis] for axis in axes)
            if shape[dim] % parts:
                problems.append(
                    f"dimension {dim} has size {shape[dim]}, which the mesh axes "
                    f"{' x '.join(f'{axis!r} ({sizes[axis]})' for axis in axes)}{_via(via)} do "
                    f"not divide into {parts} equal parts. Choose a size divisible by {parts}, "
                    "or shard that dimension along other mesh axes (or None)."
                )


def _rank_problem(wanted: Wanted, shape: tuple[int, ...]) -> str | None:
    """What is wrong with the number of axes asked for an array of `shape`, else None."""
    rank = len(shape)
    stacked = tuple(entry for level in wanted.stacked for entry in level.axes)
    by = " and ".join(level.where for level in wanted.stacked)
    stack = f"stack{'s' if len(wanted.stacked) == 1 else ''} it along {_count(len(stacked))}"
    axes = wanted.axes
    if wanted.derived and axes is not None and rank < len(stacked) + len(axes):
        return (  # Short of dimensions where a copy is not: adafactor's factored moments.
            f"has rank {rank}, where {by} {stack} {stacked!r} and it declares "
            f"{_count(len(axes))} {axes!r} more, as for an array of rank "
            f"{len(stacked) + len(axes)} elsewhere in the tree: it is derived from that "
            f"stacked array, not a copy of it. {_DERIVED}"
        )
    if rank < len(stacked) or (stacked and axes is not None and rank == len(axes)):
        own = f" (the {_count(rank)} it declares)" if axes is not None and axes else ""
        return (
            f"has rank {rank}{own}, but {by} {stack} {stacked!r} in front: the array is not "
            "stacked. Stack the layers (jax.vmap over the function that makes one), or remove "
            f"the stacked axes from {by}."
        )
    own_rank = rank - len(stacked)
    if axes is None:
        if len(wanted.default) <= own_rank:
            return None
        after = f"the {own_rank} dimensions after those that {by} stacks, of " if stacked else ""
        return (
            f"the default {show_spec(wanted.default)} has {len(wanted.default)} entries for "
            f"{after}an array of rank {rank}. Give a default with at most one entry per "
            "dimension."
        )
    if len(axes) == own_rank:
        return None
    declared = f"declares {_count(len(axes))} {axes!r}"
    if stacked:
        return (
            f"{declared}, and {by} {stack} {stacked!r} in front: {len(stacked) + len(axes)} in "
            f"all, for an array of rank {rank}. Declare one entry per dimension of one layer "
            f"({own_rank}), or change the stacked axes."
        )
    if own_rank < len(axes) or not wanted.holders:
        fitted = "".join(f", {a!r}" for a in axes[:own_rank])
        example = f", for example Sharded[jax.Array{fitted}]" if own_rank < len(axes) else ""
        return f"{declared} for an array of rank {rank}. {_ONE_PER_DIMENSION_SENTENCE}{example}."
    extra = own_rank - len(axes)
    fixes = " or ".join(
        f"{where} (Sharded[{held}{', None' * extra}])" for where, held in wanted.holders
    )
    return (
        f"{declared} for an array of rank {rank}. If it is one of a stack of layers (made by "
        f"jax.vmap, consumed by lax.scan), declare the {_count(extra)} of the stack on the field "
        f"that holds it: {fixes}, or logical names for None. Otherwise {_ONE_PER_DIMENSION}, "
        f"{rank} in all."
    )


_ONE_PER_DIMENSION = "declare one axis name or None per dimension"
"""The fix for an array with more dimensions than declared axes, ending a sentence."""
_ONE_PER_DIMENSION_SENTENCE = _ONE_PER_DIMENSION[0].upper() + _ONE_PER_DIMENSION[1:]
"""The same fix, starting a sentence."""


def _size_problem(wanted: Wanted, shape: tuple[int, ...]) -> str | None:
    """What is wrong with an array whose sizes along a stack's axes are not the stack's
    (a vector shared by all layers, not one per layer), else None."""
    start = 0
    for level in wanted.stacked:
        end = start + len(level.axes)
        if level.sizes and shape[start:end] != level.sizes:
            return (
                f"has size{'s' if end - start > 1 else ''} {_dims(shape[start:end])} along the "
                f"{_count(end - start)} {level.axes!r} that {level.where} stacks it along, where "
                f"the stack's arrays have {_dims(level.sizes)}: it is not one of the stack's "
                "layers, and lax.scan would refuse it. Move it out of the stacked class (to a "
                f"field of the class that holds the stack), or stack it with the layers "
                "(jax.vmap over the function that makes one)."
            )
        start = end
    return None


def _dims(sizes: tuple[int, ...]) -> str:
    return " x ".join(map(str, sizes))


def _names(entry: AxisEntry) -> tuple[str, ...]:
    return (entry,) if isinstance(entry, str) else entry or ()


def _count(n: int) -> str:
    return f"{n} ax{'is' if n == 1 else 'es'}"


def _stacked_note(slots: Iterable[_Slot]) -> str:
    by = sorted({slot.stacked_by for slot in slots if slot.stacked_by is not None})
    return f" (stacked by {' and '.join(by)})" if by else ""


def _via(rules: Sequence[str]) -> str:
    if not rules:
        return ""
    return f" (the rule{'s' if len(rules) > 1 else ''} for {', '.join(map(repr, rules))})"


def _close(name: str, known: Iterable[str]) -> str:
    """`: did you mean 'hidden'?` for a name close to a known one (difflib), else nothing."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f": did you mean {close[0]!r}?" if close else ""


def dims_of(spec: PartitionSpec, rank: int) -> Dims:
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


def spec_from_dims(dims: Sequence[Sequence[str]]) -> PartitionSpec:
    spec: PartitionSpec = spec_of(*(tuple(d) if len(d) > 1 else d[0] if d else None for d in dims))
    return spec


def show_spec(spec: PartitionSpec) -> str:
    """`P(None, 'model')`, alike on every jax version."""
    return f"P({', '.join(map(repr, spec))})"
