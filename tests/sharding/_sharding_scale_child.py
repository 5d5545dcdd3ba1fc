# ruff reads the axis names in `Sharded[T, "embed"]` as forward references (see
# tests/sharding/_sharded_future.py): F821 is false here.
# ruff: noqa: F821
"""Scale-out on a mesh of 8 CPU devices: flax's guide "Scale up on multiple devices"
(docs_nnx/guides/flax_gspmd.md) written with `jdc.Sharded` declarations only, beside flax's
own run of the same model; `check_shardings` inside the `lax.scan` body over stacked layers;
the constraints on Auto, Explicit and mixed meshes; the rules context with `jax.set_mesh`; and
an orbax checkpoint that flax nnx wrote, restored into our classes onto a mesh.

Run by `tests/sharding/test_sharding.py` in a child process (8 devices must be set before `import
jax`). By hand:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \\
        python -m pytest tests/sharding/_sharding_scale_child.py
"""

import tempfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc

if jax.device_count() != 8:
    raise RuntimeError("tests/sharding/_sharding_scale_child.py needs 8 devices: see its docstring")
# Each test is skipped, not the module: a child that collects nothing exits with 5.
pytestmark = pytest.mark.skipif(
    not hasattr(jax, "set_mesh"), reason="jax.set_mesh and explicit axes need jax 0.7+"
)
AxisType: Any = getattr(jax.sharding, "AxisType", None)  # jax 0.5+
AUTO, EXPLICIT = (AxisType.Auto, AxisType.Explicit) if AxisType is not None else (None, None)
RULES = (("batch", "data"), ("hidden", "model"), ("embed", None))  # flax's guide
DEPTH, LAYERS, STEPS = 128, 2, 8


def make_mesh(*types: AxisType, shape: tuple[int, int] = (2, 4)) -> jax.sharding.Mesh:
    return jax.make_mesh(shape, ("data", "model"), axis_types=types)


# -- flax's guide, with declarations ---------------------------------------------------------


@jdc.pytree_dataclass
class Linear:
    kernel: jdc.Sharded[jax.Array, "embed", "hidden"]

    def __call__(self, x: jax.Array) -> jax.Array:
        return x @ self.kernel


@jdc.pytree_dataclass
class LogicalDotReluDot:
    dot1: Linear
    w2: jdc.Sharded[jax.Array, "hidden", "embed"]

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jax.nn.relu(self.dot1(x))
        y = jdc.with_logical_constraint(y, ("batch", None))
        return jnp.dot(y, self.w2)


@jdc.pytree_dataclass
class LogicalMultiDotReluDot:
    layers: jdc.Sharded[LogicalDotReluDot, None]  # stacked by vmap, one slice per scan step

    def __call__(self, x: jax.Array, check: bool = False) -> jax.Array:
        def scan_over_layers(x: jax.Array, layer: LogicalDotReluDot) -> tuple[jax.Array, None]:
            if check:  # The unstacked slice, with the layer's own declarations.
                jdc.check_shardings(layer)
            return layer(x), None

        x, _ = jax.lax.scan(scan_over_layers, x, self.layers)
        return x


@jdc.pytree_dataclass
class TrainState:
    model: LogicalMultiDotReluDot
    opt_state: optax.OptState


optimizer = optax.adam(1e-3)


def init(key: jax.Array) -> TrainState:
    def one_layer(key: jax.Array) -> LogicalDotReluDot:
        k1, k2 = jax.random.split(key)
        init_fn = jax.nn.initializers.lecun_normal()
        return LogicalDotReluDot(Linear(init_fn(k1, (DEPTH, DEPTH))), init_fn(k2, (DEPTH, DEPTH)))

    model = LogicalMultiDotReluDot(jax.vmap(one_layer)(jax.random.split(key, LAYERS)))
    return TrainState(model, optimizer.init(model))


def train_step(state: TrainState, x: jax.Array, y: jax.Array) -> tuple[TrainState, jax.Array]:
    def loss_fn(model: LogicalMultiDotReluDot) -> jax.Array:
        return jnp.mean((model(x) - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state.model)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.model)
    return TrainState(optax.apply_updates(state.model, updates), opt_state), loss


def data(mesh: jax.sharding.Mesh) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(jax.random.key(1))
    rows = NamedSharding(mesh, P("data", None))
    return (
        jax.device_put(jax.random.normal(kx, (8, DEPTH)), rows),
        jax.device_put(jax.random.normal(ky, (8, DEPTH)), rows),
    )


def specs(tree: Any) -> list[tuple[tuple[int, ...], tuple[object, ...]]]:
    """Each leaf's shape and spec, padded to its rank (flax drops trailing Nones)."""
    leaves = [leaf for leaf in jax.tree.leaves(tree) if hasattr(leaf, "sharding")]
    return [
        (x.shape, (*x.sharding.spec, *(None,) * (x.ndim - len(x.sharding.spec)))) for x in leaves
    ]


def run_ours(start: TrainState | None = None) -> tuple[TrainState, list[float]]:
    """STEPS of adam on an Auto 2 x 4 mesh, mesh and rules from the context."""
    with jax.set_mesh(make_mesh(AUTO, AUTO)), jdc.sharding_rules(RULES):
        mesh = jax.sharding.get_mesh()
        if start is None:
            abstract = jax.eval_shape(init, jax.random.key(0))
            state = jax.jit(init, out_shardings=jdc.shardings(abstract))(jax.random.key(0))
        else:
            state = jax.device_put(start, jdc.shardings(start))
        step = jax.jit(train_step, donate_argnums=0)
        x, y = data(mesh)
        losses = []
        for _ in range(STEPS):
            state, loss = step(state, x, y)
            losses.append(float(loss))
        jdc.check_shardings(state)
    return state, losses


def test_the_stacked_model_gets_the_guides_specs_and_learns() -> None:
    state, losses = run_ours()
    layer = [(LAYERS, DEPTH, DEPTH)] * 2
    kernel, w2 = (None, None, "model"), (None, "model", None)
    assert specs(state.model) == list(zip(layer, [kernel, w2], strict=True))
    assert specs(state.opt_state) == [((), ()), *specs(state.model), *specs(state.model)]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.7 * losses[0], losses


def test_flaxs_own_run_of_the_guide_gives_the_same_specs_and_bit_identical_losses() -> None:
    """The same model in flax nnx (flax 0.12's eager sharding), started from the same
    parameters: every parameter and adam leaf has the same spec, and every loss is the same
    float. (The guide's loop does not return the optimizer from its jitted step, so its
    adam state never advances under `jax.jit`; here it is returned.)"""
    nnx = pytest.importorskip("flax.nnx")
    if not hasattr(nnx, "use_eager_sharding"):
        pytest.skip("flax 0.12's eager sharding")
    flax_state, flax_losses, flax_params = run_flax(nnx)
    start = jax.tree.map(np.asarray, init(jax.random.key(0)))
    start = TrainState(
        LogicalMultiDotReluDot(
            LogicalDotReluDot(
                Linear(flax_params["layers"]["dot1"]["kernel"]), flax_params["layers"]["w2"]
            )
        ),
        start.opt_state,
    )
    state, losses = run_ours(start)
    assert losses == flax_losses
    model_specs, opt_specs = flax_state
    assert specs(state.model) == model_specs
    assert specs(state.opt_state) == opt_specs


def run_flax(nnx: Any) -> tuple[tuple[list[Any], list[Any]], list[float], dict[str, Any]]:
    class LogicalDotReluDot(nnx.Module):  # type: ignore[misc,name-defined]
        def __init__(self, depth: int, rngs: Any) -> None:
            init_fn = nnx.initializers.lecun_normal()
            self.dot1 = nnx.Linear(
                depth,
                depth,
                kernel_init=nnx.with_partitioning(init_fn, ("embed", "hidden")),
                use_bias=False,
                rngs=rngs,
            )
            self.w2 = nnx.Param(
                init_fn(rngs.params(), (depth, depth)), sharding=("hidden", "embed")
            )

        def __call__(self, x: jax.Array) -> jax.Array:
            y = jax.nn.relu(self.dot1(x))
            y = jax.lax.with_sharding_constraint(y, P("data", None))
            return jnp.dot(y, self.w2[...])

    class LogicalMultiDotReluDot(nnx.Module):  # type: ignore[misc,name-defined]
        def __init__(self, depth: int, num_layers: int, rngs: Any) -> None:
            @nnx.vmap(transform_metadata={nnx.PARTITION_NAME: None})
            def create_sublayers(r: Any) -> Any:
                return LogicalDotReluDot(depth, r)

            self.layers = create_sublayers(rngs.split(num_layers))

        def __call__(self, x: jax.Array) -> jax.Array:
            x, _ = jax.lax.scan(lambda x, layer: (layer(x), None), x, self.layers)
            return x

    @jax.jit
    def flax_step(model: Any, opt: Any, x: jax.Array, y: jax.Array) -> tuple[Any, Any, jax.Array]:
        loss, grads = jax.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        opt.update(model, grads)
        return model, opt, loss

    with jax.set_mesh(make_mesh(AUTO, AUTO)), nnx.logical_axis_rules(RULES):
        model = LogicalMultiDotReluDot(DEPTH, LAYERS, rngs=nnx.Rngs(0))
        opt = nnx.Optimizer(model, optimizer, wrt=nnx.Param)
        params = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))
        x, y = data(jax.sharding.get_mesh())
        losses = []
        for _ in range(STEPS):
            model, opt, loss = flax_step(model, opt, x, y)
            losses.append(float(loss))
    return (specs(nnx.state(model)), specs(nnx.state(opt)["opt_state"])), losses, params


def test_check_shardings_passes_inside_the_scan_body_over_the_unstacked_slices() -> None:
    with jax.set_mesh(make_mesh(EXPLICIT, EXPLICIT)), jdc.sharding_rules(RULES):
        abstract = jax.eval_shape(init, jax.random.key(0))
        state = jax.jit(init, out_shardings=jdc.shardings(abstract))(jax.random.key(0))
        x, y = data(jax.sharding.get_mesh())
        loss = jax.jit(lambda m: jnp.mean((m(x, check=True) - y) ** 2))(state.model)
        assert np.isfinite(float(loss))
        moved = jax.device_put(state.model.layers.w2, P(None, None, "model"))
        edited = LogicalMultiDotReluDot(jdc.replace(state.model.layers, w2=moved))
        with pytest.raises(jdc.ShardingDeclarationError) as caught:
            jax.jit(lambda m: m(x, check=True))(edited)
    text = str(caught.value)
    assert text.startswith("1 array does not carry its declared sharding (mesh {'data': 2, ")
    assert "- field 'w2' of LogicalDotReluDot at .w2 (f32[128,128@model]): has P(None, " \
        "'model'), declared P('model', None)" in text  # fmt: skip


# -- constraints and checks on every kind of mesh --------------------------------------------


@jdc.pytree_dataclass
class Dense:
    w: jdc.Sharded[jax.Array, "embed", "hidden"]
    b: jdc.Sharded[jax.Array, "hidden"]


@pytest.mark.parametrize(
    "types",
    [(AUTO, AUTO), (EXPLICIT, EXPLICIT), (EXPLICIT, AUTO)],
    ids=["auto", "explicit", "mixed"],
)
def test_constraints_inside_jit_place_arrays_as_declared(types: tuple[AxisType, ...]) -> None:
    mesh = make_mesh(*types)
    rules = {"embed": "data", "hidden": "model", "batch": "data"}

    @jax.jit
    def step(dense: Dense, x: jax.Array) -> tuple[Dense, jax.Array]:
        grads = jax.grad(lambda d: jnp.sum(jnp.tanh(x @ d.w + d.b)))(dense)
        hidden = jdc.with_logical_constraint(jnp.tanh(x @ dense.w), ("batch", "hidden"))
        return jdc.constrain_shardings(grads), hidden

    with jax.set_mesh(mesh), jdc.sharding_rules(rules):
        dense = jax.device_put(Dense(jnp.ones((8, 16)), jnp.zeros(16)), P())
        grads, hidden = step(dense, jax.device_put(jnp.ones((16, 8)), P()))
        assert grads.w.sharding == NamedSharding(mesh, P("data", "model"))
        assert grads.b.sharding == NamedSharding(mesh, P("model"))
        assert hidden.sharding == NamedSharding(mesh, P("data", "model"))
        jdc.check_shardings(grads)


def test_on_a_mixed_mesh_a_check_inside_jit_that_cannot_be_made_says_so() -> None:
    """'data' Explicit, 'model' Auto: placed exactly as declared, the tree passes outside
    jit; inside, the type shows only 'data', so a declaration along 'model' cannot be checked
    there (an error saying so, never a false mismatch), and one along 'data' only is."""
    mesh = make_mesh(EXPLICIT, AUTO)
    rules = {"embed": "data", "hidden": "model"}
    placed = jax.device_put(Dense(jnp.ones((8, 16)), jnp.zeros(16)), jdc.shardings(
        Dense(jnp.ones((8, 16)), jnp.zeros(16)), rules, mesh=mesh))  # fmt: skip
    jdc.check_shardings(placed, rules, mesh=mesh)
    with jax.set_mesh(mesh), pytest.raises(jdc.ShardingDeclarationError) as caught:
        jax.jit(lambda d: jdc.check_shardings(d, rules))(placed)
    text = str(caught.value)
    assert text.startswith("2 arrays cannot be checked inside jax.jit (mesh {'data': 2, 'model'")
    assert "- field 'w' of Dense at .w (f32[8@data,16]): declared P('data', 'model'), along " \
        "'model', not an Explicit axis of the mesh" in text  # fmt: skip
    assert "check outside jit, on the concrete arrays, or make those axes Explicit" in text
    with jax.set_mesh(mesh):
        jax.jit(lambda d: jdc.check_shardings(d, {"embed": "data", "hidden": None}))(
            jax.device_put(placed, jdc.shardings(placed, {"embed": "data", "hidden": None}))
        )


def test_a_step_jitted_once_runs_on_another_mesh_of_the_context() -> None:
    """No shardings are written into the step: it constrains its result with the
    declarations, so under another mesh of `jax.set_mesh` JAX traces it again for that mesh."""
    traces: list[dict[str, int]] = []

    @jax.jit
    def doubled(dense: Dense) -> Dense:
        traces.append(dict(jax.sharding.get_abstract_mesh().shape))
        return jdc.constrain_shardings(jax.tree.map(lambda a: 2 * a, dense))

    dense = Dense(jnp.ones((8, 16)), jnp.zeros(16))
    with jdc.sharding_rules({"embed": "data", "hidden": "model"}):
        for shape in [(2, 4), (4, 2), (2, 4)]:
            with jax.set_mesh(make_mesh(AUTO, AUTO, shape=shape)):
                result = doubled(jax.device_put(dense, jdc.shardings(dense)))
                assert result.w.sharding.spec == P("data", "model")
                assert dict(result.w.sharding.mesh.shape) == dict(
                    zip(("data", "model"), shape, strict=True)
                )
    assert traces == [{"data": 2, "model": 4}, {"data": 4, "model": 2}]


# -- a checkpoint flax nnx wrote, restored into our classes ---------------------------------


def test_a_stacked_nnx_checkpoint_restores_into_our_classes_onto_any_mesh() -> None:
    nnx = pytest.importorskip("flax.nnx")
    ocp = pytest.importorskip("orbax.checkpoint")
    from flax_checkpoints import restore_flax_checkpoint

    class Block(nnx.Module):  # type: ignore[misc,name-defined]
        def __init__(self, rngs: Any) -> None:
            self.dot1 = nnx.Linear(DEPTH, DEPTH, use_bias=False, rngs=rngs)
            self.w2 = nnx.Param(jax.random.normal(rngs.params(), (DEPTH, DEPTH)))

    class Stack(nnx.Module):  # type: ignore[misc,name-defined]
        def __init__(self, rngs: Any) -> None:
            self.layers = nnx.vmap(Block)(rngs.split(LAYERS))

    saved = nnx.state(Stack(nnx.Rngs(0)))
    directory = Path(tempfile.mkdtemp()) / "nnx"
    abstract = jax.eval_shape(lambda: init(jax.random.key(0)).model)
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(directory, saved)
        checkpointer.wait_until_finished()
        for shape in [(2, 4), (4, 2)]:
            mesh = make_mesh(AUTO, AUTO, shape=shape)
            restored = restore_flax_checkpoint(checkpointer, directory, abstract, RULES, mesh=mesh)
            assert type(restored) is LogicalMultiDotReluDot
            jdc.check_shardings(restored, RULES, mesh=mesh)
            w2, kernel = (
                jax.tree.leaves(saved["layers"]["w2"]),
                jax.tree.leaves(saved["layers"]["dot1"]),
            )
            np.testing.assert_array_equal(restored.layers.w2, w2[0])
            np.testing.assert_array_equal(restored.layers.dot1.kernel, kernel[0])
