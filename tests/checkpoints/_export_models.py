"""Classes registered for `jax.export`, a function over them and its inputs, shared by
`tests/checkpoints/test_export.py` and the fresh process it starts (which imports this module by name, as
a user's loading code imports the module that defines the classes)."""

from __future__ import annotations

import enum
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

import jax_dataclasses as jdc

T = TypeVar("T")


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Access(enum.Flag):
    READ = 1
    WRITE = 2


@jdc.pytree_dataclass
class Dense:
    """One static field (the bare aux data) of the common kinds: a dtype."""

    w: jax.Array
    b: jax.Array
    dtype: jdc.Static[Any] = jnp.float32


@jdc.pytree_dataclass
class Plain:
    """No static fields (aux data None)."""

    x: jax.Array


@jdc.pytree_dataclass
class Box(Generic[T]):
    value: T
    label: jdc.Static[str] = "box"


@jdc.pytree_dataclass
class Model:
    """Several static fields (a tuple of aux data), of every supported kind."""

    layers: tuple[Dense, ...]
    extras: dict[str, Any]
    shape: jdc.Static[tuple[Any, ...]] = (2, (3, 4.0), None, True, "s", ())
    count: jdc.Static[int] = 1
    scale: jdc.Static[float] = 1.0
    flag: jdc.Static[bool] = False
    name: jdc.Static[str | None] = None
    mode: jdc.Static[Mode] = Mode.TRAIN
    level: jdc.Static[Level] = Level.LOW
    numpy_dtype: jdc.Static[Any] = np.dtype("float32")
    numpy_type: jdc.Static[Any] = np.int32
    numpy_kind: jdc.Static[Any] = jnp.floating  # An abstract scalar type: it has no dtype.
    numpy_scalar: jdc.Static[Any] = np.int64(7)


class Big(Model):
    """An undecorated subclass, adopted with Model's fields."""


for _cls in (Dense, Plain, Box, Model, Big):
    jdc.register_export(_cls)


def step(model: Model, x: jax.Array) -> tuple[Model, Box[Plain]]:
    """Returns static values that differ from the inputs', of the same kinds and others."""
    layers = tuple(jdc.replace(layer, w=layer.w * 2, dtype=jnp.bfloat16) for layer in model.layers)
    out = Model(
        layers,
        {"y": x @ model.layers[0].w, "z": (model.extras["z"][0] + 1, None)},
        shape=(model.shape, -0.0, 10**30),
        count=model.count + 1,
        scale=model.scale / 4,
        flag=not model.flag,
        name="stepped",
        mode=Mode.EVAL,
        level=Level.HIGH,
        numpy_dtype=np.dtype("bfloat16"),
        numpy_type=np.float16,
        numpy_kind=np.integer,
        numpy_scalar=np.float32(0.25),
    )
    return out, Box(Plain(x.sum()), label="sum")


def inputs() -> tuple[Model, jax.Array]:
    dense = Dense(jnp.arange(6.0).reshape(2, 3), jnp.zeros(3))
    model = Model((dense, Dense(jnp.ones((3, 3)), jnp.ones(3))), {"z": (jnp.ones(2), None)})
    return model, jnp.array([1.0, 2.0])
