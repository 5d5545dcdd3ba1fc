"""`jdc.jit_diff` and `jdc.explain_recompiles` on 8 CPU devices: a new sharding compiles again.

Not collected by the main test run: `tests/transforms/test_explain.py` runs it with pytest in a child
process started with 8 CPU devices (see `tests/sharding/_sharding_child.py` for how to run it by hand).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc

assert jax.device_count() == 8, "run through tests/transforms/test_explain.py (8 CPU devices)"
MESH = jax.make_mesh((8,), ("data",))


@jdc.pytree_dataclass
class Batch:
    x: jax.Array
    name: jdc.Static[str] = "train"


def reports(step: object, *arguments: object) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for argument in arguments:
            jax.block_until_ready(step(argument))  # type: ignore[operator]
    return [str(w.message) for w in caught if w.category is jdc.RecompileWarning]


def test_a_new_named_sharding() -> None:
    sharded = jax.device_put(jnp.ones((8, 2)), NamedSharding(MESH, P("data")))
    replicated = jax.device_put(jnp.ones((8, 2)), NamedSharding(MESH, P()))
    (change,) = jdc.jit_diff(Batch(sharded), Batch(replicated))
    assert str(change) == ".x: f32[8@data,2] → f32[8,2] (sharding)"

    step = jdc.explain_recompiles(jax.jit(lambda batch: batch.x * 2))
    (report,) = reports(step, Batch(sharded), Batch(replicated))
    assert report.endswith("\n  batch.x: f32[8@data,2] → f32[8,2] (sharding)"), report


def test_another_device_compiles_without_tracing() -> None:
    first = jax.device_put(jnp.ones(3), jax.devices()[0])
    second = jax.device_put(jnp.ones(3), jax.devices()[1])
    (change,) = jdc.jit_diff(first, second)
    assert change.kind == "sharding" and change.before != change.after
    assert "id=0" in change.before and "id=1" in change.after

    step = jdc.explain_recompiles(jax.jit(lambda x: x + 1))
    (report,) = reports(step, first, second)
    assert report.startswith("jax.jit compiled <lambda> again (1 trace, 2 compilations); ")
    assert report.splitlines()[1].startswith("  x: SingleDeviceSharding(device=CpuDevice(id=0)")
    assert (step.traces, step.compilations) == (1, 2)  # type: ignore[attr-defined]


def test_the_same_spec_on_other_devices() -> None:
    """Shardings whose summaries and texts are the same are told apart by their devices."""
    first, second = (
        jax.sharding.Mesh(np.array(jax.devices()[start : start + 4]), ("data",)) for start in (0, 4)
    )
    (change,) = jdc.jit_diff(
        jax.device_put(jnp.ones(8), NamedSharding(first, P("data"))),
        jax.device_put(jnp.ones(8), NamedSharding(second, P("data"))),
    )
    assert change.kind == "sharding"
    assert change.before.endswith("on devices [0, 1, 2, 3]"), change.before
    assert change.after.endswith("on devices [4, 5, 6, 7]"), change.after


def test_the_same_devices_in_another_order() -> None:
    """Meshes of the same devices in another order compile again, and print apart."""
    devices = jax.devices()[:4]
    first, second = (
        jax.sharding.Mesh(np.array(order), ("data",)) for order in (devices, devices[::-1])
    )
    (change,) = jdc.jit_diff(
        jax.device_put(jnp.ones(8), NamedSharding(first, P("data"))),
        jax.device_put(jnp.ones(8), NamedSharding(second, P("data"))),
    )
    assert change.kind == "sharding"
    assert change.before.endswith("on devices [0, 1, 2, 3]"), change.before
    assert change.after.endswith("on devices [3, 2, 1, 0]"), change.after
