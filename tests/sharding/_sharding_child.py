"""Pytree dataclasses on a mesh of 8 CPU devices: device_put, jit, shard_map, data parallelism.

Not collected by the main test run (the name does not match `test_*.py`): it needs
`XLA_FLAGS=--xla_force_host_platform_device_count=8` before `import jax`, so
`tests/sharding/test_sharding.py` runs it with pytest in a child process. To run it by hand:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \
        python -m pytest tests/sharding/_sharding_child.py
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc

try:
    from jax.sharding import AxisType
except ImportError:  # jax before 0.5: only the classic mode, where the compiler propagates.
    AxisType = None  # type: ignore[assignment,misc]

MESH_MODES = [AxisType.Explicit, AxisType.Auto] if AxisType is not None else [None]

DEVICE_COUNT = 8
if jax.device_count() != DEVICE_COUNT:
    raise RuntimeError(
        f"tests/sharding/_sharding_child.py needs {DEVICE_COUNT} devices, found {jax.device_count()}. "
        "Run it through tests/sharding/test_sharding.py, or set "
        f"XLA_FLAGS=--xla_force_host_platform_device_count={DEVICE_COUNT} and JAX_PLATFORMS=cpu "
        "before starting Python."
    )

shard_map: Callable[..., Any]
TRACKS_VARYING_VALUES = hasattr(jax, "shard_map")
"""`jax.shard_map` knows which values are device-invariant (and so that the gradient of a
replicated parameter needs no averaging); `jax.experimental.shard_map` of older jax does not."""
if hasattr(jax, "shard_map"):
    shard_map = jax.shard_map
else:  # JAX < 0.7
    from jax.experimental.shard_map import shard_map


@jdc.pytree_dataclass
class Linear:
    w: jax.Array
    b: jax.Array
    activation: jdc.Static[str] = "tanh"

    def __call__(self, x: jax.Array) -> jax.Array:
        y = x @ self.w + self.b
        return jnp.tanh(y) if self.activation == "tanh" else y


@jdc.pytree_dataclass
class Model:
    hidden: Linear
    head: Linear

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.head(self.hidden(x))


@jdc.pytree_dataclass
class Batch:
    x: jax.Array
    y: jax.Array


def make_model(seed: int = 0) -> Model:
    k1, k2 = jax.random.split(jax.random.key(seed))
    return Model(
        hidden=Linear(w=jax.random.normal(k1, (4, 8)) / 2, b=jnp.full((8,), 0.1)),
        head=Linear(w=jax.random.normal(k2, (8, 2)) / 3, b=jnp.zeros(2), activation="identity"),
    )


def make_batch(n: int = 32, seed: int = 1) -> Batch:
    x = jax.random.normal(jax.random.key(seed), (n, 4))
    return Batch(x=x, y=jnp.stack([jnp.sin(x[:, 0]), x[:, 1] * x[:, 2]], axis=1))


def loss_fn(model: Model, batch: Batch) -> jax.Array:
    return jnp.mean((model(batch.x) - batch.y) ** 2)


def sgd_step(model: Model, batch: Batch) -> tuple[Model, jax.Array]:
    loss, grads = jax.value_and_grad(loss_fn)(model, batch)
    return jax.tree.map(lambda p, g: p - 0.1 * g, model, grads), loss


@pytest.fixture(scope="module", params=MESH_MODES, ids=str)
def mesh(request: pytest.FixtureRequest) -> Mesh:
    """A 4 x 2 mesh: batch rows over "data", hidden units over "model".

    Explicit axes are `jax.make_mesh`'s default; Auto axes are the classic mode (and that of
    `Mesh(devices, names)`), where the compiler propagates shardings.
    """
    axis_type = request.param
    if axis_type is None:
        return jax.make_mesh((4, 2), ("data", "model"))
    return jax.make_mesh((4, 2), ("data", "model"), axis_types=(axis_type, axis_type))


@pytest.fixture(scope="module")
def data_mesh() -> Mesh:
    """All 8 devices on one "data" axis, for data parallelism."""
    return jax.make_mesh((DEVICE_COUNT,), ("data",))


def model_specs() -> Model:
    """Hidden layer split over "model" (columns of w, entries of b); head replicated."""
    return Model(
        hidden=Linear(w=P(None, "model"), b=P("model")),  # type: ignore[arg-type]
        head=Linear(w=P(), b=P(), activation="identity"),  # type: ignore[arg-type]
    )


def model_shardings(mesh: Mesh) -> Model:
    """`model_specs()` on `mesh`, written out."""
    split_columns, split = NamedSharding(mesh, P(None, "model")), NamedSharding(mesh, P("model"))
    replicated = NamedSharding(mesh, P())
    return Model(
        hidden=Linear(w=split_columns, b=split),  # type: ignore[arg-type]
        head=Linear(w=replicated, b=replicated, activation="identity"),  # type: ignore[arg-type]
    )


def batch_shardings(mesh: Mesh) -> Batch:
    rows = NamedSharding(mesh, P("data"))
    return Batch(x=rows, y=rows)  # type: ignore[arg-type]


def assert_shardings(tree: object, expected: object) -> None:
    """Every leaf of `tree` is laid out as the matching leaf of the sharding tree `expected`."""
    leaves, structure = jax.tree_util.tree_flatten_with_path(tree)
    wanted, wanted_structure = jax.tree.flatten(expected)
    assert structure == wanted_structure, (structure, wanted_structure)
    for (path, leaf), sharding in zip(leaves, wanted, strict=True):
        assert leaf.sharding.is_equivalent_to(sharding, leaf.ndim), (
            jax.tree_util.keystr(path),
            leaf.sharding,
            sharding,
        )


def assert_tree_allclose(actual: object, expected: object) -> None:
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-5, atol=1e-6)


# --- jax.device_put -------------------------------------------------------------------------


def test_device_put_with_an_instance_of_shardings(mesh: Mesh) -> None:
    model = make_model()
    shardings = model_shardings(mesh)
    placed = jax.device_put(model, shardings)
    assert type(placed) is Model and type(placed.hidden) is Linear
    assert placed.head.activation == "identity"
    assert_shardings(placed, shardings)
    assert placed.hidden.w.addressable_shards[0].data.shape == (4, 4)
    assert_tree_allclose(placed, model)


def test_device_put_with_a_sharding_prefix(mesh: Mesh) -> None:
    """A single sharding in a field of the sharding tree applies to that whole subtree."""
    model = make_model()
    replicated = NamedSharding(mesh, P())
    shardings = Model(hidden=model_shardings(mesh).hidden, head=replicated)  # type: ignore[arg-type]
    placed = jax.device_put(model, shardings)
    assert_shardings(placed.hidden, shardings.hidden)
    assert_shardings(placed.head, Linear(replicated, replicated, "identity"))  # type: ignore[arg-type]
    assert_tree_allclose(placed, model)


def test_device_put_with_a_single_sharding(mesh: Mesh) -> None:
    batch = make_batch()
    rows = NamedSharding(mesh, P("data"))
    placed = jax.device_put(batch, rows)
    assert type(placed) is Batch
    assert_shardings(placed, Batch(rows, rows))  # type: ignore[arg-type]
    assert placed.x.addressable_shards[0].data.shape == (8, 4)
    assert_tree_allclose(placed, batch)


def test_sharding_tree_built_from_field_names(mesh: Mesh) -> None:
    """Keyed registration: `tree_map_with_path` sees field names and keeps static fields."""
    specs = {"w": P(None, "model"), "b": P("model")}

    def sharding_for(path: tuple[object, ...], leaf: jax.Array) -> NamedSharding:
        layer, field = path[0], path[-1]
        assert isinstance(layer, jax.tree_util.GetAttrKey)
        assert isinstance(field, jax.tree_util.GetAttrKey)
        return NamedSharding(mesh, specs[field.name] if layer.name == "hidden" else P())

    model = make_model()
    shardings = jax.tree_util.tree_map_with_path(sharding_for, model)
    assert type(shardings) is Model
    assert shardings.head.activation == "identity"
    assert jax.tree.structure(shardings) == jax.tree.structure(model)
    assert_shardings(jax.device_put(model, shardings), model_shardings(mesh))


def test_sharding_tree_built_from_an_instance_of_specs(mesh: Mesh) -> None:
    """PartitionSpecs are leaves: one `jax.tree.map` turns a spec instance into shardings."""
    shardings = jax.tree.map(lambda spec: NamedSharding(mesh, spec), model_specs())
    assert shardings == model_shardings(mesh)
    assert_shardings(jax.device_put(make_model(), shardings), model_shardings(mesh))


def test_sharding_tree_with_other_static_values_is_rejected(mesh: Mesh) -> None:
    """Static fields are tree structure: a sharding tree must carry the same static values."""
    model = make_model()
    replicated = NamedSharding(mesh, P())
    wrong = Model(
        hidden=Linear(replicated, replicated, activation="tanh"),  # type: ignore[arg-type]
        head=Linear(replicated, replicated, activation="relu"),  # type: ignore[arg-type]
    )
    with pytest.raises(ValueError, match="tree prefix") as info:
        jax.device_put(model, wrong)
    message = str(info.value)
    assert "relu" in message and "identity" in message  # JAX shows both static values


# --- jax.jit with shardings -----------------------------------------------------------------


def test_jit_in_and_out_shardings_as_instances(mesh: Mesh) -> None:
    model, batch = make_model(), make_batch()
    step = jax.jit(
        sgd_step,
        in_shardings=(model_shardings(mesh), batch_shardings(mesh)),
        out_shardings=(model_shardings(mesh), NamedSharding(mesh, P())),
    )
    new_model, loss = step(model, batch)
    assert type(new_model) is Model and new_model.head.activation == "identity"
    assert_shardings(new_model, model_shardings(mesh))
    expected_model, expected_loss = jax.jit(sgd_step)(model, batch)
    assert_tree_allclose((new_model, loss), (expected_model, expected_loss))


def test_jit_out_shardings_reshard_the_result(mesh: Mesh) -> None:
    """Inputs laid out one way, the result comes back in the layout out_shardings asks for."""
    model = jax.device_put(make_model(), model_shardings(mesh))
    replicated = NamedSharding(mesh, P())
    doubled = jax.jit(lambda m: jax.tree.map(lambda p: 2 * p, m), out_shardings=replicated)(model)
    assert_shardings(doubled, jax.tree.map(lambda _: replicated, model))
    assert_tree_allclose(doubled, jax.tree.map(lambda p: 2 * p, make_model()))


def test_sharding_constraints_take_an_instance(mesh: Mesh) -> None:
    """Inside jit: `with_sharding_constraint` on Auto axes, `reshard` on Explicit axes."""
    explicit = AxisType is not None and AxisType.Explicit in mesh.axis_types
    constrain = jax.sharding.reshard if explicit else jax.lax.with_sharding_constraint

    def constrained(model: Model) -> Model:
        result: Model = constrain(jax.tree.map(lambda p: p + 1, model), model_shardings(mesh))
        return result

    result = jax.jit(constrained)(jax.device_put(make_model(), NamedSharding(mesh, P())))
    assert_shardings(result, model_shardings(mesh))
    assert_tree_allclose(result, jax.tree.map(lambda p: p + 1, make_model()))


@pytest.mark.parametrize("donate", ["argnums", "argnames"])
def test_jit_donates_an_instance(mesh: Mesh, donate: str) -> None:
    donation: dict[str, Any] = (
        {"donate_argnums": 0} if donate == "argnums" else {"donate_argnames": "model"}
    )
    step = jax.jit(
        sgd_step,
        in_shardings=(model_shardings(mesh), batch_shardings(mesh)),
        out_shardings=(model_shardings(mesh), NamedSharding(mesh, P())),
        **donation,
    )
    model = jax.device_put(make_model(), model_shardings(mesh))
    batch = jax.device_put(make_batch(), batch_shardings(mesh))
    new_model, _ = step(model, batch)
    assert all(leaf.is_deleted() for leaf in jax.tree.leaves(model))
    assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(batch))
    assert_shardings(new_model, model_shardings(mesh))
    assert_tree_allclose(new_model, jax.jit(sgd_step)(make_model(), make_batch())[0])


def test_jdc_jit_with_shardings_and_a_static_parameter(mesh: Mesh) -> None:
    """`jdc.jit` passes shardings and donation through; Static parameters stay out of them."""

    def scaled_step(model: Model, batch: Batch, scale: jdc.Static[float]) -> Model:
        grads = jax.grad(loss_fn)(model, batch)
        return jax.tree.map(lambda p, g: p - scale * g, model, grads)

    step = jdc.jit(
        scaled_step,
        in_shardings=(model_shardings(mesh), batch_shardings(mesh)),
        out_shardings=model_shardings(mesh),
        donate_argnums=0,
    )
    model = jax.device_put(make_model(), model_shardings(mesh))
    new_model = step(model, make_batch(), 0.1)
    assert all(leaf.is_deleted() for leaf in jax.tree.leaves(model))
    assert type(new_model) is Model
    assert_shardings(new_model, model_shardings(mesh))
    assert_tree_allclose(new_model, jax.jit(sgd_step)(make_model(), make_batch())[0])
    # A different static value compiles a different step.
    halved = step(jax.device_put(make_model(), model_shardings(mesh)), make_batch(), 0.05)
    assert_tree_allclose(
        halved, jax.jit(scaled_step, static_argnums=2)(make_model(), make_batch(), 0.05)
    )


# --- shard_map and data parallelism ---------------------------------------------------------


def shard_map_step(data_mesh: Mesh) -> Callable[[Model, Batch], tuple[Model, jax.Array]]:
    """One SGD step: each device computes the loss on its rows, `pmean` averages the losses.

    The parameters are replicated (device-invariant), so their gradient of the averaged loss
    is already the gradient over the whole batch.
    """
    replicated = Model(hidden=Linear(P(), P()), head=Linear(P(), P(), "identity"))  # type: ignore[arg-type]

    def global_loss(model: Model, batch: Batch) -> jax.Array:
        return jax.lax.pmean(loss_fn(model, batch), "data")

    def local_step(model: Model, batch: Batch) -> tuple[Model, jax.Array]:
        if TRACKS_VARYING_VALUES:
            loss, grads = jax.value_and_grad(global_loss)(model, batch)
        else:  # Average the local gradients ourselves (what the newer shard_map derives).
            loss, grads = jax.value_and_grad(loss_fn)(model, batch)
            loss, grads = jax.lax.pmean((loss, grads), "data")
        return jax.tree.map(lambda p, g: p - 0.1 * g, model, grads), loss

    sharded = shard_map(
        local_step,
        mesh=data_mesh,
        in_specs=(replicated, Batch(x=P("data"), y=P("data"))),  # type: ignore[arg-type]
        out_specs=(replicated, P()),
    )
    return jax.jit(sharded)


def jit_step(data_mesh: Mesh) -> Callable[[Model, Batch], tuple[Model, jax.Array]]:
    """One SGD step: the compiler partitions the batch dimension over the devices."""
    replicated = NamedSharding(data_mesh, P())
    return jax.jit(
        sgd_step,
        in_shardings=(replicated, batch_shardings(data_mesh)),
        out_shardings=(replicated, replicated),
    )


def test_shard_map_with_spec_instances(data_mesh: Mesh) -> None:
    model = jax.device_put(make_model(), NamedSharding(data_mesh, P()))
    batch = jax.device_put(make_batch(), NamedSharding(data_mesh, P("data")))
    seen: list[tuple[type, tuple[int, ...]]] = []

    def local(model: Model, batch: Batch) -> Batch:
        seen.append((type(batch), batch.x.shape))
        return Batch(x=model(batch.x), y=batch.y)

    out = shard_map(
        local,
        mesh=data_mesh,
        in_specs=(P(), Batch(x=P("data"), y=P("data"))),  # type: ignore[arg-type]
        out_specs=Batch(x=P("data"), y=P("data")),  # type: ignore[arg-type]
    )(model, batch)
    assert seen == [(Batch, (32 // DEVICE_COUNT, 4))]
    assert type(out) is Batch
    assert_shardings(out, batch_shardings(data_mesh))
    assert_tree_allclose(out, Batch(x=make_model()(make_batch().x), y=make_batch().y))


@pytest.mark.parametrize("make_step", [shard_map_step, jit_step], ids=["shard_map", "jit"])
def test_data_parallel_training_matches_one_device(
    data_mesh: Mesh, make_step: Callable[[Mesh], Callable[[Model, Batch], tuple[Model, jax.Array]]]
) -> None:
    """Params replicated, batch sharded over 8 devices: the same numbers as on one device."""
    parallel, single = make_step(data_mesh), jax.jit(sgd_step)
    replicated, rows = NamedSharding(data_mesh, P()), NamedSharding(data_mesh, P("data"))
    batch = make_batch()
    model_p, batch_p = jax.device_put(make_model(), replicated), jax.device_put(batch, rows)
    model_1, batch_1 = jax.device_put((make_model(), batch), jax.devices()[0])
    losses_p: list[float] = []
    losses_1: list[float] = []
    for _ in range(5):
        model_p, loss_p = parallel(model_p, batch_p)
        model_1, loss_1 = single(model_1, batch_1)
        losses_p.append(float(loss_p))
        losses_1.append(float(loss_1))
    assert type(model_p) is Model and model_p.head.activation == "identity"
    assert_shardings(model_p, jax.tree.map(lambda _: replicated, model_p))
    assert all(len(leaf.devices()) == 1 for leaf in jax.tree.leaves(model_1))
    np.testing.assert_allclose(losses_p, losses_1, rtol=1e-5)
    assert_tree_allclose(model_p, model_1)
    assert losses_1[-1] < losses_1[0]
