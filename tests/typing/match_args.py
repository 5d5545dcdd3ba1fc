"""`match` statements: class patterns use `__match_args__` (field order), or keywords."""

from typing import Literal, assert_type

import jax
from _arrays import zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Circle:
    center: jax.Array
    radius: jdc.Static[float]


@jdc.pytree_dataclass(match_args=False)
class Square:
    side: float


def describe(shape: Circle | Square) -> str:
    match shape:
        case Circle(center, radius):
            assert_type(center, jax.Array)
            assert_type(radius, float)
            return f"circle of radius {radius}"
        case Square(side=side):
            assert_type(side, float)
            return f"square of side {side}"


assert_type(Circle.__match_args__, tuple[Literal["center"], Literal["radius"]])
describe(Circle(zeros(2), 1.0))
describe(Square(2.0))


def rejected(shape: Circle | Square) -> None:
    """Never called."""
    match shape:
        case Circle(_, 1.0, 2.0):  # E: mypy[misc] pyright[reportGeneralTypeIssues]
            pass
        case Square(2.0):  # E: mypy[misc] pyright[reportGeneralTypeIssues]
            pass
        case _:
            pass
