"""Checks on values stored in static fields (docs/design.md §4).

JAX keeps static values in the treedef and its caches compare them with `__eq__`, so a value
that is an array fails late with an unrelated message, and a mutable or identity-hashed value
makes `jit` return stale results or recompile every call. We catch these at construction.
The verdict is cached per type, so the common case costs one set lookup.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import types

import numpy as np
from jax import Array, core

from jax_dataclasses._annotations import LEGACY_STATIC_MARKER, static_metadata_key
from jax_dataclasses._user_warning import warn_at_user


class StaticFieldWarning(UserWarning):
    """A static field holds a value JAX cannot cache reliably (unhashable or hashed by identity).

    Emitted once per class and field, at construction. An unhashable value (a list, a dict, a
    0-d array) or one hashed by identity (`object()`) makes `jax.jit` return stale results when
    it is mutated, or recompile on every call when a fresh equal value is passed. Turn it into
    an error with `warnings.simplefilter("error", jdc.StaticFieldWarning)`.

    Examples:
        >>> import warnings
        >>> @jdc.pytree_dataclass
        ... class Net:
        ...     sizes: jdc.Static[list[int]]
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     net = Net([2, 3])
        >>> caught[0].category.__name__
        'StaticFieldWarning'
    """


# Types whose instances are immutable and compare and hash by value (or are singletons).
OK_TYPES: set[type] = {
    int,
    float,
    complex,
    bool,
    str,
    bytes,
    type(None),
    type(Ellipsis),
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    np.dtype,
}
_CONTAINERS = (tuple, frozenset)
_warned: set[tuple[type, str]] = set()
_warned_lock = threading.Lock()


def _is_identity_hashed(value: object) -> bool:
    """Hash inherited from `object` (identity) on a value that is not a natural singleton."""
    kind = type(value)
    return (
        kind.__hash__ is object.__hash__
        and not isinstance(value, type | enum.Enum | types.ModuleType)
        and not callable(value)
    )


def _problem(value: object) -> str | None:
    """Return 'array', a warning text, or None if `value` is a good static value."""
    kind = type(value)
    if kind in OK_TYPES:
        return None
    if isinstance(value, Array | np.ndarray):
        if value.ndim == 0 and not isinstance(value, core.Tracer):
            # Unhashable, but `==` gives one bool, so jit's cache can compare it by value.
            return f"its value is a 0-d array ({kind.__name__}), which is not hashable"
        return "array"
    if isinstance(value, _CONTAINERS):
        # pyright sees items of unknown type; any item is fine (no cast: this runs per instance).
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            found = _problem(item)  # pyright: ignore[reportUnknownArgumentType]
            if found is not None:
                return found
        return None
    try:
        hash(value)
    except TypeError:
        return f"its value of type {kind.__qualname__} is not hashable"
    if _is_identity_hashed(value):
        return (
            f"its value of type {kind.__qualname__} hashes by identity, so every new "
            "(even equal) object makes jax.jit recompile"
        )
    if isinstance(value, enum.Enum | np.generic):
        OK_TYPES.add(kind)  # Hashability of these does not depend on the instance.
    return None


def _unmark(cls: type, field: str) -> str:
    """How to make `field` a child: undo whatever made it static."""
    specs: dict[str, dataclasses.Field[object]] = getattr(cls, "__dataclass_fields__", {})
    key = static_metadata_key(specs[field].metadata) if field in specs else None
    if key == LEGACY_STATIC_MARKER:
        return f"stop using jdc.static_field(), or remove {key!r} from its field metadata"
    if key is not None:
        return f"remove {key}={specs[field].metadata[key]!r} from its field metadata"
    return "remove Static[...] from its annotation"


def check_static_value(cls: type, field: str, value: object) -> None:
    """Reject arrays in static fields; warn once per class and field about uncacheable values."""
    problem = _problem(value)
    if problem is None:
        return
    where = f"static field {field!r} of {cls.__qualname__}"
    if problem == "array":
        raise TypeError(
            f"{where} holds an array ({type(value).__name__}) with a shape or a traced value, "
            "which jax.jit cannot compare. Static values are part of the tree structure and "
            f"must be hashable Python values. Make the field a child ({_unmark(cls, field)}), "
            "or store a hashable description such as a tuple, a Python number or the shape."
        )
    key = (cls, field)
    if key in _warned:
        return
    warn_at_user(
        f"{where}: {problem}. Static values are compared by jax.jit's cache; use an immutable, "
        "hashable value (a tuple, a frozen dataclass, a string, a number).",
        StaticFieldWarning,
    )
    with _warned_lock:
        _warned.add(key)
