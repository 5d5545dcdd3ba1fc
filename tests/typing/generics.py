"""Generic classes (`Generic[T]`): type arguments are inferred, checked and kept by `replace`."""

from typing import Generic, TypeVar, assert_type

import jax
from _arrays import ones, zeros

import jax_dataclasses as jdc

T = TypeVar("T")
K = TypeVar("K")


@jdc.pytree_dataclass
class Box(Generic[T]):
    value: T
    label: jdc.Static[str] = ""


@jdc.pytree_dataclass
class Keyed(Generic[K, T]):
    key: jdc.Static[K]
    value: T


@jdc.pytree_dataclass
class FloatBox(Box[float]):
    unit: jdc.Static[str] = "m"


array_box = Box(zeros(2))
assert_type(array_box, Box[jax.Array])
assert_type(array_box.value, jax.Array)
assert_type(jdc.replace(array_box, value=ones(2)), Box[jax.Array])

int_box = Box[int](1, label="one")
assert_type(int_box.value, int)

keyed = Keyed("weights", ones(3))
assert_type(keyed, Keyed[str, jax.Array])
assert_type(keyed.key, str)

float_box = FloatBox(1.5)
assert_type(float_box.value, float)
assert_type(float_box.unit, str)


def first(box: Box[T]) -> T:
    return box.value


assert_type(first(int_box), int)


def value_is_int(box: Box[int]) -> str:
    """Never called: the type argument is kept, not widened to `Any`."""
    return box.value  # E: mypy[return-value] pyright[reportReturnType]


def rejected() -> None:
    """Never called."""
    Box[int]("a")  # E: mypy[arg-type] pyright[reportArgumentType]
    FloatBox("a")  # E: mypy[arg-type] pyright[reportArgumentType]
