"""One of the 2 processes of `tests/checkpoints/test_multiprocess.py`: a jitted step on a 4-device mesh.

    python tests/checkpoints/_multiprocess_worker.py PORT PROCESS_ID DATA_NPZ RESULT_NPZ

Started by the test with `XLA_FLAGS=--xla_force_host_platform_device_count=2` and
`JAX_PLATFORMS=cpu`. Each process owns 2 CPU devices; together they form a global mesh of 4.
Parameters (a pytree dataclass) are replicated, the batch (another one) is sharded by rows, and
each process feeds only its own rows. Both processes write the final parameters and the losses
to RESULT_NPZ. All traffic stays on 127.0.0.1: the coordinator binds there, and gloo is pinned
there too (by default it binds to whatever address the host name resolves to).

Exits with GLOO_UNAVAILABLE (and a message on stderr) when this jaxlib has no gloo collectives.
"""

import inspect
import sys
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc

GLOO_UNAVAILABLE = 77
NUM_PROCESSES = 2
LOCAL_DEVICES = 2
STEPS = 3
LEARNING_RATE = 0.1
LOOPBACK = "127.0.0.1"


@jdc.pytree_dataclass
class Linear:
    w: jax.Array
    b: jax.Array
    name: jdc.Static[str] = "linear"


@jdc.pytree_dataclass
class Batch:
    x: jax.Array
    y: jax.Array


def loss_fn(model: Linear, batch: Batch) -> jax.Array:
    return jnp.mean((batch.x @ model.w + model.b - batch.y) ** 2)


def sgd_step(model: Linear, batch: Batch) -> tuple[Linear, jax.Array]:
    loss, grads = jax.value_and_grad(loss_fn)(model, batch)
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, model, grads), loss


def use_loopback_gloo() -> None:
    """Give the CPU backend (created on first use) gloo collectives listening on 127.0.0.1.

    JAX has no public option for gloo's address, hence the private modules. Exits with
    GLOO_UNAVAILABLE if this jaxlib cannot make gloo collectives (not built with gloo, or a
    platform it does not support, e.g. Windows).
    """
    from jax._src import distributed, lib, xla_bridge

    extension = getattr(lib, "_jax", None) or lib.xla_extension  # renamed in newer jaxlib
    make_collectives = getattr(extension, "make_gloo_tcp_collectives", None)
    if make_collectives is None:  # Not a reason to skip: the private API moved; fix this test.
        raise RuntimeError(f"{extension.__name__}.make_gloo_tcp_collectives no longer exists")
    try:
        collectives = make_collectives(
            distributed_client=distributed.global_state.client, hostname=LOOPBACK
        )
    except RuntimeError as error:  # This jaxlib was built without gloo, or the OS lacks it.
        print(f"gloo CPU collectives are unavailable: {error!r}", file=sys.stderr)
        jax.distributed.shutdown()
        sys.exit(GLOO_UNAVAILABLE)
    xla_bridge.register_backend_factory(
        "cpu",
        lambda: xla_bridge.make_cpu_client(collectives=collectives),
        priority=0,
        fail_quietly=False,
    )


def run(process_id: int, data_path: str, result_path: str) -> None:
    if (jax.device_count(), jax.local_device_count()) != (NUM_PROCESSES * LOCAL_DEVICES, 2):
        raise RuntimeError(f"expected 4 devices, 2 local; got {jax.devices()}")
    mesh = jax.make_mesh((NUM_PROCESSES * LOCAL_DEVICES,), ("data",))
    replicated, rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    model_shardings = Linear(w=replicated, b=replicated)  # type: ignore[arg-type]
    batch_shardings = Batch(x=rows, y=rows)  # type: ignore[arg-type]

    data = np.load(data_path)
    n = data["x"].shape[0] // NUM_PROCESSES
    mine = slice(process_id * n, (process_id + 1) * n)
    # Each process passes its local part; JAX assembles the global arrays, leaf by leaf.
    model = jax.tree.map(
        jax.make_array_from_process_local_data,
        model_shardings,
        Linear(w=data["w"], b=data["b"]),
    )
    batch = jax.tree.map(
        jax.make_array_from_process_local_data,
        batch_shardings,
        Batch(x=data["x"][mine], y=data["y"][mine]),
    )
    if batch.x.shape != data["x"].shape or len(batch.x.addressable_shards) != LOCAL_DEVICES:
        raise RuntimeError(f"unexpected global batch: {batch.x.shape}, {batch.x.sharding}")

    step = jax.jit(
        sgd_step,
        in_shardings=(model_shardings, batch_shardings),
        out_shardings=(model_shardings, replicated),
        donate_argnums=0,
    )
    losses = []
    for _ in range(STEPS):
        model, loss = step(model, batch)
        losses.append(np.asarray(loss.addressable_data(0)))
    if type(model) is not Linear or model.name != "linear":
        raise RuntimeError(f"the step returned {model!r}")
    # Logging a train state from any process: arrays that span processes print as summaries.
    print(f"printed: {model!r} {jdc.pformat(batch, short_arrays=False)}")
    np.savez(
        result_path,
        w=np.asarray(model.w.addressable_data(0)),
        b=np.asarray(model.b.addressable_data(0)),
        loss=np.stack(losses),
    )


def initialize(port: str, process_id: int) -> None:
    """Join the other processes through the coordinator on 127.0.0.1:PORT, with gloo CPU
    collectives on 127.0.0.1 (exits with GLOO_UNAVAILABLE where there are none). The caller
    calls `jax.distributed.shutdown()` on the way out."""
    try:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except ValueError as error:  # A JAX that does not know gloo.
        print(f"gloo CPU collectives are unavailable: {error!r}", file=sys.stderr)
        sys.exit(GLOO_UNAVAILABLE)
    address = f"{LOOPBACK}:{port}"
    timeouts = {"heartbeat_timeout_seconds": 30, "shutdown_timeout_seconds": 30}
    known = inspect.signature(jax.distributed.initialize).parameters
    jax.distributed.initialize(
        coordinator_address=address,
        coordinator_bind_address=address,
        num_processes=NUM_PROCESSES,
        process_id=process_id,
        initialization_timeout=120,
        **{name: value for name, value in timeouts.items() if name in known},  # newer jax only
    )
    try:
        use_loopback_gloo()
    except Exception:
        jax.distributed.shutdown()
        raise


def serve(work: Callable[[int, str, str], None], argv: list[str]) -> None:
    """One worker process (`PORT PROCESS_ID DATA_NPZ RESULT_NPZ`): join the cluster, do
    `work(process_id, data_path, result_path)`, leave."""
    port, process_id, data_path, result_path = argv
    initialize(port, int(process_id))
    try:
        work(int(process_id), data_path, result_path)
    finally:
        jax.distributed.shutdown()
    print(f"process {process_id}: done")


if __name__ == "__main__":
    serve(run, sys.argv[1:])
