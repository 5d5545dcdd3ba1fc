"""Checkpoints across class changes: a class's `Evolution`, checked when the class is built, and
followed when a checkpoint written before the change is restored (docs/design/checkpoints.md).

Evolution is declared, never guessed. The class builder reads the declaration once
(`declared_evolution`) and keeps it in the class's record; restoring reads the record. At each
pytree dataclass in a checkpoint, `match` pairs the class's children with the checkpoint's
entries: under its name, else under an earlier name it was `renamed` from; a child `added`
since takes the target's value, or its default where the target is abstract (`added_value`);
an entry `removed` since is dropped; anything else is a difference.
flax restores (`_checkpoints.serialization`) match there; orbax restores go through `saved_layout`, which
turns a target into the layout the checkpoint was saved in (every difference, shapes and dtypes
included, listed in one error before orbax reads anything), and `from_saved_layout`, which
puts what was restored back into the target's classes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar, cast

import jax
from jax.tree_util import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey

from jax_dataclasses._core.record import Layout, layout_of
from jax_dataclasses._field_declarations.evolution import names
from jax_dataclasses._tree_api import (
    KeyPath,
    device_put,
    is_node,
    keyed_level,
    one_device,
    path_text,
    shape_dtype_struct,
    tree_flatten,
    type_of,
)

T = TypeVar("T")

FIX = (
    "declare each change on its class, `__jdc_evolution__ = jdc.Evolution(added=[...], "
    "renamed={new: old}, removed=[...])`, or restore into the classes as they were when the "
    "checkpoint was written"
)
"""The fix every difference between a checkpoint and a target shares."""

# -- one class in a checkpoint -----------------------------------------------------------------


class Match(NamedTuple):
    """How one pytree dataclass's children pair with a checkpoint's entries (`match`)."""

    taken: tuple[tuple[str, str], ...]
    """(field, the entry it is restored from), in field order."""
    defaults: tuple[str, ...]
    """Fields added since, that the checkpoint lacks: each as `added_value` gives it."""
    dropped: tuple[str, ...]
    """Entries of fields removed since."""
    missing: tuple[str, ...]
    unknown: tuple[str, ...]
    ambiguous: tuple[tuple[str, tuple[str, ...]], ...]
    """(field, the entries naming it): under its name and an earlier one, or two earlier ones."""

    def problems(self) -> list[str]:
        """The differences, as phrases: `missing field(s) 'w'`, ..."""
        found: list[str] = []
        if self.missing:
            found.append(f"missing field(s) {names(self.missing)}")
        if self.unknown:
            found.append(f"unknown field(s) {names(self.unknown)}")
        for field, entries in self.ambiguous:
            found.append(f"field {field!r} under several names ({names(entries)})")
        return found


def match(layout: Layout, keys: Collection[str]) -> Match:
    """Pair `layout`'s children with `keys`, a checkpoint's entries for one of its objects,
    following the class's `Evolution`."""
    evolution = layout.evolution
    taken: list[tuple[str, str]] = []
    defaults: list[str] = []
    missing: list[str] = []
    ambiguous: list[tuple[str, tuple[str, ...]]] = []
    for field in layout.children:
        present = tuple(k for k in (field, *evolution.renamed.get(field, ())) if k in keys)
        if len(present) > 1:
            ambiguous.append((field, present))
        elif present:
            taken.append((field, present[0]))
        elif field in evolution.added:
            defaults.append(field)
        else:
            missing.append(field)
    used = {key for _, key in taken} | {key for _, entries in ambiguous for key in entries}
    rest = [key for key in keys if key not in used]
    dropped = tuple(key for key in rest if key in evolution.removed)
    unknown = tuple(key for key in rest if key not in evolution.removed)
    return Match(tuple(taken), tuple(defaults), dropped, tuple(missing), unknown, tuple(ambiguous))


def default_of(cls: type, field: str) -> object:
    """The default of field `field` of `cls` (a new object from its factory, if it has one)."""
    f: dataclasses.Field[Any] = getattr(cls, "__dataclass_fields__")[field]  # noqa: B009
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def added_value(layout: Layout, field: str, target: Any, at: str, no_default: str | None) -> Any:
    """The value of `field` of `layout.cls`, declared added, where a checkpoint lacks it; the
    class is at `at` ("key path .x", or flax's "path './x'") and `target` is the target's
    value of the field.

    What the checkpoint lacks, the target supplies (as it supplies static fields): its value,
    where it holds one; right for the field's copies in an optimizer state too (what `tx.init`
    gave them), which the class default is not. Where the target is abstract or holds no leaf,
    the default, fitted to the target (`_fitted`); refused where `no_default` says why the
    default may be wrong there (`IN_STATE`, `UNKNOWN_HOLDER`).
    """
    leaves = tree_flatten(target)[0]
    abstract = any(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves)
    if leaves and not abstract:
        return target
    cls = layout.cls.__qualname__
    where = f"field {field!r} of {cls} at {at}"
    if abstract and no_default is not None:
        raise ValueError(
            f"cannot restore {where}: it is declared added and the checkpoint lacks it, the "
            f"target is abstract there (jax.ShapeDtypeStruct leaves), and {no_default}. Restore "
            "into a target holding values there (an optimizer's state as `tx.init(model)` "
            "makes it)."
        )
    defaults, structure = tree_flatten(default_of(layout.cls, field))
    if structure != (target_structure := tree_flatten(target)[1]):
        raise ValueError(
            f"cannot give {where} its default (it is declared added and the checkpoint lacks "
            f"it): the default is {structure}, the target {target_structure}. Give the field a "
            "default of the target's structure, or restore into a target holding values there."
        )
    fitted = [_fitted(value, leaf, where) for value, leaf in zip(defaults, leaves, strict=True)]
    return structure.unflatten(fitted)


_COPY = "whose copy of a field holds what the optimizer's init gives it, not the class default"
IN_STATE = f"it is inside an optimizer state (a named tuple, as optax keeps its states), {_COPY}"
UNKNOWN_HOLDER = (
    f"a flax restore does not say whether the class is inside an optimizer state, {_COPY}"
)


def is_state(node: object) -> bool:
    """Whether `node` is a named tuple: how optax keeps states (adam's `mu`, `MultiSteps`'s)."""
    fields: object = getattr(node, "_fields", None)
    return isinstance(node, tuple) and isinstance(fields, tuple)


def _kind_rank(dtype: Any) -> int:
    """Bool < integer < floating < complex (a default casts up only); -1: a PRNG key's."""
    numpy: Any = jax.numpy
    kinds = (numpy.bool_, numpy.integer, numpy.floating, numpy.complexfloating)
    return next((rank for rank, kind in enumerate(kinds) if numpy.issubdtype(dtype, kind)), -1)


def _fitted(value: Any, leaf: Any, where: str) -> Any:
    """An added field's default leaf `value` in the shape (a stacked field stacks it), dtype
    and sharding of the abstract target `leaf`; refused where it neither broadcasts nor casts."""
    shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
        return value
    numpy: Any = jax.numpy
    array: Any = numpy.asarray(value)
    shape = tuple(shape)
    fits = len(array.shape) <= len(shape) and all(
        a in (1, b) for a, b in zip(array.shape[::-1], shape[::-1], strict=False)
    )
    same = dtype_name(array.dtype) == dtype_name(dtype)
    if not fits or not (same or 0 <= _kind_rank(array.dtype) <= _kind_rank(dtype)):
        raise ValueError(
            f"cannot give {where} its default (it is declared added and the checkpoint lacks "
            f"it): the default is {_kind(array)}, the target {_kind(leaf)}, and it neither "
            "broadcasts nor casts to it. Give the field a default that does, or restore into a "
            "target holding values there."
        )
    fitted = numpy.broadcast_to(array if same else array.astype(dtype), shape)
    sharding = getattr(leaf, "sharding", None)
    return fitted if sharding is None else device_put(fitted, sharding)


# -- orbax: the layout a checkpoint was saved in, and back -------------------------------------


def saved_layout(target: Any, saved: Any) -> Any:
    """A restore target for a checkpoint saved before the classes in `target` changed.

    `target` is the tree to restore (usually abstract: `jax.ShapeDtypeStruct` leaves, with the
    shardings to restore to); `saved` is the checkpoint's metadata tree (orbax's
    `checkpointer.metadata(path)`, or its `.item_metadata.tree`). Each pytree dataclass becomes
    a dict keyed as the checkpoint has it, following each class's `jdc.Evolution`: a renamed
    field under its earlier name, a field added since left out, an entry of a removed field
    kept, to be read and dropped (restored onto one local device, as the metadata describes
    it). Restore the checkpoint into the result, then pass what was restored to
    `jdc.from_saved_layout`.

    Args:
        target: The tree to restore, in the classes as they are now.
        saved: The checkpoint's metadata: nested dicts and lists whose leaves have a shape and
            dtype.

    Returns:
        The restore target, in the checkpoint's layout.

    Raises:
        ValueError: the checkpoint differs from the target where no class declares the
            change: one error listing every difference by key path (missing, unknown, an
            array's shape or dtype changed, a subtree where a leaf is expected).

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     kernel: jax.Array
        ...     scale: jax.Array = jnp.ones(())
        ...     __jdc_evolution__ = jdc.Evolution(added=["scale"], renamed={"kernel": "w"})
        >>> abstract = jax.eval_shape(lambda: Dense(jnp.zeros(3)))
        >>> saved = {"w": jax.ShapeDtypeStruct((3,), jnp.float32)}  # as orbax describes it
        >>> jdc.saved_layout(abstract, saved)
        {'w': ShapeDtypeStruct(shape=(3,), dtype=float32)}
    """
    walk = _Walk()
    layout = walk.layout(target, _metadata_tree(saved), ())
    if walk.problems:
        count = len(walk.problems)
        fix = f" that no class declares ({FIX})" if walk.declarable else ""
        raise ValueError(
            f"the checkpoint does not fit the target: {count} difference"
            f"{'s' if count > 1 else ''}{fix}:\n" + "\n".join(walk.problems)
        )
    return layout


def from_saved_layout(target: T, restored: Any) -> T:
    """`target` with the values of `restored`, a tree in `jdc.saved_layout(target, ...)`'s
    layout (what orbax restored into it).

    Each pytree dataclass is rebuilt from its entries, following its `jdc.Evolution`: a field
    added since takes the target's value, or, where the target is abstract, its default in
    the target's shape (a stacked field stacks it), dtype and sharding; an entry of a removed
    field is dropped. Static fields come from the target. No `__init__` runs.

    Args:
        target: The tree that was passed to `saved_layout`.
        restored: What was restored into `saved_layout`'s result.

    Returns:
        A tree like `target`, holding the restored values.

    Raises:
        ValueError: `restored` is not in the layout `saved_layout` gives for `target`; or an
            added field's value cannot be known: the target is abstract inside an optimizer
            state (pass `tx.init(model)` there), or its default does not fit the target.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     kernel: jax.Array
        ...     scale: jax.Array = jnp.ones(())
        ...     __jdc_evolution__ = jdc.Evolution(added=["scale"], renamed={"kernel": "w"})
        >>> jdc.from_saved_layout(Dense(jnp.zeros(2)), {"w": jnp.arange(2.0)})
        Dense(kernel=f32[2](0.0, 1.0), scale=f32[](1.0))
    """
    return cast(T, _restore(target, restored, (), in_state=False))


def _metadata_tree(saved: Any) -> Any:
    """The tree in orbax's checkpoint metadata (`StepMetadata.item_metadata.tree`, by version),
    or `saved` itself."""
    item: Any = getattr(saved, "item_metadata", saved)
    if isinstance(item, Mapping | list | tuple):
        return cast(Any, item)
    return getattr(item, "tree", item)


def entries_of(saved: Any) -> dict[str, Any] | None:
    """A saved node's entries by the names flax and orbax store them under: a dict's by key, a
    named tuple's by field name, a list's or tuple's by index (as strings); None for a leaf."""
    if saved is None:
        return {}
    if isinstance(saved, Mapping):
        return {str(key): value for key, value in cast("Mapping[object, Any]", saved).items()}
    if isinstance(saved, list | tuple):
        items = cast("Sequence[object]", saved)
        fields: object = getattr(items, "_fields", None)
        if isinstance(fields, tuple):  # A named tuple (an optax state).
            keys = [str(name) for name in cast("tuple[object, ...]", fields)]
            return dict(zip(keys, items, strict=True))
        return {str(i): value for i, value in enumerate(items)}
    return None


def _name(key: Any) -> str:
    """The name under which a checkpoint stores the child at `key` (orbax's, flax's)."""
    if isinstance(key, GetAttrKey):
        return str(key.name)
    if isinstance(key, DictKey):
        return str(key.key)
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, FlattenedIndexKey):
        return str(key.key)
    return str(key)


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"an array {jax.numpy.dtype(dtype).name}{list(shape)}"
    if isinstance(value, Mapping):
        return "a dict"
    if isinstance(value, list | tuple):
        return f"a list of {len(cast(Sequence[Any], value))}"
    return f"a {type(value).__qualname__}"


class _Walk:
    """One `saved_layout` call: the differences found, each a line naming its key path."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.declarable = False  # Whether a class could declare one (missing, unknown).

    def problem(self, path: KeyPath, text: str) -> None:
        self.problems.append(f"- {path_text(path)}: {text}")

    def layout(self, target: Any, saved: Any, path: KeyPath) -> Any:
        layout = layout_of(type_of(target))
        entries = entries_of(saved)
        if layout is not None:
            return self.dataclass(layout, target, saved, entries, path)
        if target is None or not is_node(target):
            return self.leaf(target, saved, entries, path)
        children, structure = keyed_level(target)
        if entries is None:
            self.problem(
                path,
                f"the checkpoint holds {_kind(saved)} where the target has a "
                f"{type_of(target).__qualname__}",
            )
            return target
        named = {_name(key): (key, child) for (key, *_), child in children}
        lengths = isinstance(target, list | tuple) and not is_state(cast(object, target))
        if lengths and len(entries) != len(named):
            self.problem(
                path,
                f"a list of {len(entries)} in the checkpoint, of {len(named)} in the target (a "
                "list's length is not a class change that a jdc.Evolution declares: build the "
                "target with the checkpoint's length)",
            )
        new: list[Any] = []
        for name, (key, child) in named.items():
            if name in entries:
                new.append(self.layout(child, entries[name], (*path, key)))
                continue
            if not lengths:
                self.problem((*path, key), "in the target, not in the checkpoint")
            new.append(child)
        if not lengths:
            for name in entries:
                if name not in named:
                    self.problem((*path, _Entry(name)), "in the checkpoint, not in the target")
        return structure.unflatten(new)

    def dataclass(
        self,
        layout: Layout,
        target: Any,
        saved: Any,
        entries: dict[str, Any] | None,
        path: KeyPath,
    ) -> Any:
        cls = layout.cls.__qualname__
        if entries is None or isinstance(saved, list | tuple):
            hint = (
                " (a list: the layout of checkpoints written by jax_dataclasses 1.6; restore it "
                "with jdc.v1_6_layout)"
                if isinstance(saved, list | tuple)
                else ""
            )
            self.problem(
                path, f"the checkpoint holds {_kind(saved)} where the target has a {cls}{hint}"
            )
            return target
        found = match(layout, entries.keys())
        self.declarable = self.declarable or bool(found.missing or found.unknown)
        for field in found.missing:
            fix = "declare it added, with a default, or renamed"
            self.problem(
                (*path, GetAttrKey(field)),
                f"field {field!r} of {cls} is not in the checkpoint ({fix})",
            )
        for key in found.unknown:
            fix = "declare it removed, or the field renamed from it"
            if key in layout.statics:
                fix = f"field {key!r} is static now, so not saved: declare its entry removed"
            self.problem(
                (*path, _Entry(key)),
                f"the checkpoint's entry {key!r} is not a field of {cls} ({fix})",
            )
        for field, keys in found.ambiguous:
            self.problem(
                (*path, GetAttrKey(field)),
                f"field {field!r} of {cls} is in the checkpoint under several names "
                f"({names(keys)})",
            )
        restore = {
            key: self.layout(getattr(target, field), entries[key], (*path, GetAttrKey(field)))
            for field, key in found.taken
        }
        for key in found.dropped:  # Read, to be dropped: as the checkpoint describes it.
            restore[key] = jax.tree.map(_placeholder, entries[key])
        return restore

    def leaf(self, target: Any, saved: Any, entries: dict[str, Any] | None, path: KeyPath) -> Any:
        if target is None:
            if saved is not None and entries != {}:
                self.problem(path, f"the checkpoint holds {_kind(saved)} where the target has None")
            return None
        if entries is not None:
            self.problem(
                path, f"the checkpoint holds {_kind(saved)} where the target has {_kind(target)}"
            )
            return target
        shape, dtype = getattr(target, "shape", None), getattr(target, "dtype", None)
        saved_shape, saved_dtype = getattr(saved, "shape", None), getattr(saved, "dtype", None)
        if shape is not None and saved_shape is not None and tuple(shape) != tuple(saved_shape):
            self.problem(
                path, f"shape {tuple(saved_shape)} in the checkpoint, {tuple(shape)} in the target"
            )
        if dtype_name(dtype) != dtype_name(saved_dtype) and None not in (dtype, saved_dtype):
            self.problem(
                path,
                f"dtype {dtype_name(saved_dtype)} in the checkpoint, "
                f"{dtype_name(dtype)} in the target",
            )
        return target


class _Entry(NamedTuple):
    """A checkpoint's entry that the target has no key for (in messages: `.name`)."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


def dtype_name(dtype: Any) -> str | None:
    if dtype is None:
        return None
    try:
        return str(jax.numpy.dtype(dtype).name)
    except TypeError:  # An extended dtype (a PRNG key's): compared by its text.
        return str(dtype)


def _placeholder(meta: Any) -> Any:
    """A removed field's saved array, read then dropped: its shape and dtype, on one device."""
    device = one_device(jax.local_devices()[0])  # pyright: ignore[reportUnknownMemberType]
    return shape_dtype_struct(tuple(meta.shape), meta.dtype, sharding=device)


def _restore(target: Any, restored: Any, path: KeyPath, in_state: bool) -> Any:
    layout = layout_of(type_of(target))
    entries = entries_of(restored)
    where = path_text(path)
    if layout is not None:
        if entries is None:
            raise ValueError(
                f"cannot rebuild the {layout.cls.__qualname__} at key path {where}: restored holds "
                f"{_kind(restored)} there, not the dict jdc.saved_layout gives it. {_SAME_TARGET}"
            )
        found = match(layout, entries.keys())
        if found.missing or found.unknown or found.ambiguous:
            raise ValueError(
                f"cannot rebuild the {layout.cls.__qualname__} at key path {where}: restored has "
                f"{' and '.join(found.problems())}. {_SAME_TARGET}"
            )
        values = {
            field: _restore(
                getattr(target, field), entries[key], (*path, GetAttrKey(field)), in_state
            )
            for field, key in found.taken
        }
        at, no_default = f"key path {where}", IN_STATE if in_state else None
        for field in found.defaults:
            values[field] = added_value(layout, field, getattr(target, field), at, no_default)
        children = tuple(values[name] for name in layout.children)
        return layout.with_children(target, children)
    if target is None or not is_node(target):  # A leaf: what was restored into it.
        if entries is not None and not (target is None and entries == {}):
            raise ValueError(
                f"cannot rebuild the tree at key path {where}: restored holds "
                f"{_kind(restored)} where the target has {_kind(target)}. {_SAME_TARGET}"
            )
        return restored
    keyed, structure = keyed_level(target)
    wanted = {_name(key): (key, child) for (key, *_), child in keyed}
    if entries is None or entries.keys() != wanted.keys():
        held = _kind(restored) if entries is None else f"the entries {names(list(entries))}"
        raise ValueError(
            f"cannot rebuild the {type_of(target).__qualname__} at key path {where}: restored "
            f"holds {held} where the target has the entries {names(list(wanted))}. "
            f"{_SAME_TARGET}"
        )
    in_state = in_state or is_state(target)
    return structure.unflatten(
        _restore(child, entries[name], (*path, key), in_state)
        for name, (key, child) in wanted.items()
    )


_SAME_TARGET = "Restore into jdc.saved_layout(target, metadata), and pass the same target here."
