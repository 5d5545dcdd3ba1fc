"""Constructor checking: arity, argument types, missing arguments, kw_only, init=False."""

import dataclasses
from typing import assert_type

import jax
from _arrays import ones

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Point:
    x: float
    y: float
    n: jdc.Static[int] = 0


@jdc.pytree_dataclass(kw_only=True)
class Options:
    rate: float
    steps: jdc.Static[int] = 10


@jdc.pytree_dataclass
class Mixed:
    x: float
    _: dataclasses.KW_ONLY
    scale: float = 1.0
    tag: jdc.Static[str] = jdc.field(default="", kw_only=False)


@jdc.pytree_dataclass
class Derived:
    x: jax.Array
    double: jax.Array = jdc.field(init=False)
    count: jdc.Static[int] = jdc.field(init=False, default=0)
    factor: dataclasses.InitVar[float] = 2.0

    def __post_init__(self, factor: float) -> None:
        object.__setattr__(self, "double", self.x * factor)


assert_type(Point(1.0, 2.0), Point)
Point(1.0, y=2.0, n=3)
Point(x=1, y=2)  # int is acceptable where float is declared.
Options(rate=0.1, steps=5)
Mixed(1.0, "tag", scale=2.0)
derived = Derived(ones(2), factor=3.0)
assert_type(derived.double, jax.Array)
assert_type(derived.count, int)


def rejected() -> None:
    """Never called: each call is wrong, and both checkers say so."""
    Point(1.0)  # E: mypy[call-arg] pyright[reportCallIssue]
    Point(1.0, 2.0, 3, 4)  # E: mypy[call-arg] pyright[reportCallIssue]
    Point("a", 2.0)  # E: mypy[arg-type] pyright[reportArgumentType]
    Point(1.0, 2.0, n="3")  # E: mypy[arg-type] pyright[reportArgumentType]
    Point(1.0, 2.0, z=3.0)  # E: mypy[call-arg] pyright[reportCallIssue]
    Options(0.1)  # E: mypy[call-arg] pyright[reportCallIssue]
    Options(rate=0.1, steps="many")  # E: mypy[arg-type] pyright[reportArgumentType]
    Mixed(1.0, 2.0)  # E: mypy[arg-type] pyright[reportArgumentType]
    Mixed(1.0, "tag", 2.0)  # E: mypy[call-arg] pyright[reportCallIssue]
    Derived(ones(2), ones(2))  # E: mypy[arg-type] pyright[reportArgumentType]
    Derived(ones(2), double=ones(2))  # E: mypy[call-arg] pyright[reportCallIssue]
    Derived(ones(2), count=1)  # E: mypy[call-arg] pyright[reportCallIssue]
