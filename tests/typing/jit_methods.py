"""`jit` on methods, staticmethods and classmethods keeps parameters and return type."""

from typing import Self, assert_type

import jax
from _arrays import ones, zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Linear:
    weight: jax.Array
    name: jdc.Static[str] = "linear"

    @jdc.jit
    def apply(self, x: jax.Array) -> jax.Array:
        return x @ self.weight

    @jdc.jit(donate_argnums=(1,))
    def scaled(self, x: jax.Array, factor: jdc.Static[float] = 1.0) -> jax.Array:
        return factor * (x @ self.weight)

    @jdc.jit
    def shifted(self, delta: jax.Array) -> Self:
        return jdc.replace(self, weight=self.weight + delta)

    @staticmethod
    @jdc.jit
    def combine(a: jax.Array, b: jax.Array) -> jax.Array:
        return a + b

    @jdc.jit
    @staticmethod
    def zeros(shape: jdc.Static[tuple[int, int]]) -> jax.Array:
        return zeros(*shape)

    @jdc.jit
    @classmethod
    def create(cls, shape: jdc.Static[tuple[int, int]]) -> Self:
        return cls(ones(*shape))

    @jdc.jit(inline=True)
    @classmethod
    def from_weight(cls, weight: jax.Array) -> Self:
        return cls(weight * 2)


layer = Linear(ones(2, 3))
x = ones(2)
assert_type(layer.apply(x), jax.Array)
assert_type(layer.scaled(ones(2), factor=2.0), jax.Array)
assert_type(Linear.apply(layer, x), jax.Array)
assert_type(layer.shifted(ones(2, 3)), Linear)
assert_type(Linear.combine(x, x), jax.Array)
assert_type(layer.combine(x, x), jax.Array)
assert_type(Linear.zeros((2, 3)), jax.Array)
assert_type(Linear.create((2, 3)), Linear)
assert_type(Linear.from_weight(ones(2, 3)), Linear)
assert_type(Linear.create((2, 3)).name, str)


def rejected(layer: Linear) -> None:
    """Never called."""
    layer.apply("x")  # E: mypy[arg-type] pyright[reportArgumentType]
    layer.apply(x, x)  # E: mypy[call-arg] pyright[reportCallIssue]
    layer.scaled(x, factor="big")  # E: mypy[arg-type] pyright[reportArgumentType]
    Linear.apply(x)  # E: mypy[call-arg, arg-type] pyright[reportCallIssue]
    Linear.combine(x)  # E: mypy[call-arg] pyright[reportCallIssue]
    Linear.zeros((2, "3"))  # E: mypy[arg-type] pyright[reportArgumentType]
    Linear.create(2)  # E: mypy[arg-type] pyright[reportArgumentType]
    Linear.from_weight(x, x)  # E: mypy[call-arg] pyright[reportCallIssue]


def shifted_is_linear(layer: Linear) -> jax.Array:
    """Never called: the jitted `Self` method returns `Linear`, not `Any`."""
    return layer.shifted(x)  # E: mypy[return-value] pyright[reportReturnType]
