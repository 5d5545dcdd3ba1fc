"""The mapping of docs/migrating/from-flax-partitioning.md ("Checkpoints flax wrote"), as the
tests use it: an orbax checkpoint of an nnx state or of linen's `params`, restored into pytree
dataclasses whose fields are named as its keys, placed as they declare."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
from flax import serialization

import jax_dataclasses as jdc


def as_saved(ours: Any, saved: Any) -> Any:
    """`ours` (flax.serialization's nested dicts of our tree) in the layout of `saved` (the
    checkpoint's tree): `{'value': x}` wherever flax stored a variable so."""
    if isinstance(saved, Mapping) and set(saved) == {"value"} and not isinstance(ours, Mapping):
        return {"value": ours}
    if isinstance(ours, Mapping):
        return {key: as_saved(value, saved[key]) for key, value in ours.items()}
    return ours


def restore_flax_checkpoint(
    checkpointer: Any, directory: Path, abstract: Any, rules: Any = None, *, mesh: Any = None
) -> Any:
    target = jdc.sharded_shapes(abstract, rules, mesh=mesh)
    metadata = checkpointer.metadata(directory)  # The tree flax wrote, as orbax describes it.
    saved = getattr(getattr(metadata, "item_metadata", metadata), "tree", metadata)
    restored = checkpointer.restore(directory, as_saved(serialization.to_state_dict(target), saved))
    unboxed = jax.tree.map(
        lambda v: v["value"] if isinstance(v, Mapping) else v,
        restored,
        is_leaf=lambda x: isinstance(x, Mapping) and set(x) == {"value"},
    )
    return serialization.from_state_dict(target, unboxed)
