"""Pytree dataclasses through JAX transformations, control flow and tree utilities."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Params:
    w: jax.Array
    b: jax.Array
    activation: jdc.Static[str] = "tanh"


@jdc.pytree_dataclass
class Net:
    layers: tuple[Params, ...]
    extras: dict[str, Any]
    bias: jax.Array | None = None
    depth: jdc.Static[int] = 2


@jdc.pytree_dataclass
class OnlyStatic:
    n: jdc.Static[int]
    label: jdc.Static[str] = "x"


@jdc.pytree_dataclass
class Nothing:
    pass


def make_net() -> Net:
    key = jax.random.PRNGKey(0)
    k1, k2 = jax.random.split(key)
    return Net(
        layers=(
            Params(jax.random.normal(k1, (3, 3)), jnp.zeros(3)),
            Params(jax.random.normal(k2, (3, 3)), jnp.ones(3), "relu"),
        ),
        extras={"scale": jnp.float32(2.0), "history": [jnp.zeros(2), Nothing()]},
    )


def forward(net: Net, x: jax.Array) -> jax.Array:
    for layer in net.layers:
        y = layer.w @ x + layer.b
        x = jnp.tanh(y) if layer.activation == "tanh" else jax.nn.relu(y)
    return x * net.extras["scale"]


def test_jit_grad_value_and_grad() -> None:
    net, x = make_net(), jnp.arange(3.0)
    expected = forward(net, x)
    np.testing.assert_allclose(jax.jit(forward)(net, x), expected, rtol=1e-6)
    loss = lambda n: jnp.sum(forward(n, x) ** 2)  # noqa: E731
    grads = jax.grad(loss)(net)
    assert isinstance(grads, Net) and grads.layers[1].activation == "relu"
    assert grads.bias is None and grads.extras["history"][1] == Nothing()
    value, grads2 = jax.value_and_grad(loss)(net)
    np.testing.assert_allclose(value, loss(net), rtol=1e-6)
    np.testing.assert_allclose(grads2.layers[0].w, grads.layers[0].w, rtol=1e-6)
    eps = 1e-3
    bumped = jdc.replace(
        net, layers=(jdc.replace(net.layers[0], b=net.layers[0].b.at[0].add(eps)), net.layers[1])
    )
    numeric = (loss(bumped) - loss(net)) / eps
    np.testing.assert_allclose(grads.layers[0].b[0], numeric, rtol=5e-2)


def test_vmap_with_in_axes_given_as_an_instance() -> None:
    params = Params(jnp.ones((4, 3, 3)), jnp.zeros(3))
    axes = Params(0, None)  # type: ignore[arg-type]
    out = jax.vmap(lambda p: p.w @ jnp.ones(3) + p.b, in_axes=(axes,))(params)
    assert out.shape == (4, 3)
    batched = jax.vmap(lambda p: p)(Params(jnp.ones((5, 2)), jnp.zeros((5, 2)), "relu"))
    assert batched.w.shape == (5, 2) and batched.activation == "relu"


def test_scan_carry_cond_and_while_loop() -> None:
    params = Params(jnp.eye(2), jnp.zeros(2))

    def step(carry: Params, _: None) -> tuple[Params, jax.Array]:
        new = jdc.replace(carry, b=carry.b + 1)
        return new, jnp.sum(new.b)

    final, sums = lax.scan(step, params, None, length=3)
    np.testing.assert_array_equal(final.b, jnp.full(2, 3.0))
    np.testing.assert_array_equal(sums, jnp.array([2.0, 4.0, 6.0]))

    chosen = lax.cond(True, lambda p: jdc.replace(p, b=p.b - 1), lambda p: p, params)
    np.testing.assert_array_equal(chosen.b, -jnp.ones(2))

    looped = lax.while_loop(lambda p: p.b[0] < 5, lambda p: jdc.replace(p, b=p.b + 2), params)
    np.testing.assert_array_equal(looped.b, jnp.full(2, 6.0))


def test_tree_utilities_and_device_put() -> None:
    net = make_net()
    doubled = jax.tree.map(lambda v: v * 2, net)
    assert isinstance(doubled, Net) and doubled.depth == 2
    np.testing.assert_array_equal(doubled.layers[1].b, jnp.full(3, 2.0))
    placed = jax.device_put(net, jax.devices()[0])
    assert jax.tree_util.tree_structure(placed) == jax.tree_util.tree_structure(net)
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(placed))


def test_containers_inside_classes_and_classes_inside_containers() -> None:
    tree = {"nets": [make_net(), make_net()], "pair": (Params(1.0, 2.0), None)}  # type: ignore[arg-type]
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert jax.tree_util.tree_structure(rebuilt) == treedef
    assert jax.jit(lambda t: t)(tree)["pair"][0].activation == "tanh"


def test_no_fields_and_only_static_fields() -> None:
    assert jax.tree_util.tree_leaves(Nothing()) == []
    assert jax.jit(lambda n: n)(Nothing()) == Nothing()
    config = OnlyStatic(3)
    assert jax.tree_util.tree_leaves(config) == []
    assert jax.jit(lambda c, x: x * c.n)(config, 2.0) == 6.0


def test_equal_static_values_share_one_compilation() -> None:
    traces: list[str] = []

    @jax.jit
    def apply(p: Params, x: jax.Array) -> jax.Array:
        traces.append(p.activation)
        return p.w @ x

    x = jnp.ones(2)
    apply(Params(jnp.eye(2), jnp.zeros(2), "tanh"), x)
    apply(Params(jnp.ones((2, 2)), jnp.ones(2), "tan" + "h"), x)  # equal, not identical
    assert traces == ["tanh"]
    apply(Params(jnp.eye(2), jnp.zeros(2), "relu"), x)
    assert traces == ["tanh", "relu"]


def test_a_non_jax_child_names_its_key_path_under_jit() -> None:
    @jdc.pytree_dataclass
    class Holder:
        inner: Params

    holder = Holder(Params(jnp.ones(1), "oops"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"inner\.b"):
        jax.jit(lambda h: h)(holder)
