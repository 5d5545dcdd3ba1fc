"""`copy_and_mutate`: edit a structural copy of a pytree in place (docs/design.md §8).

The copy has new dataclass objects and new containers and shares the leaves (and static
values) with the original. Permission to assign to the new dataclass objects is granted through
`_frozen.mutable`, so it lives in a `ContextVar`: it holds only in the current thread or asyncio
task, and only until the block ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterable
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from jax_dataclasses._frozen import mutable, refuse_non_field
from jax_dataclasses._registry import Fill, Flatten, Layout, layout_of
from jax_dataclasses._static_values import check_static_value
from jax_dataclasses._tree_api import flatten_one_level, is_node, tree_structure
from jax_dataclasses._validate import check_assignment

T = TypeVar("T")


@contextmanager
def copy_and_mutate(obj: T, validate: bool = True) -> Generator[T, None, None]:
    """Yield a structural copy of the pytree `obj` in which every pytree dataclass is mutable.

    `obj` is never changed. Inside the block, fields of the copy's dataclasses (at any depth,
    inside lists, tuples, dicts and other pytree nodes) can be assigned; after the block, and
    in every other thread or asyncio task, they are frozen. With `validate=True`, an assignment
    to a child field must keep its tree structure and its leaves' shapes and dtypes
    (`MutationValidationError` otherwise), and a static field's new value must pass the
    static-value checks. With `validate=False`, any value may be assigned.
    """
    copy, created = _structural_copy(obj)
    block = _Block(validate, created)
    try:
        with mutable(dict.fromkeys(map(id, created), block.assign)):
            yield copy
    finally:
        block.close()


class _Block:
    """One `copy_and_mutate` block: performs (and validates) assignments while it is open.

    Closing it matters for contexts that copied the permission while the block was open (an
    asyncio task created inside it): their permission ends with the block too.
    """

    __slots__ = ("objects", "validate")

    def __init__(self, validate: bool, objects: list[object]) -> None:
        self.validate = validate
        self.objects: list[object] | None = objects  # Alive while open: their ids stay unique.

    def close(self) -> None:
        """Refuse from now on, and let go of the copy (a task may outlive the block)."""
        self.objects = None

    def assign(self, obj: object, name: str, value: object) -> None:
        cls = type(obj)
        if self.objects is None:
            raise dataclasses.FrozenInstanceError(
                f"cannot assign to field {name!r} of {cls.__qualname__}: the copy_and_mutate "
                "block that made it mutable has ended. Assign inside the `with` block."
            )
        layout = cast(_Dataclass, _KINDS[cls]).layout  # Only objects of a copy get here.
        if name in layout.children:
            if self.validate:
                check_assignment(cls, name, getattr(obj, name), value)
        elif name in layout.statics:
            if self.validate:
                check_static_value(cls, name, value)
        else:
            refuse_non_field(obj, name)
        object.__setattr__(obj, name, value)


class _Dataclass:
    """How to copy instances of one pytree dataclass: read `(children, statics)`, then fill."""

    __slots__ = ("fill", "layout", "read")

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.read: Flatten = layout.flatten
        self.fill: Fill = layout.fill


_type_of: Callable[[object], type[object]] = type  # `type`, typed for pyright.
_LIST, _TUPLE, _DICT, _OTHER = "list", "tuple", "dict", "other"
_Kind = str | _Dataclass
_KINDS: dict[type, _Kind] = {list: _LIST, tuple: _TUPLE, dict: _DICT}
"""How to copy each node type (whether JAX treats a value as a node depends on its type)."""
_LEAF_TYPES: set[type] = {type(None)}
"""Types the copy keeps as they are: JAX's leaves, and `None` (a node without children).

Verdicts are kept, as JAX keeps registrations: register a custom pytree node type before its
instances first go through `copy_and_mutate`.
"""


def _kind(cls: type) -> _Kind | None:
    """Classify a type seen for the first time: its kind, or None (and remember) for a leaf."""
    layout = layout_of(cls)
    if layout is not None:
        kind: _Kind = _Dataclass(layout)
    elif is_node(cls):
        kind = _OTHER
    else:
        _LEAF_TYPES.add(cls)
        return None
    _KINDS[cls] = kind
    return kind


def _structural_copy(tree: T) -> tuple[T, list[object]]:
    """Copy every pytree node of `tree` (keeping its leaves); also return the new dataclasses.

    Nodes are memoized by id, so shared subtrees stay shared and cycles (made by an earlier
    mutation) are copied as cycles. Dataclasses, lists and dicts are created before their
    children are copied, which is what lets a cycle through them close. Leaves are recognised
    by their type before any call, because they are most of a model.
    """
    objects: dict[int, object] = {}  # id of an original dataclass -> its copy.
    memo: dict[int, Any] = {}  # id of an original container -> its copy.
    keep_alive: list[object] = []  # Children made by a flatten: their ids must stay unique.
    kinds = _KINDS
    leaf_types = _LEAF_TYPES
    new_object = object.__new__
    type_of = _type_of

    def copy(node: Any) -> Any:
        cls = type_of(node)
        if cls in leaf_types:
            return node
        kind = kinds.get(cls) or _kind(cls)
        if kind is None:
            return node
        key = id(node)
        copied: list[object] = []
        if type(kind) is _Dataclass:
            new = new_object(cls)
            done = objects.setdefault(key, new)
            if done is not new:
                return done
            children, statics = kind.read(node)
            for child in children:
                if type_of(child) not in leaf_types:
                    break
            else:  # Only leaves (most nodes of a model): the copy can share the children tuple.
                kind.fill(new, statics, children)
                return new
            for child in children:
                copied.append(child if type_of(child) in leaf_types else copy(child))
            kind.fill(new, statics, tuple(copied))
            return new
        done = memo.get(key)
        if done is not None:
            return done
        if kind is _LIST:
            memo[key] = copied
            for child in node:
                copied.append(child if type_of(child) in leaf_types else copy(child))
            return copied
        if kind is _DICT:
            new_dict: dict[object, object] = {}
            memo[key] = new_dict
            for name, child in node.items():
                new_dict[name] = copy(child)
            return new_dict
        items: Iterable[Any]
        if kind is _TUPLE:
            items = node
        else:  # Any other registered node: one level of JAX's own flatten, then unflatten.
            items = flatten_one_level(node)[0]
            keep_alive.append(items)
        for child in items:
            copied.append(copy(child))
        if kind is _TUPLE:
            result: object = tuple(copied)
        else:
            result = tree_structure(node, lambda child: child is not node).unflatten(copied)
        # A cycle through this node may have copied it already (as in `copy.deepcopy`).
        return memo.setdefault(key, result)

    copied_tree: T = copy(tree)
    return copied_tree, list(objects.values())
