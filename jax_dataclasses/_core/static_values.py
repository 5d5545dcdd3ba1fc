"""Checks on values stored in static fields (docs/design/core.md).

JAX keeps static values in the treedef and its caches compare them with `__eq__`, so an array
fails late with an unrelated message, and a mutable or identity-hashed value makes `jit` return
stale results or recompile every call. We catch these at construction: a traced array (no value
to compare) is refused; the others warn, since 1.6 accepted them and code relies on that (the
same array object compares equal to itself). The verdict is cached per type, so the common
case costs one set lookup. The warnings point at the user's line (`warn_at_user`) and come
once per class and field (`warn_once`), as the package's other warnings do.
"""

from __future__ import annotations

import enum
import os
import sys
import threading
import types
import warnings
from typing import cast

import numpy as np
from jax import Array, core

from jax_dataclasses._core.codegen import FILENAME_PREFIX
from jax_dataclasses._core.record import Layout, layout_of
from jax_dataclasses._field_declarations.forms import Mark


class StaticFieldWarning(UserWarning):
    """A static field holds a value JAX cannot cache reliably (unhashable or hashed by identity).

    Emitted once per class and field, at construction. An unhashable value (a list, a dict, an
    array) or one hashed by identity (`object()`) makes `jax.jit` return stale results when
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


def _ok_types() -> set[type]:  # pyright: ignore[reportUnusedFunction]  # Pickles call it.
    """`OK_TYPES`: what classes cloudpickled by value by 42fa477 call for it (their
    `__init__` held it as a set that pickled as this call)."""
    return OK_TYPES


# Types whose instances are immutable and compare and hash by value (or are singletons).
# A plain set (`in` on a subclass of `set` costs 12 ns more, 3% of a construction); the
# generated `__init__` reads it through this module, which cloudpickle pickles by reference, so
# the types a process has learned never travel with a class copied by value.
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


def _is_identity_hashed(value: object) -> bool:
    """Hash inherited from `object` (identity) on a value that is not a natural singleton."""
    kind = type(value)
    return (
        kind.__hash__ is object.__hash__
        and not isinstance(value, type | enum.Enum | types.ModuleType)
        and not callable(value)
    )


def value_problem(value: object) -> str | None:
    """Return 'array', a warning text, or None if `value` is a good static value."""
    kind = type(value)
    if kind in OK_TYPES:
        return None
    if isinstance(value, Array | np.ndarray):
        if isinstance(value, core.Tracer):
            return "array"
        if value.ndim == 0:
            # Unhashable, but `==` gives one bool, so jit's cache can compare it by value.
            return f"its value is a 0-d array ({kind.__name__}), which is not hashable"
        # 1.6 accepted these, and code relies on it: warn, as for other uncacheable values.
        shape = cast("tuple[int, ...]", value.shape)  # pyright: ignore[reportUnknownMemberType]  # NumPy's stub
        return (
            f"its value is an array ({kind.__name__} of shape {shape}), which is not "
            "hashable; JAX compares static values with `==` when two tree structures meet "
            "(jax.jit given an equal copy of it, tree_map over two trees), and for an array "
            "that comparison raises an error. Store a tuple (tuple(array.tolist())) or make "
            "the field a child"
        )
    if isinstance(value, _CONTAINERS):
        # pyright sees items of unknown type; any item is fine (no cast: this runs per instance).
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            found = value_problem(item)  # pyright: ignore[reportUnknownArgumentType]
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
    layout = cast(Layout, layout_of(cls))  # Only registered classes check static values.
    mark = layout.marks[layout.statics.index(field)]
    if mark is Mark.ANNOTATION:
        return "remove Static[...] from its annotation"
    if mark is Mark.STATIC_FIELD:
        return f"stop using jdc.static_field(), or remove {mark.value!r} from its field metadata"
    value = getattr(cls, "__dataclass_fields__")[field].metadata[mark.value]  # noqa: B009
    return f"remove {mark.value}={value!r} from its field metadata"


def check_static_value(cls: type, field: str, value: object) -> None:
    """Reject traced arrays in static fields; warn once per class and field about values JAX
    cannot cache reliably (unhashable ones, concrete arrays among them)."""
    problem = value_problem(value)
    if problem is None:
        return
    where = f"static field {field!r} of {cls.__qualname__}"
    if problem == "array":
        raise TypeError(
            f"{where} holds a traced array ({type(value).__name__}), which has no value to "
            "compare: it was computed inside a transformation (jax.jit, jax.grad, jax.vmap). "
            "Static values are part of the tree structure and must be hashable Python values. "
            f"Make the field a child ({_unmark(cls, field)}), "
            "or store a hashable description such as a tuple, a Python number or the shape."
        )
    warn_once(
        cls,
        field,
        f"{where}: {problem}. Static values are compared by jax.jit's cache; use an immutable, "
        "hashable value (a tuple, a frozen dataclass, a string, a number).",
        StaticFieldWarning,
    )


# -- warnings that point at the user's line ------------------------------------------------
# Warnings that point at the user's line, not at ours.
#
# Our warnings are raised from generated code (`__init__`, finish) or through several of our
# frames (decoration, `__init_subclass__`), so a fixed `stacklevel` would often name a line of
# this package, where the user cannot act on it and `warnings` filters by module cannot match.

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # Not _core/.


def _ours(filename: str) -> bool:
    return filename.startswith((_PACKAGE_DIR, FILENAME_PREFIX))


def warn_at_user(message: str, category: type[Warning]) -> None:
    """`warnings.warn(message, category)` attributed to the first frame outside this package."""
    frame = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]  # Our caller.
    level = 1
    while frame.f_back is not None and _ours(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)


_warned: set[tuple[type, str, type[Warning]]] = set()
_warned_lock = threading.Lock()


def warn_once(cls: type, field: str, message: str, category: type[Warning]) -> None:
    """`warn_at_user`, once per class, field and category in this process: a warning about a
    class's declaration would otherwise repeat at every construction."""
    key = (cls, field, category)
    if key in _warned:
        return
    warn_at_user(message, category)
    with _warned_lock:
        _warned.add(key)
