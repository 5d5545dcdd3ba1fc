"""Checkpoints: `flax.serialization` support for every pytree dataclass, without importing
flax, and the layout of checkpoints jax_dataclasses 1.6 wrote (docs/design/checkpoints.md).

Flax finds a type's handlers in its own registry, keyed by exact type, so each class must be
registered there. `import jax_dataclasses` must not import flax, so registration waits until
`flax.serialization` is imported: if it already is, now; otherwise a meta path finder wraps
that one module's loader and registers right after the module has run. From then on each new
class is registered as it is created (`_core.record.on_register`). Without flax nothing happens.

State dicts hold children under their field names; static fields are not stored and are taken
from the target on restore. Restoring rebuilds the object through its pytree unflatten, so
`__init__`/`__post_init__` never see the raw restored values. A restore pairs each class's
children with the state's entries as the class's `Evolution` declares (`_checkpoints.evolution.match`),
and reports every entry that does not fit below the class restored, in one error.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from collections.abc import Callable, Mapping, Sequence, Set
from contextvars import ContextVar
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import jax
import numpy as np
from jax import Array
from jax.tree_util import GetAttrKey

from jax_dataclasses._checkpoints.evolution import (
    IN_STATE,
    UNKNOWN_HOLDER,
    Match,
    added_value,
    dtype_name,
    entries_of,
    is_state,
    match,
)
from jax_dataclasses._core.record import Layout, layout_of, on_register
from jax_dataclasses._field_declarations.evolution import names, saved_children_1_6
from jax_dataclasses._field_declarations.forms import EVOLUTION_ATTR
from jax_dataclasses._tree_api import (
    KeyPath,
    is_node,
    keyed_children,
    one_level,
    path_text,
    type_of,
)

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

FLAX_SERIALIZATION = "flax.serialization"

_ARRAY_LIKE = (Array, np.ndarray, np.generic, bool, int, float, complex)


def _is_array_like(value: object) -> bool:
    """Array-like: a target child that is one must be restored to one (or None)."""
    return isinstance(value, _ARRAY_LIKE)


class _FlaxSerialization(Protocol):
    """The part of the `flax.serialization` module we use."""

    def register_serialization_state(
        self,
        ty: type,
        ty_to_state_dict: Callable[[Any], dict[str, Any]],
        ty_from_state_dict: Callable[[Any, Any], Any],
        override: bool = ...,
    ) -> None: ...

    def is_serializable(self, target: object) -> bool: ...

    def to_state_dict(self, target: object) -> Any: ...

    def from_state_dict(self, target: object, state: Any, name: str = ...) -> Any: ...

    def current_path(self) -> str: ...


_install_lock = threading.Lock()
_register_lock = threading.Lock()
_installed = False


def install_flax_hooks() -> None:
    """Register every pytree dataclass with `flax.serialization` whenever that is imported."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _installed = True
        # Stays installed, so a re-import (or reload) of flax.serialization registers again.
        sys.meta_path.insert(0, _FlaxSerializationFinder())
        if FLAX_SERIALIZATION in sys.modules:
            # import_module waits if another thread is still running the module.
            _activate(importlib.import_module(FLAX_SERIALIZATION))


class _FlaxSerializationFinder:
    """Finds `flax.serialization` with the other finders, then wraps its loader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != FLAX_SERIALIZATION:
            return None
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec: ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = cast(Any, _RegisteringLoader(spec.loader))
                return spec
        return None


class _RegisteringLoader:
    """Runs the real loader, then registers our classes with the freshly run module."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _activate(module)

    def __getattr__(self, name: str) -> Any:
        """Everything else (`get_source`, resource readers) is the real loader's."""
        return getattr(self._loader, name)


def _activate(module: ModuleType) -> None:
    flax = cast(_FlaxSerialization, module)
    on_register(functools.partial(_register, flax))


def _register(flax: _FlaxSerialization, layout: Layout) -> None:
    """Register `layout.cls` with flax; its handlers read the class's layout when called, so
    a class registered again while it is created (adopted, then decorated) stays right."""
    with _register_lock:
        if not flax.is_serializable(layout.cls):
            flax.register_serialization_state(
                layout.cls,
                functools.partial(_to_state_dict, flax),
                functools.partial(_from_state_dict, flax),
            )


def _layout(obj: object) -> Layout:
    """The layout of a registered class: flax calls our handlers for such classes only."""
    return cast(Layout, layout_of(type(obj)))


def _to_state_dict(flax: _FlaxSerialization, obj: object) -> dict[str, Any]:
    return {name: flax.to_state_dict(getattr(obj, name)) for name in _layout(obj).children}


def _expected_keys(layout: Layout) -> str:
    return f"the fields {names(layout.children)}" if layout.children else "no fields (empty)"


def _from_state_dict(flax: _FlaxSerialization, target: object, state: object) -> object:
    """A copy of `target` with its children restored from `state` (as the class's `Evolution`
    pairs them) and its static fields kept. Every problem in the subtree is raised at once."""
    layout = _layout(target)
    where = flax.current_path()
    token = None
    if id(target) not in _CHECKED.get():  # The outermost of our classes: check its subtree.
        walked: set[int] = set()
        problems = _problems(target, state, where, walked)
        if problems:
            if len(problems) == 1:
                raise ValueError(problems[0])
            raise ValueError(
                f"the state dict does not fit the {layout.cls.__qualname__} at path {where!r}: "
                f"{len(problems)} problems:\n" + "\n".join(f"- {problem}" for problem in problems)
            )
        token = _CHECKED.set(walked)
    try:
        return _restored(flax, layout, target, cast(Mapping[str, object], state), where)
    finally:
        if token is not None:
            _CHECKED.reset(token)


_CHECKED: ContextVar[Set[int]] = ContextVar("_CHECKED", default=frozenset())
"""The targets (by `id`) whose state a restore in progress has checked already, with the
subtree of the outermost of our classes it restores: each is checked once, not once more by
each class above it."""


def _restored(
    flax: _FlaxSerialization,
    layout: Layout,
    target: object,
    state: Mapping[str, object],
    where: str,
) -> object:
    """`target` with its children restored from `state`, which fits it."""
    found = _fit(layout, state, where)[0]
    taken = dict(found.taken)
    children: list[object] = []
    for name in layout.children:
        old = getattr(target, name)
        if name in found.defaults:
            children.append(added_value(layout, name, old, f"path {where!r}", UNKNOWN_HOLDER))
            continue
        if name not in taken:  # 1.6 did not save it (`_fit`): the target's value.
            children.append(old)
            continue
        key = taken[name]
        try:
            children.append(flax.from_state_dict(old, state[key], name=key))
        except KeyError as error:  # flax's list and tuple restore index the state directly.
            raise ValueError(
                f"cannot restore field {name!r} of {layout.cls.__qualname__} at path "
                f"{where!r}: its state lacks the entry {error} that the target's structure needs."
            ) from error
    return layout.with_children(target, children)


def _fit(layout: Layout, state: Mapping[str, object], where: str) -> tuple[Match, str | None]:
    """How a state dict's keys pair with the class's children (`_checkpoints.evolution.match`), and what
    does not fit, as one message (None: it fits)."""
    found = match(layout, [str(key) for key in state])
    fields = getattr(layout.cls, "__dataclass_fields__")  # noqa: B009
    from_1_6 = not found.unknown or set(found.unknown) <= set(saved_by_1_6(layout))
    if from_1_6 and all(not fields[name].init for name in found.missing):
        # What 1.6 wrote: no `init=False` field (they keep the target's values), and fields
        # that only other libraries' metadata makes static (static values are the target's).
        found = found._replace(missing=(), unknown=())
    problems = found.problems()
    if not problems:
        return found, None
    cls = layout.cls.__qualname__
    hint = ""
    if any(key in layout.statics for key in found.unknown):
        static = [key for key in found.unknown if key in layout.statics]
        hint = (
            " Static fields are not stored: they are taken from the target. A field that became "
            f"static since declares its entry removed (jdc.Evolution(removed={static!r}))."
        )
    return found, (
        f"the state dict for {cls} at path {where!r} has {' and '.join(problems)}; {cls} "
        f"stores the fields {names(layout.children)}. Restore into a target of the class the "
        f"state was saved from, or declare how {cls} changed ({EVOLUTION_ATTR} = "
        f"jdc.Evolution(...)).{hint}"
    )


def _problems(
    target: object, state: object, where: str, walked: set[int], checked: str | None = None
) -> list[str]:
    """Every problem restoring `target` from `state` would meet, at flax path `where`: in each
    pytree dataclass (missing, unknown and ambiguous fields; a leaf where it is expected, a
    subtree where an array is), through the containers flax restores (dicts, lists, tuples,
    named tuples; a list's length). Like flax, other shapes and dtypes than the target's are
    fine, except in the arrays of a class that declares an `Evolution` (`checked`: its name),
    up to the next class, which decides for itself. Each pytree dataclass checked is added to
    `walked`."""
    layout = layout_of(type_of(target))
    if layout is not None:
        walked.add(id(target))
        cls = layout.cls.__qualname__
        if not isinstance(state, Mapping):
            return [
                f"cannot restore {cls} at path {where!r} from a {type(state).__qualname__}: "
                f"expected a state dict with {_expected_keys(layout)}. The saved tree does not "
                "have the target's structure (a leaf where a dataclass is expected)."
            ]
        state = cast(Mapping[str, object], state)
        found, problem = _fit(layout, state, where)
        problems = [problem] if problem else []
        checked = cls if layout.evolution else None
        for name, key in found.taken:
            child, saved = getattr(target, name), state[key]
            if _is_array_like(child) and not (saved is None or _is_array_like(saved)):
                problems.append(
                    f"cannot restore field {name!r} of {cls} at path {where!r}: the target holds "
                    f"an array but the state holds a {type(saved).__qualname__}. The saved tree "
                    "does not have the target's structure (a subtree where a leaf is expected)."
                )
            else:
                problems += _problems(child, saved, f"{where}/{key}", walked, checked)
        return problems
    if checked is not None and (changed := _array_change(target, state)):
        return [
            f"the array at path {where!r} (in a {checked}, which declares how it changed) has "
            f"{changed}. A jdc.Evolution declares fields added, renamed and removed, not "
            "arrays that changed: restore into a target of the checkpoint's shapes and dtypes, "
            "then convert."
        ]
    items = entries_of(target) if isinstance(target, dict | list | tuple) else None
    if items is None or not isinstance(state, Mapping):
        return []  # A leaf, or a node flax restores in its own way.
    state = cast(Mapping[str, object], state)
    if isinstance(target, list) and len(state) != len(items):
        return [
            f"the list at path {where!r} has {len(items)} entries in the target and "
            f"{len(state)} in the state dict. A list's length is not a class change that a "
            "jdc.Evolution declares: build the target with the state dict's length."
        ]
    return [
        problem
        for key, child in items.items()
        if key in state
        for problem in _problems(child, state[key], f"{where}/{key}", walked, checked)
    ]


def _array_change(target: object, state: object) -> str | None:
    """How a saved array differs from the target's (`shape (4,) in the state dict, (5,) in
    the target`), or None: the same, or not both arrays."""
    shape, dtype = getattr(target, "shape", None), getattr(target, "dtype", None)
    saved_shape, saved_dtype = getattr(state, "shape", None), getattr(state, "dtype", None)
    if shape is None or dtype is None or saved_shape is None or saved_dtype is None:
        return None
    dtype, saved_dtype = _canonical(dtype), _canonical(saved_dtype)
    changes: list[str] = []
    if tuple(shape) != tuple(saved_shape):
        changes.append(
            f"shape {tuple(saved_shape)} in the state dict, {tuple(shape)} in the target"
        )
    if dtype_name(dtype) != dtype_name(saved_dtype):
        changes.append(
            f"dtype {dtype_name(saved_dtype)} in the state dict, {dtype_name(dtype)} in the target"
        )
    return " and ".join(changes) or None


def _canonical(dtype: Any) -> Any:
    """The dtype JAX gives an array of `dtype` (float32 for NumPy's float64 without x64): a
    state dict of NumPy arrays loads as it would on the device."""
    try:
        return jax.dtypes.canonicalize_dtype(dtype)
    except TypeError:  # An extended dtype (a PRNG key's): as it is.
        return dtype


# -- checkpoints written by jax_dataclasses 1.6 --------------------------------------------
# Reading checkpoints that jax_dataclasses 1.6 wrote.
#
# 1.6 registered classes without keys, and its pytree left `init=False` fields out, so
# checkpoint libraries that save the tree's structure (orbax) stored each pytree dataclass as
# the list of its children that `__init__` takes. `v1_6_layout` gives a tree that layout, to
# restore into; `from_v1_6_layout` puts what was restored back into the target's classes,
# taking static and `init=False` fields from the target. `saved_by_1_6` says which fields 1.6
# saved (flax state dicts too): 1.6 read only its own static marks, so a field made static by
# another library's metadata (`pytree_node=False`, `static=True`) was one of its children.

T = TypeVar("T")


def v1_6_layout(tree: Any) -> Any:
    """`tree` with every pytree dataclass replaced by the list of the children 1.6 saved.

    Restore a 1.6 checkpoint into this (an orbax `restore(path, v1_6_layout(abstract))`
    keeps the target's shapes, dtypes and shardings), then pass the result to
    `from_v1_6_layout`.

    jax_dataclasses 1.6 registered classes without keys, so its orbax checkpoints store each
    pytree dataclass as the list of the fields its `__init__` takes, leaving out the fields
    1.6 saw as static (`Static[...]`, `static_field()`; not other libraries' metadata) and
    `init=False` fields. Containers and leaves are kept as they are. A class that declares
    fields added since (`jdc.Evolution`) leaves them out (a renamed field keeps its place);
    one that declares fields removed is refused, since positions do not say where they were.
    Without a declaration only positions are checked (by orbax): a renamed field loads by
    its place, as with 1.6.

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
        return [v1_6_layout(getattr(tree, name)) for name in _positions_1_6(layout)]
    return _map_children(tree, v1_6_layout)


def from_v1_6_layout(target: T, restored: Any) -> T:
    """`target` with the values of `restored` (a tree in `v1_6_layout(target)`'s layout).

    Static fields, and `init=False` fields (which 1.6 did not save), keep the target's
    values; fields declared added since (`jdc.Evolution`) take the target's values too, or
    their defaults where the target is abstract (as `jdc.from_saved_layout`). Objects are
    rebuilt without running `__init__`.

    Args:
        target: A tree of your classes, which supplies the structure and static values.
        restored: What was restored into `v1_6_layout(target)`.

    Returns:
        A tree like `target`, holding the restored values.

    Raises:
        ValueError: `restored` does not fit `target`, or an added field's value cannot be
            known (as `jdc.from_saved_layout`); the message names the class and the key path.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Joint:
        ...     angle: jax.Array
        ...     name: jdc.Static[str] = "elbow"
        >>> target = Joint(jnp.zeros(2))
        >>> jdc.from_v1_6_layout(target, [jnp.ones(2)])  # as restored from a 1.6 checkpoint
        Joint(angle=f32[2](1.0, 1.0), name='elbow')
    """
    return cast(T, _from_1_6(target, restored, (), in_state=False))


def _from_1_6(target: Any, restored: Any, path: KeyPath, in_state: bool) -> Any:
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
                f"{path_text(path)} from a 1.6 checkpoint: it has {len(keyed)} "
                f"entries, the checkpoint {len(restored_children)}."
            )
        in_state = in_state or is_state(target)
        return structure.unflatten(
            [
                _from_1_6(child, saved, path + key, in_state)
                for (key, child), saved in zip(keyed, restored_children, strict=True)
            ]
        )
    saved = _positions_1_6(layout)
    kind = type_of(restored)
    items = list(cast("Sequence[Any]", restored)) if issubclass(kind, list | tuple) else None
    if items is None or len(items) != len(saved):
        got = f"{len(items)} entries" if items is not None else kind.__qualname__
        raise ValueError(
            f"cannot restore {layout.cls.__qualname__} at key path {path_text(path)}"
            f" from a 1.6 checkpoint: expected a list of its {len(saved)} saved children "
            f"{saved}, got {got}."
        )
    values = dict(zip(saved, items, strict=True))
    at, no_default = f"key path {path_text(path)}", IN_STATE if in_state else None
    new_children = tuple(
        _from_1_6(getattr(target, name), values[name], (*path, GetAttrKey(name)), in_state)
        if name in values
        else added_value(layout, name, getattr(target, name), at, no_default)
        if name in layout.evolution.added
        else getattr(target, name)
        for name in layout.children
    )
    return layout.with_children(target, new_children)


def _positions_1_6(layout: Layout) -> tuple[str, ...]:
    """The fields a checkpoint that 1.6 wrote holds for the class, in order: those 1.6 saved,
    less those declared added since (a renamed field keeps its place)."""
    removed = layout.evolution.removed
    if removed:
        cls = layout.cls.__qualname__
        raise ValueError(
            f"cannot restore {cls} from a checkpoint in jax_dataclasses 1.6's layout: {cls} "
            f"declares the field(s) {names(removed)} removed, and that layout stores a class's "
            "fields by position, not by name, so where a removed field was cannot be known. "
            f"Restore it into {cls} as it was (the removed fields back), then save it with this "
            "version, whose checkpoints are keyed by field name."
        )
    saved = tuple(name for name in saved_by_1_6(layout) if name not in layout.evolution.added)
    order = layout.evolution.v1_6_order
    if layout.evolution and order is None and len(saved) > 1:  # One field has one order.
        cls = layout.cls.__qualname__
        raise ValueError(
            f"cannot restore {cls} from a checkpoint in jax_dataclasses 1.6's layout: {cls} "
            "declares how it changed (jdc.Evolution), and that layout stores a class's fields "
            "by position, which cannot show whether they changed order. Declare the order 1.6 "
            "saved them in, by their names now: if it is the order they have now, "
            f"jdc.Evolution(..., v1_6_order={list(saved)!r})."
        )
    return saved if order is None else order


def saved_by_1_6(layout: Layout) -> tuple[str, ...]:
    """The fields 1.6 saved, in field order (`_field_declarations.evolution.saved_children_1_6`)."""
    current = layout_of(layout.cls) or layout
    return saved_children_1_6(layout.cls, current.declarations)


def _map_children(tree: Any, function: Callable[[Any], Any]) -> Any:
    if not is_node(tree):
        return tree
    children, structure = one_level(tree)
    return structure.unflatten([function(child) for child in children])
