"""`Sharded[T, *axes]` is `T` to checkers, in every spelling; the functions' signatures (the
tree, the rules, the mesh as a keyword; `shardings(tree, mesh, rules)` as before) and return
types."""

# ruff reads the axis names as forward references (it cannot see that Sharded is Annotated).
# ruff: noqa: F821

from typing import Any, assert_type

import jax
from _arrays import one_device_mesh, ones, replicated
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

mesh = one_device_mesh()
rules = {"embed": None, "mlp": "model"}
loaded_rules: list[list[Any]] = [["embed", None], ["mlp", ["data", "model"]]]  # as JSON loads
shardings: Any = jdc.shardings(layer, rules, mesh=mesh)
shardings = jdc.shardings(layer, mesh, rules)
shardings = jdc.shardings(layer, mesh, rules=rules)  # the order of earlier versions
shardings = jdc.shardings(layer, mesh=mesh, rules=rules)
shardings = jdc.sharded_shapes(layer, loaded_rules, mesh=mesh)
shardings = jdc.sharded_shapes(layer, mesh, rules)
with jdc.sharding_rules(rules):
    assert_type(jdc.constrain_shardings(layer, mesh=mesh), Dense)
    assert_type(jdc.with_logical_constraint(layer.w, ("embed", None), mesh=mesh), jax.Array)


def never_called() -> None:
    Dense(ones(4, 8), "not an array", ones(4, 8))  # E: mypy[arg-type] pyright[reportArgumentType]
    jdc.partition_specs(layer, {"embed": 3})  # E: mypy[dict-item] pyright[reportArgumentType]
    jdc.shardings(layer, rules, mesh, mesh=mesh)  # E: mypy[call-overload] pyright[reportCallIssue]
