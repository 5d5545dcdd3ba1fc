"""`copy_and_mutate`: edit a structural copy of a pytree in place (docs/design/features.md).

The copy has new dataclass objects and new containers, one for each key path, and shares the
leaves (and static values) with the original. Permission to assign to the new dataclass
objects is granted through `_core.frozen.mutable`, so it lives in a `ContextVar`: it holds only in
the current thread or asyncio task, and only until the block ends. The module also exports
1.6's private mutability API under its 1.6 names (`_core.frozen.Mutability`), where downstream
libraries import it from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar, cast

from jax.tree_util import DictKey, SequenceKey

from jax_dataclasses._core.frozen import Mutability as _Mutability
from jax_dataclasses._core.frozen import assign_field, mutable
from jax_dataclasses._core.frozen import mark_mutable as _mark_mutable
from jax_dataclasses._core.record import Flatten, Layout, Unflatten, layout_of
from jax_dataclasses._tree_api import (
    KeyPath,
    is_node,
    keyed_children,
    keyed_level,
    one_level,
    path_text,
    type_of,
)
from jax_dataclasses._validate import block_end_error, difference, leaf_difference, level

T = TypeVar("T")

__all__ = ["_Mutability", "_mark_mutable", "copy_and_mutate"]  # 1.6's names, used downstream


def copy_and_mutate(obj: T, validate: bool = True) -> AbstractContextManager[T]:
    """A `with` block that gives a structural copy of the pytree `obj`, mutable inside the block.

    `obj` is never changed. Inside the block, fields of the copy's pytree dataclasses (at any
    depth, inside lists, tuples, dicts and other pytree nodes) can be assigned; after the
    block, and in other threads (and asyncio tasks not started inside the block), they are
    frozen. With `validate=True`, an assignment to a child field must keep the tree structure
    and the leaves' shapes and dtypes of the field's value when the block began
    (`MutationValidationError` otherwise), a static field's new value must pass the
    static-value checks, and when the block ends, what was put into the copy's lists and
    dicts must keep the structure, shapes and dtypes it replaced. With `validate=False`, any
    value may be assigned.

    The copy is structural: dataclasses and containers are new objects, arrays and static
    values are shared (no array memory is copied). A cycle in `obj` is refused.

    Args:
        obj: Any pytree: a pytree dataclass, or a list, dict, ... holding some.
        validate: Check each assignment (see above).

    Returns:
        A context manager: `with copy_and_mutate(obj) as copy:` gives the copy, of `obj`'s type.

    Raises:
        MutationValidationError: an assignment (or, at the end of the block, a change to a
            list or dict of the copy) changes structure, shape or dtype (`validate=True`).
        ValueError: `obj` contains a cycle (the message names its key path).

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Arm:
        ...     angles: jax.Array
        ...     name: jdc.Static[str] = "arm"
        >>> arms = [Arm(jnp.zeros(2)), Arm(jnp.zeros(2))]
        >>> with jdc.copy_and_mutate(arms) as edited:
        ...     edited[1].angles = jnp.ones(2)
        ...     edited[1].name = "gripper"
        >>> edited[1]
        Arm(angles=f32[2](1.0, 1.0), name='gripper')
        >>> arms[1]
        Arm(angles=f32[2](0.0, 0.0), name='arm')
    """
    return _BlockManager(_open_block(obj, validate), type(obj))


class _BlockManager(AbstractContextManager[T]):
    """What `copy_and_mutate` returns: the block's context manager, which refuses to stand in
    for the copy (`cm = copy_and_mutate(obj); cm.w = ...` would otherwise do nothing)."""

    __slots__ = ("_manager", "_of")
    _manager: AbstractContextManager[T]
    _of: type

    def __init__(self, manager: AbstractContextManager[T], of: type) -> None:
        object.__setattr__(self, "_manager", manager)
        object.__setattr__(self, "_of", of)  # The copied object's class, for the messages.

    def __enter__(self) -> T:
        return self._manager.__enter__()

    def __exit__(self, *exc_info: Any) -> bool | None:
        return self._manager.__exit__(*exc_info)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(_NOT_THE_COPY.format(verb="assign to", name=name, of=self._of))

    def __getattr__(self, name: str) -> Any:  # Only names the manager does not have.
        raise AttributeError(_NOT_THE_COPY.format(verb="read", name=name, of=self._of))


_NOT_THE_COPY = (
    "cannot {verb} {name!r}: jdc.copy_and_mutate(obj) returns a context manager, not the copy "
    "of the {of.__qualname__}. "
    "Write `with jdc.copy_and_mutate(obj) as copy:` and {verb} `copy.{name}` inside the block."
)


@contextmanager
def _open_block(obj: T, validate: bool) -> Generator[T, None, None]:
    """The block behind `copy_and_mutate`: copy, grant permission to assign, revoke on exit."""
    copy, created, sources, containers = _structural_copy(obj)
    block = _Block(validate, created, sources)
    try:
        with mutable(dict.fromkeys(map(id, created), block.assign)):
            yield copy
        if validate:  # The block keeps the copy's nodes alive (their ids unique) until here.
            _check_copy(copy, block, containers)
    finally:
        block.close()


class _Block:
    """One `copy_and_mutate` block: performs (and validates) assignments while it is open.

    Closing it matters for contexts that copied the permission while the block was open (an
    asyncio task created inside it): their permission ends with the block too. Assignments
    are checked against the field's value in the original tree (which nothing in the block
    can change), so that no sequence of assignments, at any depth, drifts from it: a Python
    int into an int32 field, then a float32 array, would otherwise pass.
    """

    __slots__ = ("assigned", "objects", "source_of", "sources", "validate")

    def __init__(self, validate: bool, objects: list[object], sources: list[object]) -> None:
        self.validate = validate
        self.objects: list[object] | None = objects  # Alive while open: their ids stay unique.
        self.sources = sources  # sources[i] is the original that objects[i] copies.
        self.source_of: dict[int, object] | None = None  # Built at the first validated check.
        self.assigned: dict[int, object] = {}  # The objects assigned to (validated), by id.

    def close(self) -> None:
        """Refuse from now on, and let go of the copy (a task may outlive the block)."""
        self.objects = None
        self.sources = []
        self.source_of = None
        self.assigned = {}

    def original_of(self) -> dict[int, object]:
        """The original each of the block's new dataclasses copies, by the new one's id."""
        if self.source_of is None:
            self.source_of = dict(zip(map(id, self.objects or ()), self.sources, strict=True))
        return self.source_of

    def assign(self, obj: object, name: str, value: object) -> None:
        """Assign a field of one of the block's objects, validated against its original."""
        if self.objects is None:
            raise dataclasses.FrozenInstanceError(
                f"cannot assign to field {name!r} of {type(obj).__qualname__}: the copy_and_mutate "
                "block that made it mutable has ended. Assign inside the `with` block."
            )
        if not self.validate:
            assign_field(obj, name, value, False)
            return
        self.assigned[id(obj)] = obj
        assign_field(obj, name, value, True, self.original_of()[id(obj)])


class _Dataclass:
    """How to copy instances of one pytree dataclass: read `(children, aux)`, then rebuild.

    The functions stay right if the class is registered again (while it is created)."""

    __slots__ = ("read", "read_keyed", "rebuild")

    def __init__(self, layout: Layout) -> None:
        self.read: Flatten = layout.flatten
        self.read_keyed: Flatten = layout.flatten_with_keys
        self.rebuild: Unflatten = layout.unflatten


_LIST, _TUPLE, _DICT, _OTHER = "list", "tuple", "dict", "other"
_Kind = str | _Dataclass
_KINDS: dict[type, _Kind] = {list: _LIST, tuple: _TUPLE, dict: _DICT}
"""How to copy each node type (whether JAX treats a value as a node depends on its type)."""
_LEAF_TYPES: set[type] = {type(None)}
"""Types the copy keeps as they are: JAX's leaves, and `None` (a node without children).

Verdicts are kept, as JAX keeps registrations: register a custom pytree node type before its
instances first go through `copy_and_mutate`.
"""


def _kind(node: object) -> _Kind | None:
    """Classify the type of `node`, seen for the first time: its kind, or None (and remember)
    for a leaf."""
    cls = type(node)
    layout = layout_of(cls)
    if layout is not None:
        kind: _Kind = _Dataclass(layout)
    elif is_node(node):
        kind = _OTHER
    else:
        _LEAF_TYPES.add(cls)
        return None
    _KINDS[cls] = kind
    return kind


def _structural_copy(
    tree: T,
) -> tuple[T, list[object], list[object], list[tuple[Any, Any]]]:
    """Copy every pytree node of `tree` (keeping its leaves); also return the new dataclasses
    and, in the same order, the originals they copy, and the other new nodes (lists, dicts,
    tuples, other JAX nodes), each with the original it copies.

    A pytree is a tree: every key path gets its own copy of the nodes on it, even where the
    original shares one object between paths (as `tree_map` and `jax.jit` do), so an
    assignment through one path changes that path only. A node met again on its own path is a
    cycle, which no pytree can have: `ValueError` naming the key path where it closes. Leaves
    are recognised by their type before any call, because they are most of a model.
    """
    created: list[object] = []
    sources: list[object] = []
    containers: list[tuple[Any, Any]] = []
    on_path: set[int] = set()  # ids of the nodes being copied: alive, so ids are unique.
    kinds = _KINDS
    leaf_types = _LEAF_TYPES

    def copy(node: Any) -> Any:
        cls = type_of(node)
        if cls in leaf_types:
            return node
        kind = kinds.get(cls) or _kind(node)
        if kind is None:
            return node
        key = id(node)
        if key in on_path:
            raise _cycle_error(tree, node)
        on_path.add(key)
        result: Any
        if type(kind) is _Dataclass:
            children, aux = kind.read(node)
            for child in children:
                if type_of(child) not in leaf_types:
                    copied: list[Any] = []  # A loop, not a comprehension: one frame per level.
                    for item in children:
                        copied.append(copy(item))
                    children = tuple(copied)
                    break
            # else: only leaves (most nodes of a model), so the copy shares the children tuple.
            result = kind.rebuild(aux, children)
            created.append(result)
            sources.append(node)
        elif kind is _DICT:
            result = {}
            for name, child in node.items():
                result[name] = copy(child)
        else:
            items: Iterable[Any] = node  # A list or tuple; else one level of JAX's flatten.
            structure = None
            if kind is _OTHER:
                items, structure = one_level(node)
            result = []
            for child in items:
                result.append(child if type_of(child) in leaf_types else copy(child))
            if kind is _TUPLE:
                result = tuple(result)
            elif structure is not None:
                result = structure.unflatten(result)
        if type(kind) is not _Dataclass:
            containers.append((result, node))
        on_path.discard(key)
        return result

    copied_tree: T = copy(tree)
    return copied_tree, created, sources, containers


def _check_copy(copy: object, block: _Block, containers: list[tuple[Any, Any]]) -> None:
    """When a validated block ends: what could have changed in the copy still has the
    original's tree structure (static values aside) and leaves' shapes and dtypes. What can
    change without an assignment being checked: the copy's containers (lists, dicts, other
    JAX nodes, edited in place) and the values of assigned fields (a list assigned, then
    appended to). Each item and field value is compared with the original's, unless it is
    that value or the copy of it (checked where it changed itself).

    Linear in the size of the copy: a leaf is compared at once; before anything else is, one
    walk finds the key path of every node of the copy (`_paths`), which also refuses a cycle
    (`ValueError`) before anything recurses and tells what is no longer part of the copy (and
    so passes)."""
    origin = block.original_of()
    origin.update((id(new), old) for new, old in containers)
    paths: dict[int, KeyPath] | None = None
    for node, as_key, changes in _changeable(block, containers):
        for key, item, was in changes:  # `key` is None where the node changed as a whole.
            if key is not None and (
                item is was
                or origin.get(id(item), _NOT_COPIED) is was
                or (_is_uncopied(item) and _is_uncopied(was) and leaf_difference(was, item) is None)
            ):
                continue
            if paths is None:
                paths = _paths(copy)
            if id(node) not in paths:  # No longer part of the copy.
                continue
            found = difference(was, item, statics=False)
            if found is not None:
                below = () if key is None else (as_key(key),)
                raise block_end_error((*paths[id(node)], *below), found)


_NOT_COPIED = object()
"""What `_check_copy` finds for a value the block did not copy (not None: None is a value)."""

_Changes = Iterable[tuple[Any, Any, Any]]
"""(key below a node or None for the node itself, value in the copy, value in the original)."""


def _changeable(
    block: _Block, containers: list[tuple[Any, Any]]
) -> Iterator[tuple[Any, Callable[[Any], Any], _Changes]]:
    """Each node of the copy that may have changed without a check (the assigned dataclasses,
    the containers), how its keys become key path entries, and what to compare: its items,
    or itself where its own level changed (a list's length, a dict's keys, a custom node's
    data). Keys become path entries only for a message."""
    original_of = block.original_of()
    for obj in block.assigned.values():
        read = cast(_Dataclass, _KINDS[type(obj)]).read_keyed
        pairs = zip(read(obj)[0], read(original_of[id(obj)])[0], strict=True)
        yield obj, _key_as_is, ((key, item, was) for (key, item), (_, was) in pairs)
    for new, old in containers:
        kind = type_of(new)
        if kind is tuple:
            continue  # Unchangeable; its items are checked where they changed.
        if kind is list:
            if len(new) == len(old):
                yield (
                    new,
                    SequenceKey,
                    ((i, *pair) for i, pair in enumerate(zip(new, old, strict=True))),
                )
                continue
        elif kind is dict:
            if new.keys() == old.keys():
                yield new, DictKey, ((name, item, old[name]) for name, item in new.items())
                continue
        else:
            children, structure = keyed_level(new)
            old_children, old_structure = keyed_level(old)
            if structure == old_structure:
                pairs = zip(children, old_children, strict=True)
                yield new, _key_as_is, ((path[0], item, was) for (path, item), (_, was) in pairs)
                continue
        yield new, _key_as_is, [(None, new, old)]  # Compared (and explained) as a whole.


def _key_as_is(key: Any) -> Any:
    return key


def _paths(tree: object) -> dict[int, KeyPath]:
    """The key path of every node of `tree`, by id, in one walk; `ValueError` (`_cycle_error`)
    where a node is met again below itself."""
    paths: dict[int, KeyPath] = {}
    on_path: set[int] = set()
    stack: list[tuple[KeyPath, Any] | int] = [((), tree)]
    while stack:
        entry = stack.pop()
        if type(entry) is int:  # Leaving a node.
            on_path.discard(entry)
            continue
        path, node = cast("tuple[KeyPath, Any]", entry)
        node_level = level(node, statics=False)
        if node_level is None:
            continue
        if id(node) in on_path:
            raise _cycle_error(tree, node)
        if id(node) in paths:  # Shared between paths, and walked already.
            continue
        paths[id(node)] = path
        on_path.add(id(node))
        stack.append(id(node))
        stack.extend(
            ((*path, key), child) for key, child in node_level[1] if not _is_uncopied(child)
        )
    return paths


def _is_uncopied(node: object) -> bool:
    """A leaf: what the copy shares with the original instead of copying."""
    return _kind_of(node) is None


def _kind_of(node: object) -> _Kind | None:
    """How `node` is copied (and compared), or None for a leaf."""
    cls = type_of(node)
    if cls in _LEAF_TYPES:
        return None
    return _KINDS.get(cls) or _kind(node)


def _cycle_error(tree: object, node: object) -> ValueError:
    """The error for a tree in which `node` contains itself: name both key paths."""
    inner, outer = _cycle_paths(tree, node, (), []) or ((), ())
    return ValueError(
        f"copy_and_mutate: the tree contains a cycle: the {type(node).__qualname__} at key "
        f"path {path_text(inner)} is the same object as its ancestor at "
        f"{path_text(outer)}. A pytree must be a tree (JAX cannot flatten this "
        "either); inside a copy_and_mutate block, an assignment into a list or dict of the "
        "copy, or any assignment with validate=False, can make one. "
        "Assign a copy (jdc.replace, or a new container) instead of the node itself."
    )


def _cycle_paths(
    tree: object, node: object, path: KeyPath, ancestors: list[tuple[object, KeyPath]]
) -> tuple[KeyPath, KeyPath] | None:
    """The first key path at which `node` appears inside itself, and its ancestor's path."""
    for ancestor, ancestor_path in ancestors:
        if ancestor is tree:
            return (path, ancestor_path) if tree is node else None
    if _kind_of(tree) is None:
        return None
    ancestors.append((tree, path))
    children = keyed_children(tree)
    for key, child in children:
        found = _cycle_paths(child, node, path + key, ancestors)
        if found is not None:
            return found
    ancestors.pop()
    return None
