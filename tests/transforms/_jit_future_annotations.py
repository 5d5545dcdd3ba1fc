"""`jdc.jit` in a module with `from __future__ import annotations` (for tests/transforms/test_jit.py).

Every annotation here is a string; `Config` is defined after the function that uses it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVarTuple

import jax
import jax.numpy as jnp

import jax_dataclasses as jdc
from jax_dataclasses import Static as S

traces: list[str] = []
Ts = TypeVarTuple("Ts")


@jdc.jit
def scaled(x: jax.Array, config: jdc.Static[Config]) -> jax.Array:
    traces.append("scaled")
    return x * config.scale


@dataclasses.dataclass(frozen=True)
class Config:
    scale: float


@jdc.jit
def zeros(n: S[int], /, dtype: S[str] = "float32") -> jax.Array:
    traces.append("zeros")
    return jnp.zeros(n, dtype)


@jdc.jit
def pack(*args: *Ts) -> tuple[*Ts]:
    return args


class Batched(Generic[*Ts]):
    @jdc.jit
    @staticmethod
    def scale_all(*args: *Ts, by: jdc.Static[int] = 1) -> tuple[*Ts]:
        traces.append("scale_all")
        return tuple(arg * by for arg in args)  # type: ignore[return-value]


@jdc.pytree_dataclass
class Model:
    weight: jax.Array
    config: jdc.Static[Config]

    @jdc.jit
    def apply(self, x: jax.Array, power: jdc.Static[int]) -> jax.Array:
        traces.append("apply")
        return (self.weight * x * self.config.scale) ** power

    @jdc.jit
    @classmethod
    def create(cls, shape: jdc.Static[tuple[int, ...]], config: jdc.Static[Config]) -> Model:
        traces.append("create")
        return cls(jnp.ones(shape), config)


def local_alias() -> Callable[[jax.Array, int], jax.Array]:
    """A function whose Static alias exists only in this function's scope."""
    Local = jdc.Static

    @jdc.jit
    def repeat(x: jax.Array, times: Local[int]) -> jax.Array:
        return jnp.tile(x, times)

    return repeat


def jit_callable_object_in_a_function() -> Any:
    """A callable object built in a function: its `__call__`'s module is where names resolve."""

    class Step:
        def __call__(self, x: jax.Array, n: jdc.Static[int]) -> jax.Array:
            return x * n if n > 1 else x

    return jdc.jit(Step())
