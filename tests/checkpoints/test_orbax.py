"""Orbax checkpoints of pytree dataclasses: a save/restore round trip keyed by field names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import Layer

import jax_dataclasses as jdc

ocp = pytest.importorskip("orbax.checkpoint")


@jdc.pytree_dataclass
class Model:
    encoder: Layer
    heads: list[Layer]
    scale: Any = None
    name: jdc.Static[str] = "model"


def test_standard_checkpointer_round_trip_keyed_by_field_names(tmp_path: Path) -> None:
    model = Model(
        encoder=Layer(jnp.arange(6.0).reshape(2, 3), jnp.ones(3)),
        heads=[Layer(jnp.eye(3), jnp.zeros(3), "relu")],
    )
    directory = tmp_path / "checkpoint"
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(directory, model)
        checkpointer.wait_until_finished()
        target = jax.tree.map(ocp.utils.to_shape_dtype_struct, model)
        restored = checkpointer.restore(directory, target)
        metadata = checkpointer.metadata(directory)

    assert type(restored) is Model and restored.heads[0].activation == "relu"
    assert jax.tree.structure(restored) == jax.tree.structure(model)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(model), strict=True):
        np.testing.assert_array_equal(got, want)

    tree = metadata.item_metadata.tree if hasattr(metadata, "item_metadata") else metadata
    saved = {dotted(path) for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]}
    assert saved == {"encoder.w", "encoder.b", "heads.0.w", "heads.0.b"}
    assert saved == {dotted(path) for path, _ in jax.tree_util.tree_flatten_with_path(model)[0]}


def dotted(path: tuple[Any, ...]) -> str:
    """`encoder.w`, `heads.0.b`: a key path as orbax names the saved arrays."""
    names = (getattr(key, "name", getattr(key, "key", getattr(key, "idx", key))) for key in path)
    return ".".join(map(str, names))
