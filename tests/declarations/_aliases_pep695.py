"""PEP 695 type aliases of `Static` (Python 3.12+ syntax; imported by test_static_annotations)."""

import jax

import jax_dataclasses as jdc

type StaticInt = jdc.Static[int]
type StaticOf[T] = jdc.Static[T]
type Child = jax.Array
type Nested = StaticInt


@jdc.pytree_dataclass
class Aliased:
    x: Child
    n: StaticInt = 3
    name: StaticOf[str] = "a"
    depth: Nested = 1


@jdc.jit
def scale(x: jax.Array, factor: StaticInt) -> jax.Array:
    return x * factor
