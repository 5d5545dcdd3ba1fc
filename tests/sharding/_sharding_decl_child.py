# ruff reads the axis names in `Sharded[T, "embed"]` as forward references (see
# tests/sharding/_sharded_future.py): F821 is false here.
# ruff: noqa: F821
"""`jdc.Sharded` declarations on a mesh of 8 CPU devices: a model and its adam state created
sharded by `jax.jit(out_shardings=jdc.shardings(...))`, `device_put`, `in_shardings`, rules
naming several mesh axes, and `check_shardings` under explicit axes, after surgery too.

Run by `tests/sharding/test_sharding.py` in a child process (8 devices must be set before `import
jax`). By hand:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \\
        python -m pytest tests/sharding/_sharding_decl_child.py
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc

try:
    from jax.sharding import AxisType
except ImportError:  # jax before 0.5: no explicit axes.
    AxisType = None  # type: ignore[assignment,misc]

if jax.device_count() != 8:
    raise RuntimeError("tests/sharding/_sharding_decl_child.py needs 8 devices: see its docstring")

MESH = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
RULES = {"embed": "data", "mlp": "model", "batch": ("data", "model")}


@jdc.pytree_dataclass
class Dense:
    w: jdc.Sharded[jax.Array, "embed", "mlp"]
    b: jdc.Sharded[jax.Array, "mlp"]
    scale: jax.Array


@jdc.pytree_dataclass
class Model:
    first: Dense
    second: Dense

    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = jnp.tanh(x @ self.first.w + self.first.b)
        return (hidden @ self.second.w.T + self.second.b[:8]) * self.second.scale


def init(key: jax.Array) -> tuple[Model, optax.OptState]:
    k1, k2 = jax.random.split(key)
    model = Model(
        Dense(jax.random.normal(k1, (8, 16)), jnp.zeros(16), jnp.ones(())),
        Dense(jax.random.normal(k2, (8, 16)), jnp.zeros(16), jnp.ones(())),
    )
    return model, optax.adam(1e-3).init(model)


def specs_of(tree: object) -> list[P]:
    return [x.sharding.spec for x in jax.tree.leaves(tree)]


def test_jit_creates_the_model_and_its_adam_state_where_they_are_declared() -> None:
    abstract = jax.eval_shape(init, jax.random.key(0))
    model, state = jax.jit(init, out_shardings=jdc.shardings(abstract, MESH, RULES))(
        jax.random.key(0)
    )
    assert model.first.w.sharding == NamedSharding(MESH, P("data", "model"))
    assert model.first.b.sharding.spec == P("model") and model.first.scale.sharding.spec == P()
    assert specs_of(state[0].mu) == specs_of(state[0].nu) == specs_of(model)
    assert state[0].count.sharding.spec == P()
    assert model.first.w.addressable_shards[0].data.shape == (2, 8)
    jdc.check_shardings((model, state), RULES, mesh=MESH)
    assert "w=f32[8@data,16@model]" in repr(model)


def test_device_put_and_in_shardings() -> None:
    model, _ = init(jax.random.key(1))
    placed = jax.device_put(model, jdc.shardings(model, MESH, RULES))
    jdc.check_shardings(placed, RULES)
    x = jax.device_put(jnp.ones((32, 8)), NamedSharding(MESH, P("data")))
    loss = jax.jit(
        lambda m, x: jnp.mean(m(x) ** 2),
        in_shardings=(jdc.shardings(model, MESH, RULES), NamedSharding(MESH, P("data"))),
    )
    assert np.isfinite(float(loss(placed, x)))


def test_a_rule_naming_several_mesh_axes() -> None:
    @jdc.pytree_dataclass
    class Batch:
        x: jdc.Sharded[jax.Array, "batch", None]

    placed = jax.device_put(
        Batch(jnp.ones((16, 3))), jdc.shardings(Batch(jnp.ones((16, 3))), MESH, RULES)
    )
    assert placed.x.sharding.spec == P(("data", "model"), None)
    assert placed.x.addressable_shards[0].data.shape == (2, 3)
    assert "f32[16@(data,model),3]" in repr(placed)


def test_sharded_shapes_are_restore_targets() -> None:
    target = jdc.sharded_shapes(jax.eval_shape(init, jax.random.key(0)), MESH, RULES)
    model, _ = target
    assert isinstance(model.first.w, jax.ShapeDtypeStruct)
    assert model.first.w.sharding == NamedSharding(MESH, P("data", "model"))
    zeros = jax.jit(
        lambda: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), target),
        out_shardings=jax.tree.map(lambda s: s.sharding, target),
    )()
    jdc.check_shardings(zeros, RULES, mesh=MESH)


def test_a_dimension_the_mesh_does_not_divide_is_refused_before_xla() -> None:
    bad = Dense(jnp.ones((6, 16)), jnp.zeros(16), jnp.ones(()))
    with pytest.raises(jdc.ShardingDeclarationError) as caught:
        jax.device_put(bad, jdc.shardings(bad, MESH, RULES))
    text = str(caught.value)
    assert "(mesh {'data': 4, 'model': 2}; rules" in text
    assert "field 'w' of Dense at .w (f32[6,16]): dimension 0 has size 6" in text
    assert "'data' (4) (the rule for 'embed')" in text


explicit = pytest.mark.skipif(AxisType is None, reason="explicit axes need jax 0.5+")


@explicit
def test_check_shardings_inside_jit_under_explicit_axes_and_after_surgery() -> None:
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
    model, _ = init(jax.random.key(2))
    placed = jax.device_put(model, jdc.shardings(model, mesh, RULES))

    @jax.jit
    def checked(m: Model) -> Model:
        jdc.check_shardings(m, RULES)
        assert "f32[8@data,16@model]" in jdc.pformat(m.first.w)
        return m

    with jax.set_mesh(mesh):
        checked(placed)
        moved = jax.device_put(placed.first.w, NamedSharding(mesh, P("model", None)))
        edited = jdc.replace(placed, first=jdc.replace(placed.first, w=moved))
        with pytest.raises(jdc.ShardingDeclarationError) as caught:
            checked(edited)
    text = str(caught.value)
    assert text.startswith(
        "1 array does not carry its declared sharding (mesh {'data': 4, 'model': 2} from "
        "jax.set_mesh; rules"
    )
    assert "field 'w' of Dense at .first.w (f32[8@model,16]): has P('model', None), " \
        "declared P('data', 'model')" in text  # fmt: skip


@explicit
def test_check_shardings_inside_jit_under_auto_axes_says_it_cannot_tell() -> None:
    model, _ = init(jax.random.key(3))
    placed = jax.device_put(model, jdc.shardings(model, MESH, RULES))
    with pytest.raises(jdc.ShardingDeclarationError, match="explicit axes"):
        jax.jit(lambda m: jdc.check_shardings(m, RULES))(placed)


@jdc.pytree_dataclass
class Tower:
    """A frozen, sharded embedding (declared in both orders) under a trained head."""

    embed: jdc.Frozen[jdc.Sharded[jax.Array, "embed", "mlp"]]
    table: jdc.Sharded[jdc.Frozen[jax.Array], "mlp"]
    head: Dense

    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = jnp.tanh(x @ self.embed + self.table)
        return hidden @ self.head.w.T + self.head.b[:8]


def test_frozen_sharded_leaves_stay_put_and_in_place_through_training() -> None:
    k1, k2, k3 = jax.random.split(jax.random.key(2), 3)

    def make() -> Tower:
        head = Dense(jax.random.normal(k2, (8, 16)), jnp.zeros(16), jnp.ones(()))
        return Tower(jax.random.normal(k1, (8, 16)), jnp.ones(16), head)

    shardings = jdc.shardings(jax.eval_shape(make), MESH, RULES)
    tower = jax.jit(make, out_shardings=shardings)()
    mask = jdc.trainable(tower)
    assert mask == jdc.trainable(jdc.sharded_shapes(jax.eval_shape(make), MESH, RULES))
    assert jax.tree.leaves(mask) == [False, False, True, True, True]
    labels = jax.tree.map(lambda train: "train" if train else "frozen", mask)
    optimizer = optax.multi_transform(
        {"train": optax.adam(1e-2), "frozen": optax.set_to_zero()}, lambda _: labels
    )
    x = jax.device_put(jax.random.normal(k3, (32, 8)), NamedSharding(MESH, P("data")))

    @jax.jit
    def step(tower: Tower, state: optax.OptState) -> tuple[Tower, optax.OptState]:
        grads = jax.grad(lambda t: jnp.mean(t(x) ** 2))(tower)
        updates, state = optimizer.update(grads, state, tower)
        return optax.apply_updates(tower, updates), state

    trained, state = tower, optimizer.init(tower)
    for _ in range(3):
        trained, state = step(trained, state)
    assert trained.embed.sharding == NamedSharding(MESH, P("data", "model"))
    assert trained.table.sharding.spec == P("model")
    np.testing.assert_array_equal(trained.embed, tower.embed)
    np.testing.assert_array_equal(trained.table, tower.table)
    assert not np.array_equal(trained.head.w, tower.head.w)
    jdc.check_shardings(trained, RULES, mesh=MESH)
    assert "embed=Frozen(f32[8@data,16@model])" in repr(trained)
