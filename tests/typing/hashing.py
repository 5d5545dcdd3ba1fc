"""Hashing: instances hash by their fields at run time, but checkers see a non-frozen dataclass
with `eq=True`, which is unhashable; `unsafe_hash=True` or `frozen=True` tells them otherwise."""

from typing import assert_type

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Plain:
    n: int


@jdc.pytree_dataclass(unsafe_hash=True)
class Hashed:
    n: int


@jdc.pytree_dataclass(frozen=True)
class Frozen:
    n: int


assert_type(hash(Plain(1)), int)
by_hashed = {Hashed(1): "one"}
by_frozen = {Frozen(1): "one"}
unique = {Hashed(1), Hashed(1)}
plain_set = {Plain(1)}  # E: pyright[reportUnhashable]
plain_keys = {Plain(1): "one"}  # E: pyright[reportUnhashable]


def key_type_is_kept() -> str:
    """Never called."""
    return by_hashed[Frozen(1)]  # E: mypy[index] pyright[reportArgumentType]
