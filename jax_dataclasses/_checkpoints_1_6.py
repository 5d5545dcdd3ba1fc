"""Reading checkpoints that jax_dataclasses 1.6 wrote.

1.6 registered classes without keys, and its pytree left `init=False` fields out, so
checkpoint libraries that save the tree's structure (orbax) stored each pytree dataclass as
the list of its children that `__init__` takes. `v1_6_layout` gives a tree that layout, to
restore into; `from_v1_6_layout` puts what was restored back into the target's classes,
taking static and `init=False` fields from the target. `saved_by_1_6` says which fields 1.6
saved (flax state dicts too): 1.6 read only its own static marks, so a field made static by
another library's metadata (`pytree_node=False`, `static=True`) was one of its children.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from jax.tree_util import GetAttrKey

from jax_dataclasses._annotations import LEGACY_STATIC_MARKER, STATIC_ANNOTATION
from jax_dataclasses._dataclasses import JDC_STATIC_MARKER, get_type_hints_partial
from jax_dataclasses._registry import Layout, layout_of
from jax_dataclasses._tree_api import KeyPath, is_node, keyed_children, keystr, one_level, type_of

T = TypeVar("T")


def v1_6_layout(tree: Any) -> Any:
    """`tree` with every pytree dataclass replaced by the list of the children 1.6 saved.

    Restore a 1.6 checkpoint into this (an orbax `restore(path, v1_6_layout(abstract))`
    keeps the target's shapes, dtypes and shardings), then pass the result to
    `from_v1_6_layout`.

    jax_dataclasses 1.6 registered classes without keys, so its orbax checkpoints store each
    pytree dataclass as the list of the fields its `__init__` takes, leaving out the fields
    1.6 saw as static (`Static[...]`, `static_field()`; not other libraries' metadata) and
    `init=False` fields. Containers and leaves are kept as they are.

    Args:
        tree: A tree of your classes, usually abstract (`jax.ShapeDtypeStruct` leaves).

    Returns:
        The same tree in 1.6's layout.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Joint:
        ...     angle: jax.Array
        ...     limit: jax.Array
        ...     name: jdc.Static[str] = "elbow"
        >>> jdc.v1_6_layout({"arm": Joint(jnp.zeros(2), jnp.ones(2))})
        {'arm': [Array([0., 0.], dtype=float32), Array([1., 1.], dtype=float32)]}
    """
    layout = layout_of(type_of(tree))
    if layout is not None:
        return [v1_6_layout(getattr(tree, name)) for name in saved_by_1_6(layout)]
    return _map_children(tree, v1_6_layout)


def from_v1_6_layout(target: T, restored: Any) -> T:
    """`target` with the values of `restored` (a tree in `v1_6_layout(target)`'s layout).

    Static fields, and `init=False` fields (which 1.6 did not save), keep the target's
    values. Objects are rebuilt without running `__init__`.

    Args:
        target: A tree of your classes, which supplies the structure and static values.
        restored: What was restored into `v1_6_layout(target)`.

    Returns:
        A tree like `target`, holding the restored values.

    Raises:
        ValueError: `restored` does not fit `target`; the message names the class and the key
            path where the saved children do not match.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Joint:
        ...     angle: jax.Array
        ...     name: jdc.Static[str] = "elbow"
        >>> target = Joint(jnp.zeros(2))
        >>> jdc.from_v1_6_layout(target, [jnp.ones(2)])  # as restored from a 1.6 checkpoint
        Joint(angle=f32[2](1.0, 1.0), name='elbow')
    """
    return cast(T, _rebuild(target, restored, ()))


def _rebuild(target: Any, restored: Any, path: KeyPath) -> Any:
    layout = layout_of(type_of(target))
    if layout is None:
        if not is_node(target):
            return restored
        keyed = keyed_children(target)
        _, structure = one_level(target)
        restored_children, _ = one_level(restored)
        if len(keyed) != len(restored_children):
            raise ValueError(
                f"cannot restore the {type_of(target).__qualname__} at key path "
                f"{keystr(path) or '(the root)'} from a 1.6 checkpoint: it has {len(keyed)} "
                f"entries, the checkpoint {len(restored_children)}."
            )
        return structure.unflatten(
            [
                _rebuild(child, saved, path + key)
                for (key, child), saved in zip(keyed, restored_children, strict=True)
            ]
        )
    saved = saved_by_1_6(layout)
    kind = type_of(restored)
    items = list(cast("Sequence[Any]", restored)) if issubclass(kind, list | tuple) else None
    if items is None or len(items) != len(saved):
        got = f"{len(items)} entries" if items is not None else kind.__qualname__
        raise ValueError(
            f"cannot restore {layout.cls.__qualname__} at key path {keystr(path) or '(the root)'}"
            f" from a 1.6 checkpoint: expected a list of its {len(saved)} saved children "
            f"{saved}, got {got}."
        )
    values = dict(zip(saved, items, strict=True))
    new_children = tuple(
        _rebuild(getattr(target, name), values[name], (*path, GetAttrKey(name)))
        if name in values
        else getattr(target, name)
        for name in layout.children
    )
    return layout.unflatten(layout.flatten(target)[1], new_children)


def saved_by_1_6(layout: Layout) -> tuple[str, ...]:
    """The fields 1.6 saved, in field order: those `__init__` takes that 1.6 did not see as
    static. It saw its own field marker (`static_field()`), and `Static[...]` where its reading
    of the annotations found it: `typing.get_type_hints`, or, if that failed for any field,
    `get_type_hints_partial` (module globals only). Neither sees a function's local names, so
    a field annotated with a local alias under the future import was saved as a child."""
    unsaved = {
        name
        for name, mark in zip(layout.statics, layout.marks, strict=True)
        if mark == LEGACY_STATIC_MARKER
    }
    if STATIC_ANNOTATION in layout.marks:
        hints = _hints_as_1_6(layout.cls)
        unsaved.update(
            name
            for name in layout.statics
            if JDC_STATIC_MARKER in getattr(hints.get(name), "__metadata__", ())
        )
    return tuple(f.name for f in dataclasses.fields(layout.cls) if f.init and f.name not in unsaved)


def _hints_as_1_6(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # Any annotation may fail to evaluate; 1.6 then read them partially.
        return get_type_hints_partial(cls, include_extras=True)


def _map_children(tree: Any, function: Callable[[Any], Any]) -> Any:
    if not is_node(tree):
        return tree
    children, structure = one_level(tree)
    return structure.unflatten([function(child) for child in children])
