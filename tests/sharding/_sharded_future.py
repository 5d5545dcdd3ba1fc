# ruff reads the axis names in `Sharded[T, "embed"]` as forward references (it cannot see that
# Sharded is Annotated to checkers), as it does for jaxtyping's shapes: F821, and under the
# future import UP037, are false here.
# ruff: noqa: F821, UP037
"""Classes declaring shardings under `from __future__ import annotations` (every annotation a
string), for `tests/sharding/test_sharding_declarations.py`: an alias defined after the class, a string
inside a string, a name that exists only for type checkers, and a local alias."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import jax

import jax_dataclasses as jdc
from jax_dataclasses import Sharded as Sh

if TYPE_CHECKING:
    from numpy.typing import NDArray as CheckerOnly


@jdc.pytree_dataclass
class Future:
    w: jdc.Sharded[jax.Array, "embed", "mlp"]
    later: Later
    quoted: "jdc.Sharded[jax.Array, None, 'mlp']"
    renamed: Sh[jax.Array, "mlp"]
    documented: Annotated[jdc.Sharded[jax.Array, "mlp"], "a note"]
    checker_only: jdc.Sharded[CheckerOnly[Any], "embed"]
    plain: jax.Array
    size: jdc.Static[int] = 2


Later = jdc.Sharded[jax.Array, ("embed", "mlp")]


@jdc.pytree_dataclass
class NamedLikeStatic:
    """Axis names are not types: one spelled like `jdc.Static` (a module-level name here) is
    not a nested `Static`."""

    w: jdc.Sharded[jax.Array, "jdc.Static"]


def local_class(while_running: Callable[[type], None]) -> type:
    """A class in a function whose alias is local: `while_running(cls)` is called while the
    function runs (its local names can be read), and the class is returned."""
    Local = jdc.Sharded[jax.Array, "mlp"]

    @jdc.pytree_dataclass
    class Inner:
        v: Local

    while_running(Inner)
    return Inner
