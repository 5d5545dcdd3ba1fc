"""`Frozen[T]` is `T` to checkers, alone and with `Sharded`; `Evolution` on a class; the types
of the training and checkpoint functions."""

# ruff reads the axis names as forward references (it cannot see that Sharded is Annotated).
# ruff: noqa: F821

from typing import Any, assert_type

import jax
from _arrays import ones

import jax_dataclasses as jdc
from jax_dataclasses import Frozen


@jdc.pytree_dataclass
class Tower:
    embed: jdc.Frozen[jax.Array]
    table: Frozen[jdc.Sharded[jax.Array, "vocab", "embed"]]
    head: jdc.Sharded[jdc.Frozen[jax.Array], "embed"]
    maybe: jdc.Frozen[jax.Array | None] = None
    __jdc_evolution__ = jdc.Evolution(added=["maybe"], renamed={"head": "out"}, removed=["old"])


tower = Tower(ones(2, 2), ones(4, 2), ones(2))
assert_type(tower.embed, jax.Array)
assert_type(tower.table, jax.Array)
assert_type(tower.head, jax.Array)
assert_type(tower.maybe, jax.Array | None)

mask: Any = jdc.trainable(tower)
mask = jdc.trainable(tower, freeze=[Tower], unfreeze=".head")
mask = jdc.trainable(tower, freeze=[".table", Tower])
stopped = jdc.stop_frozen_gradients(tower, mask)
assert_type(stopped, Tower)
saved = {"embed": ones(2, 2), "table": ones(4, 2), "out": ones(2)}
layout: Any = jdc.saved_layout(tower, saved)
assert_type(jdc.from_saved_layout(tower, saved), Tower)


def never_called() -> None:
    Tower("not an array", ones(4, 2), ones(2))  # E: mypy[arg-type] pyright[reportArgumentType]
    jdc.trainable(tower, freeze=3)  # E: mypy[arg-type] pyright[reportArgumentType]
    jdc.Evolution(["maybe"])  # E: mypy[call-arg] pyright[reportCallIssue]
