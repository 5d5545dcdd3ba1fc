"""Typed views of the JAX utilities we call (jaxlib ships no type information for them).

One place for the casts, so the modules that use these functions stay strictly typed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol, cast

import jax
from jax import tree_util


class Treedef(Hashable, Protocol):
    """A `PyTreeDef`: the parts of its interface we use."""

    def unflatten(self, leaves: Iterable[Any], /) -> Any: ...


KeyPath = tuple[Any, ...]
IsLeaf = Callable[[object], bool] | None


class _Flatten(Protocol):
    def __call__(self, tree: object, is_leaf: IsLeaf = None, /) -> tuple[list[Any], Treedef]: ...


tree_flatten = cast(
    _Flatten,
    tree_util.tree_flatten,  # pyright: ignore[reportUnknownMemberType]
)
tree_structure = cast(
    "Callable[[object, IsLeaf], Treedef]",
    tree_util.tree_structure,  # pyright: ignore[reportUnknownMemberType]
)
tree_flatten_with_path = cast(
    "Callable[[object, IsLeaf], tuple[list[tuple[KeyPath, Any]], Treedef]]",
    tree_util.tree_flatten_with_path,  # pyright: ignore[reportUnknownMemberType]
)
flatten_one_level = cast(
    "Callable[[object], tuple[Iterable[Any], Any] | None]",
    tree_util.default_registry.flatten_one_level,  # pyright: ignore[reportUnknownMemberType]
)
"""A node's children and aux data, or None for a leaf."""


def is_node(value: object) -> bool:
    """Whether JAX treats `value` as a pytree node rather than a leaf (by its type: every value
    of the type gets the same answer)."""
    return flatten_one_level(value) is not None


keystr = cast(
    "Callable[[KeyPath], str]",
    tree_util.keystr,  # pyright: ignore[reportUnknownMemberType]
)


def path_text(path: KeyPath) -> str:
    """A key path as messages name it: `.layers[0].w`, or `(the root)`."""
    return keystr(path) or "(the root)"


def one_level(tree: object) -> tuple[list[Any], Treedef]:
    """The direct children of a node, and the treedef that rebuilds it from new ones."""
    return tree_flatten(tree, lambda child: child is not tree)


def keyed_level(tree: object) -> tuple[list[tuple[KeyPath, Any]], Treedef]:
    """The direct children of a node with their key paths (one key), and its own level's
    treedef."""
    return tree_flatten_with_path(tree, lambda child: child is not tree)


def keyed_children(tree: object) -> list[tuple[KeyPath, Any]]:
    """The direct children of a node, each with its key path (one key)."""
    return keyed_level(tree)[0]


type_of: Callable[[object], type[object]] = type
"""`type`, typed for pyright (which sees `type(x)` of an `object` as partly unknown)."""

shape_dtype_struct = cast("Callable[..., jax.ShapeDtypeStruct]", jax.ShapeDtypeStruct)
"""`jax.ShapeDtypeStruct(shape, dtype, sharding=..., weak_type=...)`."""
device_put = cast("Callable[[Any, Any], Any]", jax.device_put)  # pyright: ignore[reportUnknownMemberType]
one_device = cast(
    "Callable[[Any], Any]",
    getattr(jax.sharding, "make_single_device_sharding", None) or jax.sharding.SingleDeviceSharding,
)
"""The sharding that places an array on one device (jax 0.12 deprecates the class for the
function)."""
