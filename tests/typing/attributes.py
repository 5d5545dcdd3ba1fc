"""Field types as checkers see them: `Static[T]` is `T`, nested classes, defaults, factories."""

from typing import assert_type

import jax
from _arrays import ones, zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Config:
    depth: int
    name: str = "mlp"


@jdc.pytree_dataclass
class Layer:
    weight: jax.Array
    bias: jax.Array | None = None
    size: jdc.Static[int] = 3
    tags: jdc.Static[tuple[str, ...]] = ()
    scale: float = jdc.field(default=1.0, metadata={"static": True})
    history: list[float] = jdc.field(default_factory=list[float])


@jdc.pytree_dataclass
class Model:
    @jdc.pytree_dataclass
    class Head:
        logits: jax.Array

    layers: list[Layer]
    head: Head
    config: jdc.Static[Config]


layer = Layer(zeros(3))
assert_type(layer.weight, jax.Array)
assert_type(layer.bias, jax.Array | None)
assert_type(layer.size, int)
assert_type(layer.tags, tuple[str, ...])
assert_type(layer.scale, float)
assert_type(layer.history, list[float])

model = Model([layer], Model.Head(ones(2)), Config(depth=2))
assert_type(model.layers[0].size, int)
assert_type(model.head, Model.Head)
assert_type(model.head.logits, jax.Array)
assert_type(model.config, Config)
assert_type(model.config.depth, int)


def static_is_not_any(layer: Layer) -> str:
    """Never called: `Static[int]` is `int`, not `Any`, so misuse is reported."""
    return layer.size  # E: mypy[return-value] pyright[reportReturnType]


def static_class_is_not_any(model: Model) -> str:
    """Never called."""
    return model.config.depth  # E: mypy[return-value] pyright[reportReturnType]


def rejected(layer: Layer, model: Model) -> None:
    """Never called."""
    layer.history.append("x")  # E: mypy[arg-type] pyright[reportArgumentType]
    layer.tags = ("a", 1)  # E: mypy[assignment] pyright[reportAttributeAccessIssue]
    model.head = layer  # E: mypy[assignment] pyright[reportAttributeAccessIssue]
