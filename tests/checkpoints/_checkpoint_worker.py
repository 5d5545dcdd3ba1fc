# ruff reads the axis names in `Sharded[T, "embed"]` as forward references (see
# tests/sharding/_sharded_future.py): F821 is false here.
# ruff: noqa: F821
"""One of the 2 processes of `tests/checkpoints/test_multiprocess_checkpoints.py`: a sharded train state
saved and restored with orbax by both processes, onto two meshes.

    python tests/checkpoints/_checkpoint_worker.py PORT PROCESS_ID DATA_NPZ RESULT_NPZ

Started as `tests/checkpoints/_multiprocess_worker.py` is (2 CPU devices per process, a global mesh of 4,
all traffic on 127.0.0.1). The model's fields declare their axes with `jdc.Sharded`; the
model and its adam state are created where declared (`jax.jit(out_shardings=jdc.shardings(
...))`) on a 4 x 1 mesh, take two adam steps with the gradients in DATA_NPZ, and are saved
with orbax into DATA_NPZ's folder. Then they are restored twice into targets made from the
declarations (`jdc.sharded_shapes`, no hand-written target): on the same 4 x 1 mesh, and on a
2 x 2 mesh (orbax reshards on restore). RESULT_NPZ gets, for each restore, every leaf's
global value (gathered from both processes) and its sharding's spec; the test compares them
with its NumPy reference and the declarations.
"""

import sys
from pathlib import Path
from typing import Any

import _multiprocess_worker as common
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils
from jax.sharding import Mesh

import jax_dataclasses as jdc

RULES = {"embed": "data", "mlp": "model"}
LEARNING_RATE = 0.1
MESHES = {"4x1": (4, 1), "2x2": (2, 2)}  # Saved on the first, restored on both.


@jdc.pytree_dataclass
class Dense:
    w: jdc.Sharded[jax.Array, "embed", "mlp"]
    b: jdc.Sharded[jax.Array, "mlp"]
    scale: jax.Array  # Undeclared: replicated.
    activation: jdc.Static[str] = "tanh"


@jdc.pytree_dataclass
class Model:
    hidden: Dense
    head: Dense


@jdc.pytree_dataclass
class TrainState:
    params: Model
    opt_state: optax.OptState


OPTIMIZER = optax.adam(LEARNING_RATE)


def model_from(arrays: dict[str, np.ndarray], prefix: str = "", array: Any = jnp.asarray) -> Model:
    def dense(name: str, activation: str) -> Dense:
        w, b, scale = (array(arrays[f"{prefix}{name}.{f}"]) for f in ("w", "b", "scale"))
        return Dense(w, b, scale, activation)

    return Model(dense("hidden", "tanh"), dense("head", "identity"))


def dotted(path: tuple[Any, ...]) -> str:
    """`params.hidden.w`, `opt_state.0.mu.head.b`: a key path as a name in RESULT_NPZ."""
    names = (getattr(key, "name", getattr(key, "key", getattr(key, "idx", key))) for key in path)
    return ".".join(map(str, names))


def mesh_of(shape: tuple[int, int]) -> Mesh:
    return Mesh(np.array(jax.devices()).reshape(shape), ("data", "model"))


def run(process_id: int, data_path: str, result_path: str) -> None:
    if (jax.device_count(), jax.local_device_count()) != (4, 2):
        raise RuntimeError(f"expected 4 devices, 2 local; got {jax.devices()}")
    data = dict(np.load(data_path))
    directory = Path(data_path).parent / "checkpoint"

    def init() -> TrainState:
        params = model_from(data)
        return TrainState(params, OPTIMIZER.init(params))

    def step(state: TrainState, grads: Model) -> TrainState:
        updates, opt_state = OPTIMIZER.update(grads, state.opt_state, state.params)
        return TrainState(optax.apply_updates(state.params, updates), opt_state)

    abstract = jax.eval_shape(init)
    mesh = mesh_of(MESHES["4x1"])
    shardings = jdc.shardings(abstract, mesh, RULES)
    state = jax.jit(init, out_shardings=shardings)()
    jdc.check_shardings(state, RULES, mesh=mesh)
    grad_shardings = jdc.shardings(abstract.params, mesh, RULES)
    train_step = jax.jit(step, out_shardings=shardings, donate_argnums=0)
    for i in range(2):
        grads = jax.tree.map(  # Each process makes its own blocks of the global arrays.
            lambda sharding, x: jax.make_array_from_callback(x.shape, sharding, x.__getitem__),
            grad_shardings,
            model_from(data, f"grad{i}.", np.asarray),
        )
        state = train_step(state, grads)

    with ocp.StandardCheckpointer() as checkpointer:  # Every process saves its own shards.
        checkpointer.save(directory, state)
        checkpointer.wait_until_finished()

    results: dict[str, np.ndarray] = {}
    for name, shape in MESHES.items():
        target = jdc.sharded_shapes(abstract, mesh_of(shape), RULES)  # From the declarations.
        with ocp.StandardCheckpointer() as checkpointer:
            restored = checkpointer.restore(directory, target)
        if type(restored) is not TrainState or restored.params.head.activation != "identity":
            raise RuntimeError(f"restored {restored!r}")
        jdc.check_shardings(restored, RULES, mesh=mesh_of(shape))
        gathered = multihost_utils.process_allgather(restored, tiled=True)
        for (path, leaf), whole in zip(
            jax.tree_util.tree_leaves_with_path(restored), jax.tree.leaves(gathered), strict=True
        ):
            for shard in leaf.addressable_shards:  # This process holds the right blocks.
                np.testing.assert_array_equal(shard.data, whole[shard.index])
            results[f"{name}/{dotted(path)}"] = np.asarray(whole)
            results[f"{name}/{dotted(path)}/spec"] = np.array(repr(tuple(leaf.sharding.spec)))
        print(f"restored on {name}: {jdc.pformat(restored.params, width=1000)}")
    np.savez(result_path, **results)


if __name__ == "__main__":
    common.serve(run, sys.argv[1:])
