"""Inheritance: a child class adds fields after its parent's, and stays a parent."""

from typing import assert_type

import jax
from _arrays import ones, zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Base:
    x: jax.Array
    n: jdc.Static[int]


@jdc.pytree_dataclass
class Child(Base):
    y: jax.Array


@jdc.pytree_dataclass(kw_only=True)
class Tagged(Base):
    tag: jdc.Static[str] = "base"


def total(base: Base) -> jax.Array:
    return base.x * base.n


child = Child(ones(2), 3, zeros(2))
assert_type(child.x, jax.Array)
assert_type(child.n, int)
assert_type(child.y, jax.Array)
assert_type(total(child), jax.Array)
assert_type(jdc.replace(child, y=ones(2)), Child)
tagged = Tagged(ones(2), 1, tag="t")
assert_type(tagged.tag, str)


def rejected() -> None:
    """Never called."""
    Child(ones(2), 3)  # E: mypy[call-arg] pyright[reportCallIssue]
    Child(ones(2), "3", ones(2))  # E: mypy[arg-type] pyright[reportArgumentType]
    Tagged(ones(2), 1, "t")  # E: mypy[call-arg] pyright[reportCallIssue]
    Base(ones(2), 1, ones(2))  # E: mypy[call-arg] pyright[reportCallIssue]
