"""jax_dataclasses 1.6's private mutability API, kept because downstream libraries use it.

1.6 stored a `_Mutability` state in each instance's `__mutability__` attribute, and
`_mark_mutable(obj, mutable, visited)` (here `mark_mutable`) set it on `obj` and every dataclass under it, in place
and until marked again. Those libraries import both names from
`jax_dataclasses._copy_and_mutate`, read `obj.__mutability__` to restore the previous state,
and assign fields of marked objects outside any `copy_and_mutate` block. Marked objects are
assigned by `_frozen.frozen_setattr`: `MUTABLE` validates like `copy_and_mutate(obj)` (fields
only); `MUTABLE_NO_VALIDATION` sets anything, as 1.6 did (attributes that are not fields do not
survive JAX transformations). New code uses `copy_and_mutate`.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from jax_dataclasses._tree_api import flatten_one_level

MUTABILITY_ATTR = "__mutability__"


class Mutability(enum.Enum):
    """1.6's `_Mutability`: the state `_mark_mutable` stores in `__mutability__`."""

    FROZEN = enum.auto()
    MUTABLE = enum.auto()
    MUTABLE_NO_VALIDATION = enum.auto()


def mark_mutable(obj: Any, mutable: Mutability, visited: set[int]) -> None:
    """Set the mutability of `obj` and of every dataclass inside it, in place.

    `visited` holds the ids of objects already marked (shared between calls to mark several
    trees once, and what stops cycles).
    """
    if id(obj) in visited:
        return
    visited.add(id(obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if not hasattr(obj, "__dict__"):
            raise TypeError(
                f"cannot mark {type(obj).__qualname__} mutable: 1.6's mutability marks live in "
                "the instance __dict__, which slots=True classes do not have. Use "
                "`with jdc.copy_and_mutate(obj) as copy:` instead."
            )
        object.__setattr__(obj, MUTABILITY_ATTR, mutable)
    flattened = flatten_one_level(obj)
    if flattened is not None:
        for child in flattened[0]:
            mark_mutable(child, mutable, visited)
