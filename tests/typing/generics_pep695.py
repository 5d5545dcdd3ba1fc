# requires-python: 3.12
"""Generic classes in Python 3.12 syntax (`class Box[T]`); checked and run on 3.12+ only."""

from typing import assert_type

import jax
from _arrays import ones, zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Box[T]:
    value: T
    label: jdc.Static[str] = ""


@jdc.pytree_dataclass
class Pair[A, B: jax.Array]:
    left: A
    right: B


def first[T](box: Box[T]) -> T:
    return box.value


array_box = Box(zeros(2))
assert_type(array_box, Box[jax.Array])
assert_type(first(array_box), jax.Array)
assert_type(jdc.replace(array_box, label="x"), Box[jax.Array])
assert_type(Box[int](1).value, int)

pair = Pair("left", ones(1))
assert_type(pair, Pair[str, jax.Array])
assert_type(pair.left, str)


def rejected() -> None:
    """Never called."""
    Box[int]("a")  # E: mypy[arg-type] pyright[reportArgumentType]
    Pair(1, "not an array")  # E: mypy[type-var] pyright[reportArgumentType]
