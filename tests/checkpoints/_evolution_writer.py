"""Writes checkpoints of the classes as they were, for `tests/checkpoints/test_checkpoint_evolution.py`,
in a process of their own (the test restores them into the classes as they are now).

    python tests/checkpoints/_evolution_writer.py DIRECTORY

DIRECTORY gets `policy.msgpack` (flax `to_bytes`), `orbax/` (an orbax checkpoint keyed by
field names) and `orbax-1.6/` (orbax, in the positional layout jax_dataclasses 1.6 wrote:
`jdc.v1_6_layout` of the model is exactly what 1.6 saved for it). The values are
`np.arange`s, so the test can tell which saved array went where.
"""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from flax import serialization

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Dense:
    w: jax.Array
    b: jax.Array
    dropout_mask: jax.Array
    activation: jdc.Static[str] = "tanh"


@jdc.pytree_dataclass
class Policy:
    layers: list[Dense]
    log_std: jax.Array
    name: jdc.Static[str] = "policy"


def dense(start: int) -> Dense:
    return Dense(
        jnp.arange(start, start + 6.0).reshape(2, 3),
        jnp.arange(start + 10, start + 13.0),
        jnp.ones(3, jnp.bool_),
    )


def main(directory: Path) -> None:
    policy = Policy([dense(0), dense(100)], jnp.arange(-2.0, 0.0))
    (directory / "policy.msgpack").write_bytes(serialization.to_bytes(policy))
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save((directory / "orbax").absolute(), policy)
        checkpointer.save((directory / "orbax-1.6").absolute(), jdc.v1_6_layout(policy))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
