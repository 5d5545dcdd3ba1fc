"""`jit` and `jit(**options)` on functions keep their parameters and return type."""

from collections.abc import Callable
from typing import assert_type, overload

import jax
from _arrays import ones, zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class State:
    params: jax.Array
    step: jax.Array


@jdc.jit
def scale(x: jax.Array, factor: jdc.Static[float]) -> jax.Array:
    return x * factor


@jdc.jit(donate_argnums=(0,))
def update(state: State, grad: jax.Array, lr: jdc.Static[float] = 0.1) -> State:
    return State(state.params - lr * grad, state.step + 1)


def power(x: jax.Array, *, exponent: jdc.Static[int]) -> jax.Array:
    return x**exponent


fast_power = jdc.jit(power)
donating_power = jdc.jit(power, donate_argnums=0)
by_keyword = jdc.jit(fun=power)  # 1.6's keyword


@overload
def halve(x: jax.Array) -> jax.Array: ...
@overload
def halve(x: float) -> float: ...
def halve(x: jax.Array | float) -> jax.Array | float:
    return x / 2


fast_halve = jdc.jit(halve)  # Every overload kept, as 1.6's typing kept them.

assert_type(scale(ones(2), 2.0), jax.Array)
assert_type(scale(x=ones(2), factor=2.0), jax.Array)
assert_type(update(State(ones(2), zeros()), ones(2)), State)
assert_type(update(State(ones(2), zeros()), ones(2), lr=0.5).step, jax.Array)
assert_type(fast_power(ones(2), exponent=2), jax.Array)
assert_type(donating_power(ones(2), exponent=3), jax.Array)
assert_type(by_keyword(ones(2), exponent=2), jax.Array)
assert_type(fast_halve(ones(2)), jax.Array)
assert_type(fast_halve(2.0), float)


def returns_array() -> str:
    """Never called: the return type is kept, not widened to `Any`."""
    return scale(ones(2), 2.0)  # E: mypy[return-value] pyright[reportReturnType]


def lower_is_not_visible() -> None:
    """Never called. `lower`, `trace` and `eval_shape` exist at run time, but checkers see the
    jitted function as the function itself (see README, "Static typing")."""
    scale.lower(ones(2), 2.0)  # E: mypy[attr-defined] pyright[reportFunctionMemberAccess]


def rejected(state: State) -> None:
    """Never called: arguments are checked against the original signature."""
    scale("a", 2.0)  # E: mypy[arg-type] pyright[reportArgumentType]
    scale(ones(2))  # E: mypy[call-arg] pyright[reportCallIssue]
    scale(ones(2), factor="x")  # E: mypy[arg-type] pyright[reportArgumentType]
    update(ones(2), ones(2))  # E: mypy[arg-type] pyright[reportArgumentType]
    update(state, ones(2), lr="fast")  # E: mypy[arg-type] pyright[reportArgumentType]
    fast_power(ones(2), 2)  # E: mypy[call-arg] pyright[reportCallIssue]
    donating_power(ones(2), exponent=1.5)  # E: mypy[arg-type] pyright[reportArgumentType]


def rejected_options(f: Callable[[jax.Array], jax.Array]) -> None:
    """Never called: `jax.jit`'s keywords are checked too (pyright adds a second code)."""
    jdc.jit(f, donate_argnums="x")  # E: mypy[arg-type] pyright[reportCallIssue, reportArgumentType]
    jdc.jit(f, inline=1.5)  # E: mypy[call-overload] pyright[reportCallIssue, reportArgumentType]
    jdc.jit(f, no_such_option=True)  # E: mypy[call-overload] pyright[reportCallIssue]
