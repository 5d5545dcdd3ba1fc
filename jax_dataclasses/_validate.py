"""Checks that an assignment inside `copy_and_mutate(validate=True)` keeps a field's shape,
and the messages for what the end-of-block walk of the copy (`_copy_and_mutate._check_copy`)
finds changed.

"Shape" here means the field value's tree structure (treedef, static values of nested
dataclasses included), each leaf's shape and each leaf's dtype. Dtypes are compared the way
JAX canonicalises them: 64-bit and 32-bit widths count as equal, and a weakly typed scalar (a
Python scalar, or what one becomes under `jit`) fits a leaf when JAX's type promotion of the
two keeps the leaf's dtype.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NoReturn, cast

import jax.numpy as jnp
import numpy as np
from jax import dtypes

from jax_dataclasses._printing import array_summary
from jax_dataclasses._registry import layout_of
from jax_dataclasses._tree_api import (
    KeyPath,
    Treedef,
    is_node,
    keyed_children,
    keystr,
    one_level,
    tree_flatten,
    tree_flatten_with_path,
    tree_structure,
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


def check_assignment(cls: type, field: str, old: object, new: object) -> None:
    """Raise `MutationValidationError` unless `new` may replace child field `field`'s `old`."""
    if new is old:
        return
    if is_node(old) or is_node(new):
        old_leaves, old_structure = tree_flatten(old)
        new_leaves, new_structure = tree_flatten(new)
        if old_structure != new_structure:
            _raise_structure_error(cls, field, old, new)
    else:  # Two leaves (the common case of replacing one array): no treedefs to build.
        old_leaves, new_leaves = [old], [new]
    for index, (old_leaf, new_leaf) in enumerate(zip(old_leaves, new_leaves, strict=True)):
        what = None if old_leaf is new_leaf else leaf_difference(old_leaf, new_leaf)
        if what is not None:
            path = tree_flatten_with_path(old, None)[0][index][0]
            raise MutationValidationError(
                _message(cls, field, path, what, _describe(old_leaf), _describe(new_leaf))
            )


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


def _raise_structure_error(cls: type, field: str, old: object, new: object) -> None:
    path, old_part, new_part = _first_difference(old, new, ()) or ((), old, new)
    key_path = keystr(tuple(path))
    where = (
        f"at key path {key_path} ({cls.__qualname__}.{field}{key_path})"
        if key_path
        else "of the field's value itself"
    )
    raise MutationValidationError(
        f"copy_and_mutate: assigning to field {field!r} of {cls.__qualname__} changes the "
        f"tree structure {where}: {_what_changed(old_part, new_part)}. "
        + _FIX.format(what="tree structure")
    )


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
            f"{kind.__qualname__} → a different class also named {kind.__qualname__}: the class "
            "was defined again (a notebook cell or module run twice, importlib.reload), and "
            "instances of the old and the new class are different pytree nodes. Build the "
            "value with the class the original tree uses, or rebuild the whole tree"
        )
    if _summary(old) == _summary(new):  # The node's own data differs (a custom node's).
        return _short(f"{_one_level(old)} → {_one_level(new)}")
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


def _first_difference(
    old: object, new: object, path: KeyPath
) -> tuple[KeyPath, object, object] | None:
    """The key path of the outermost node where `old` and `new` differ, and both nodes there."""
    node = _one_level(old)
    if node != _one_level(new):
        return path, old, new
    if node.num_nodes == 1:  # A leaf, or a node without children.
        return None
    for (key, old_child), (_, new_child) in zip(
        keyed_children(old), keyed_children(new), strict=True
    ):
        found = _first_difference(old_child, new_child, path + key)
        if found is not None:
            return found
    return None


def refuse_at_block_end(path: KeyPath, old: object, new: object) -> NoReturn:
    """When a validated block ends: the copy holds `new` at key path `path` where the original
    holds `old`, and their structures differ at their own level (static values aside).
    Raise `MutationValidationError` naming the key path and what changed."""
    raise MutationValidationError(
        f"{_BLOCK_END} tree structure at key path {keystr(path) or '(the root)'}: "
        f"{_what_changed(old, new)}. " + _FIX.format(what="tree structure")
    )


def check_leaf_at_block_end(path: KeyPath, old: object, new: object) -> None:
    """When a validated block ends: leaf `new` of the copy at `path` keeps `old`'s shape and
    dtype, or `MutationValidationError`."""
    what = leaf_difference(old, new)
    if what is not None:
        raise MutationValidationError(
            f"{_BLOCK_END} {what} at key path {keystr(path) or '(the root)'}: old "
            f"{_describe(old)}, new {_describe(new)}. " + _FIX.format(what=what)
        )


_BLOCK_END = (
    "copy_and_mutate: when the block ended, the copy (a list, dict or other container edited "
    "in place, or a value assigned and then changed) had changed the"
)


def _one_level(tree: object) -> Treedef:
    return one_level(tree)[1]


def _message(cls: type, field: str, path: Sequence[Any], what: str, old: str, new: str) -> str:
    key_path = keystr(tuple(path))
    where = (
        f"at key path {key_path} ({cls.__qualname__}.{field}{key_path})"
        if key_path
        else "of the field's value itself"
    )
    return (
        f"copy_and_mutate: assigning to field {field!r} of {cls.__qualname__} changes the "
        f"{what} {where}: old {old}, new {new}. " + _FIX.format(what=what)
    )
