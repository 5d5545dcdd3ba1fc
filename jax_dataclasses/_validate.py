"""`copy_and_mutate`'s validation: one comparison of a value with the one it replaces
(`difference`), and the two messages made from what it finds, for an assignment
(`check_field`) and for what the end-of-block walk of the copy
(`_copy_and_mutate._check_copy`) finds changed (`block_end_error`).

"Shape" here means the value's tree structure (treedef; static values of nested dataclasses
too, except at the end of a block, where they may have been assigned), each leaf's shape and
each leaf's dtype. Dtypes are compared the way JAX canonicalises them: 64-bit and 32-bit widths
count as equal, and a weakly typed scalar (a Python scalar, or what one becomes under `jit`)
fits a leaf when JAX's type promotion of the two keeps the leaf's dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, cast

import jax.numpy as jnp
import numpy as np
from jax import dtypes
from jax.tree_util import SequenceKey

from jax_dataclasses._core.printing import DEFINED_AGAIN, array_summary
from jax_dataclasses._core.record import Layout, layout_of
from jax_dataclasses._core.static_values import check_static_value
from jax_dataclasses._tree_api import (
    KeyPath,
    is_node,
    keyed_level,
    keystr,
    path_text,
    tree_flatten,
    tree_flatten_with_path,
    tree_structure,
    type_of,
)

# JAX canonicalises these to their 32-bit counterparts unless `jax_enable_x64` is set; code
# runs either way, so the two widths count as the same dtype.
_NARROW = MappingProxyType(
    {
        np.dtype(wide): np.dtype(narrow)
        for wide, narrow in (
            ("float64", "float32"),
            ("int64", "int32"),
            ("uint64", "uint32"),
            ("complex128", "complex64"),
        )
    }
)
# The dtype JAX gives a Python scalar, and whether it is weakly typed (bool is not).
PYTHON_SCALARS: Mapping[type, tuple[np.dtype[Any], bool]] = MappingProxyType(
    {
        bool: (np.dtype("bool"), False),
        int: (np.dtype("int32"), True),
        float: (np.dtype("float32"), True),
        complex: (np.dtype("complex64"), True),
    }
)
_FIX = (
    "With validate=True an assignment must keep the field's tree structure and each leaf's "
    "shape and dtype (64- and 32-bit widths count as equal; a Python scalar fits a 0-d array "
    "whose dtype it does not change). Assign a value of the old {what}, or use "
    "jdc.copy_and_mutate(obj, validate=False) to change it on purpose."
)


class MutationValidationError(AssertionError):
    """An assignment inside `copy_and_mutate(obj, validate=True)` would change a field's tree
    structure, or a leaf's shape or dtype.

    An `AssertionError`, because jax_dataclasses 1.6 raised that and existing code catches it.
    The message names the class, the field, the key path inside the field, and the old and
    new structure, shape or dtype. The assignment does not happen.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Joint:
        ...     angle: jax.Array
        >>> with jdc.copy_and_mutate(Joint(jnp.zeros(3))) as joint:
        ...     try:
        ...         joint.angle = jnp.zeros(4)
        ...     except jdc.MutationValidationError as error:
        ...         print(error)
        copy_and_mutate: assigning to field 'angle' of Joint changes the shape ...
    """


class Difference(NamedTuple):
    """Where a new value first differs from the old one, and how."""

    path: KeyPath
    """The key path below the compared values."""
    what: str
    """"tree structure", "shape", "dtype" or "leaf type"."""
    old: object
    """The old value's part at `path`."""
    new: object
    """The new value's part at `path`."""


def check_field(layout: Layout, name: str, value: object, original: object) -> None:
    """Raise unless `value` may be assigned to field `name` of an instance of `layout.cls`: a
    child keeps the tree structure, shapes and dtypes of the field's value in `original` (the
    object the edited one copies), a static value passes the static-value checks."""
    if name not in layout.children:
        check_static_value(layout.cls, name, value)
        return
    found = difference(getattr(original, name), value)
    if found is not None:
        raise MutationValidationError(
            f"copy_and_mutate: assigning to field {name!r} of {layout.cls.__qualname__} changes "
            f"the {found.what} {_within(layout.cls, name, found.path)}: {_detail(found)}. "
            + _FIX.format(what=found.what)
        )


def block_end_error(path: KeyPath, found: Difference) -> MutationValidationError:
    """The error when a validated block ends and the copy holds, at key path `path`, a value
    that differs from the original's (`found`, from `difference(..., statics=False)`)."""
    where = path_text((*path, *found.path))
    return MutationValidationError(
        f"{_BLOCK_END} {found.what} at key path {where}: {_detail(found)}. "
        + _FIX.format(what=found.what)
    )


_BLOCK_END = (
    "copy_and_mutate: when the block ended, the copy (a list, dict or other container edited "
    "in place, or a value assigned and then changed) had changed the"
)


def _within(cls: type, field: str, path: KeyPath) -> str:
    key_path = keystr(path)
    if not key_path:
        return "of the field's value itself"
    return f"at key path {key_path} ({cls.__qualname__}.{field}{key_path})"


def _detail(found: Difference) -> str:
    if found.what == "tree structure":
        return _what_changed(found.old, found.new)
    return f"old {_describe(found.old)}, new {_describe(found.new)}"


def difference(old: object, new: object, statics: bool = True) -> Difference | None:
    """The first way `new` fails to keep `old`'s tree structure (with the static values of
    pytree dataclasses, unless `statics` is False), then a leaf's shape or dtype; None if it
    keeps them. A structure difference comes first, at the outermost node where the two
    differ; a leaf's comes in key path order. Neither value may contain a cycle."""
    if new is old:
        return None
    if not (is_node(old) or is_node(new)):  # Two leaves (one array replacing another).
        what = leaf_difference(old, new)
        return None if what is None else Difference((), what, old, new)
    old_leaves, old_structure = tree_flatten(old)
    new_leaves, new_structure = tree_flatten(new)
    if old_structure != new_structure:
        found = _structure_difference(old, new, statics)
        if found is not None:
            return found
        if statics or len(old_leaves) != len(new_leaves):  # Cannot tell where: the whole.
            return Difference((), "tree structure", old, new)
        # Else only static values differ, which `statics=False` allows.
    for index, (old_leaf, new_leaf) in enumerate(zip(old_leaves, new_leaves, strict=True)):
        what = None if old_leaf is new_leaf else leaf_difference(old_leaf, new_leaf)
        if what is not None:
            path = tree_flatten_with_path(old, None)[0][index][0]
            return Difference(path, what, old_leaf, new_leaf)
    return None


def _structure_difference(old: object, new: object, statics: bool) -> Difference | None:
    """The outermost node (in key path order) where the structures of `old` and `new` differ."""
    stack: list[tuple[KeyPath, object, object]] = [((), old, new)]
    while stack:
        path, old, new = stack.pop()
        if new is old:
            continue
        old_level, new_level = level(old, statics), level(new, statics)
        if old_level is None and new_level is None:
            continue
        if old_level is None or new_level is None or old_level[0] != new_level[0]:
            return Difference(path, "tree structure", old, new)
        for (key, old_child), (_, new_child) in zip(
            reversed(old_level[1]), reversed(new_level[1]), strict=True
        ):
            stack.append(((*path, key), old_child, new_child))
    return None


Level = tuple[tuple[type, object], list[tuple[Any, Any]]]
"""What one level of a node must keep (its class, and its length, a pytree dataclass's static
values where they count, or JAX's treedef of the level) and its keyed children."""


def level(node: object, statics: bool) -> Level | None:
    """The structure and keyed children of `node`'s own level, in JAX's order; None for a
    leaf."""
    cls = type_of(node)
    layout = layout_of(cls)
    if layout is not None:
        pairs, aux = layout.flatten_with_keys(node)
        return (cls, aux if statics else None), list(pairs)
    if cls is list or cls is tuple:
        items = cast("list[Any] | tuple[Any, ...]", node)
        return (cls, len(items)), [(SequenceKey(i), item) for i, item in enumerate(items)]
    if not is_node(node):
        return None
    children, structure = keyed_level(node)  # Any other node (dicts too): JAX's own level.
    return (cls, structure), [(path[0], child) for path, child in children]


def leaf_difference(old_leaf: object, new_leaf: object) -> str | None:
    """What `new_leaf` would change about `old_leaf`: "shape", "dtype", "leaf type" or None."""
    old, new = _leaf_type(old_leaf), _leaf_type(new_leaf)
    if old is None or new is None:
        # Neither array-like (no shape or dtype to keep), or an array against something else.
        return None if old is new else "leaf type"
    if old[0] != new[0]:
        return "shape"
    return None if _same_dtype(old_leaf, old, new_leaf, new) else "dtype"


_LeafType = tuple[tuple[int, ...], Any, bool]
"""A leaf's shape, canonical dtype, and whether it is a weakly typed scalar."""


def _leaf_type(leaf: object) -> _LeafType | None:
    """Shape, canonical dtype and scalar weakness of an array-like leaf, else None.

    Weakness counts only for 0-d values: a Python scalar, or the weakly typed 0-d tracer `jit`
    makes of one, so that validation agrees inside and outside `jit`. A weakly typed array with
    a shape (`jnp.full((3,), 1.0)`) is held to its dtype.
    """
    scalar = PYTHON_SCALARS.get(type(leaf))
    if scalar is not None:
        return (), scalar[0], scalar[1]
    shape = getattr(leaf, "shape", None)
    dtype = getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
        return None
    canonical = _canonical(dtype)
    shape = tuple(shape)
    weak = not shape and bool(getattr(leaf, "weak_type", False))
    return shape, _NARROW.get(canonical, canonical), weak


def _canonical(dtype: object) -> Any:
    """`np.dtype(dtype)`, or `dtype` itself for JAX's extended dtypes (PRNG keys: `key<fry>`),
    which NumPy cannot interpret and which compare by their implementation."""
    if not isinstance(dtype, np.dtype) and jnp.issubdtype(cast(Any, dtype), dtypes.extended):
        return dtype
    return np.dtype(cast(Any, dtype))


def _same_dtype(old_leaf: object, old: _LeafType, new_leaf: object, new: _LeafType) -> bool:
    """Equal canonical dtypes, or a weakly typed side that promotes to the other's dtype.

    A weakly typed new value must fit the old dtype (`1` into float32 is fine, `0.5` into
    int32 is not); a weakly typed old value accepts a strong value its promotion yields.
    """
    if bool(old[1] == new[1]):
        return True
    if new[2]:
        target = old[1]
    elif old[2]:
        target = new[1]
    else:
        return False
    try:
        promoted = np.dtype(dtypes.result_type(old_leaf, new_leaf))
    except (TypeError, ValueError):  # TypePromotionError (strict promotion) is a ValueError.
        return False
    return bool(_NARROW.get(promoted, promoted) == target)


def _describe(leaf: object) -> str:
    """A leaf in the repr's notation (`f32[3]`), or its Python type."""
    if type(leaf) in PYTHON_SCALARS:
        return f"Python {type(leaf).__name__}"
    if getattr(leaf, "shape", None) is None or getattr(leaf, "dtype", None) is None:
        return type(leaf).__qualname__
    weak = " (weakly typed)" if getattr(leaf, "weak_type", False) else ""
    return array_summary(leaf) + weak


def _what_changed(old: object, new: object) -> str:
    """The difference between two nodes whose own level differs, in a few words."""
    kind = type(old)
    if kind is type(new):
        before, after = cast(Any, old), cast(Any, new)
        if issubclass(kind, list | tuple) and len(before) != len(after):
            count, changed = len(before), len(after)
            change = f"{kind.__name__} of {count} → {_items(changed)}"
            low, high = sorted((count, changed))
            common = zip(before, after, strict=False)
            kept = all(tree_structure(a, None) == tree_structure(b, None) for a, b in common)
            if kept:  # Only the end differs: say which positions.
                span = f"[{low}]" if high == low + 1 else f"[{low}:{high}]"
                change += f", {span} {'removed' if changed < count else 'added'}"
            return change
        if issubclass(kind, dict):
            added = sorted(map(repr, set(after) - set(before)))
            removed = sorted(map(repr, set(before) - set(after)))
            changes = [f"keys {', '.join(added)} added"] if added else []
            changes += [f"keys {', '.join(removed)} removed"] if removed else []
            if changes:
                return _short(f"{kind.__name__} " + ", ".join(changes))
        layout = layout_of(type(new))
        for name in layout.statics if layout is not None else ():
            value, replacement = getattr(old, name), getattr(new, name)
            if value is not replacement and value != replacement:
                return _short(
                    f"static field {name!r} of {kind.__qualname__}: {value!r} → {replacement!r}"
                )
    if kind is not type(new) and kind.__qualname__ == type(new).__qualname__:
        return (
            f"{kind.__qualname__} → a different class also named {kind.__qualname__}: "
            f"{DEFINED_AGAIN}. Build the value with the class the original tree uses, or "
            "rebuild the whole tree"
        )
    if _summary(old) == _summary(new):  # The node's own data differs (a custom node's).
        return _short(f"{keyed_level(old)[1]} → {keyed_level(new)[1]}")
    return f"{_summary(old)} → {_summary(new)}"


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _items(count: int) -> str:
    return "1 item" if count == 1 else f"{count} items"


def _summary(node: object) -> str:
    """A node or leaf in a few words: `f32[3]`, `None`, `list of 2 items`, `Linear`."""
    kind = type(node)
    if issubclass(kind, list | tuple | dict):
        return f"{kind.__name__} of {_items(len(cast(Any, node)))}"
    if node is None or not is_node(node):
        return "None" if node is None else _describe(node)
    return kind.__qualname__
