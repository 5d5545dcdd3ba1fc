"""Data-parallel training of a small MLP over every available device.

The parameters and the optimizer state are pytree dataclasses, replicated on every device; each
batch (also a pytree dataclass) is split by rows across the devices. `jax.jit` gets the layouts
as `in_shardings` / `out_shardings` and inserts the gradient all-reduce itself. Runs on one
device as well; to try 8 simulated CPU devices:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python examples/data_parallel.py
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc

ROWS_PER_DEVICE = 32
STEPS = 300
REPORT_EVERY = 50


@jdc.pytree_dataclass
class Dense:
    w: jax.Array
    b: jax.Array


@jdc.pytree_dataclass
class MLP:
    layers: tuple[Dense, ...]

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.layers[:-1]:
            x = jnp.tanh(x @ layer.w + layer.b)
        return x @ self.layers[-1].w + self.layers[-1].b


@jdc.pytree_dataclass
class TrainState:
    params: MLP
    velocity: MLP  # SGD with momentum: one buffer per parameter, same structure
    learning_rate: jdc.Static[float]
    momentum: jdc.Static[float]


@jdc.pytree_dataclass
class Batch:
    x: jax.Array
    y: jax.Array


def init_state(key: jax.Array, sizes: list[int]) -> TrainState:
    keys = jax.random.split(key, len(sizes) - 1)
    params = MLP(
        layers=tuple(
            Dense(w=jax.random.normal(k, (n_in, n_out)) / np.sqrt(n_in), b=jnp.zeros(n_out))
            for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:], strict=True)
        )
    )
    velocity = jax.tree.map(jnp.zeros_like, params)
    return TrainState(params=params, velocity=velocity, learning_rate=0.05, momentum=0.9)


def loss_fn(params: MLP, batch: Batch) -> jax.Array:
    return jnp.mean((params(batch.x) - batch.y) ** 2)


def train_step(state: TrainState, batch: Batch) -> tuple[TrainState, jax.Array]:
    loss, grads = jax.value_and_grad(loss_fn)(state.params, batch)
    velocity = jax.tree.map(lambda v, g: state.momentum * v + g, state.velocity, grads)
    params = jax.tree.map(lambda p, v: p - state.learning_rate * v, state.params, velocity)
    return jdc.replace(state, params=params, velocity=velocity), loss


def sample_batch(rng: np.random.Generator, rows: int) -> Batch:
    """Host-side data loading: a fresh batch of the target function y = sin(2 x0) cos(x1)."""
    x = rng.uniform(-2.0, 2.0, size=(rows, 2)).astype(np.float32)
    y = np.sin(2 * x[:, :1]) * np.cos(x[:, 1:])
    return Batch(x=jnp.asarray(x), y=jnp.asarray(y))


def main() -> None:
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    replicated = NamedSharding(mesh, P())  # every device holds the whole value
    rows = NamedSharding(mesh, P("data"))  # split the leading (batch) axis over "data"
    batch_shardings = Batch(x=rows, y=rows)  # type: ignore[arg-type]  # an instance of shardings
    print(f"{jax.device_count()} device(s), mesh {dict(mesh.shape)}")

    # A single sharding applies to every leaf of the state; an instance, leaf by leaf.
    step = jax.jit(
        train_step,
        in_shardings=(replicated, batch_shardings),
        out_shardings=(replicated, replicated),
        donate_argnums=0,  # the old state's buffers are reused for the new one
    )
    state = jax.device_put(init_state(jax.random.key(0), [2, 64, 64, 1]), replicated)
    rng = np.random.default_rng(0)
    global_rows = ROWS_PER_DEVICE * jax.device_count()
    losses: list[jax.Array] = []
    for i in range(1, STEPS + 1):
        batch = jax.device_put(sample_batch(rng, global_rows), batch_shardings)
        state, loss = step(state, batch)
        losses.append(loss)
        if i % REPORT_EVERY == 0:
            mean = float(jnp.mean(jnp.stack(losses[-REPORT_EVERY:])))
            print(f"steps {i - REPORT_EVERY + 1:3d}-{i:3d}  mean loss {mean:.4f}")
    shard = batch.x.addressable_shards[0].data.shape
    print(f"each device saw {shard[0]} of the {global_rows} rows of every batch")


if __name__ == "__main__":
    main()
