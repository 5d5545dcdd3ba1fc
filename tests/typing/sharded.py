"""`Sharded[T, *axes]` is `T` to checkers, in every spelling; the functions' return types."""

# ruff reads the axis names as forward references (it cannot see that Sharded is Annotated).
# ruff: noqa: F821

from typing import Any, assert_type

import jax
from _arrays import ones, replicated
from jax.sharding import PartitionSpec

import jax_dataclasses as jdc
from jax_dataclasses import Sharded

Weight = jdc.Sharded[jax.Array, "embed", "mlp"]


@jdc.pytree_dataclass
class Dense:
    w: jdc.Sharded[jax.Array, "embed", "mlp"]
    b: Sharded[jax.Array, ("data", "model")]
    aliased: Weight
    maybe: jdc.Sharded[jax.Array | None, None] = None
    scale: float = 1.0


layer = Dense(ones(4, 8), ones(8), ones(4, 8))
assert_type(layer.w, jax.Array)
assert_type(layer.b, jax.Array)
assert_type(layer.aliased, jax.Array)
assert_type(layer.maybe, jax.Array | None)

specs: Any = jdc.partition_specs(layer, {"embed": None, "mlp": "model"})
specs = jdc.partition_specs(layer, [("embed", None), ("mlp", ("data", "model"))])
specs = jdc.partition_specs(layer, default=replicated())


def by_path(path: tuple[Any, ...], leaf: Any) -> PartitionSpec:
    return replicated()


specs = jdc.partition_specs(layer, default=by_path)
jdc.check_shardings(layer, dict.fromkeys(["embed", "mlp", "data", "model"]))
error: ValueError = jdc.ShardingDeclarationError("message")


def never_called() -> None:
    Dense(ones(4, 8), "not an array", ones(4, 8))  # E: mypy[arg-type] pyright[reportArgumentType]
    jdc.partition_specs(layer, {"embed": 3})  # E: mypy[dict-item] pyright[reportArgumentType]
