"""Checkpoints of a class that changed, one step off the paths `test_checkpoint_evolution.py`
walks (issue 37): an added field's copies inside an optimizer state, shapes and dtypes through
flax, an added field inside a stacked field, a child that became static, lists whose length
changed. Each restore is exact or refused naming class, field and key path.

The checkpoints are written here, by the classes as they were (`*V1`), as flax state dicts and
bytes, orbax metadata, and 1.6's layout (`jdc.v1_6_layout` of the tree is what 1.6 saved).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_dataclasses as jdc

serialization = pytest.importorskip("flax.serialization")
optax = pytest.importorskip("optax")


def metadata_of(tree: Any) -> Any:
    """What orbax's metadata says of a checkpoint of `tree`: its state dict, each array as a
    shape and dtype."""
    return jax.tree.map(
        lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), np.asarray(leaf).dtype),
        serialization.to_state_dict(tree),
    )


def orbax_restore(path: Path, tree: Any, abstract: Any, into: Any) -> Any:
    """`tree`, saved by orbax, restored through `saved_layout(abstract)` and
    `from_saved_layout(into)`."""
    ocp = pytest.importorskip("orbax.checkpoint")
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(path, tree)
        checkpointer.wait_until_finished()
        metadata = checkpointer.metadata(path)
        restored = checkpointer.restore(path, jdc.saved_layout(abstract, metadata))
    return jdc.from_saved_layout(into, restored)


# -- 1. an added field's copies: what the optimizer holds, not the class default ---------------


@jdc.pytree_dataclass
class NetV1:
    w: jax.Array


@jdc.pytree_dataclass
class Net:
    w: jax.Array
    s: jax.Array = jnp.ones(4)
    __jdc_evolution__ = jdc.Evolution(added=["s"])


TX = optax.adam(1e-3)
V1 = NetV1(jnp.arange(4.0))


def after_one_step(state: tuple[Net, Any]) -> Net:
    net, opt = state
    grads = jax.tree.map(jnp.ones_like, net)
    updates, _ = TX.update(grads, opt, net)
    return optax.apply_updates(net, updates)


def check_as_fresh(restored: tuple[Net, Any]) -> None:
    """The added field's moments are adam's zeros, so the first step moves it as it moves a
    freshly initialized one."""
    net, (adam, _) = restored
    np.testing.assert_array_equal(net.w, V1.w)
    np.testing.assert_array_equal(net.s, np.ones(4))
    np.testing.assert_array_equal(adam.mu.s, np.zeros(4))
    np.testing.assert_array_equal(adam.nu.s, np.zeros(4))
    fresh = Net(jnp.asarray(V1.w))
    expected = after_one_step((fresh, TX.init(fresh))).s
    np.testing.assert_array_equal(after_one_step(restored).s, expected)


def test_an_added_fields_moments_hold_what_tx_init_gives_through_flax() -> None:
    target = Net(jnp.zeros(4))
    data = serialization.to_bytes((V1, TX.init(V1)))
    check_as_fresh(serialization.from_bytes((target, TX.init(target)), data))


@pytest.mark.subprocess  # orbax writes and reads with threads of its own
def test_an_added_fields_moments_hold_what_tx_init_gives_through_orbax(tmp_path: Path) -> None:
    target = Net(jnp.zeros(4))
    into = (target, TX.init(target))
    abstract = jax.eval_shape(lambda: into)
    check_as_fresh(orbax_restore(tmp_path / "ckpt", (V1, TX.init(V1)), abstract, into))


def test_an_added_fields_moments_hold_what_tx_init_gives_through_the_1_6_layout() -> None:
    target = Net(jnp.zeros(4))
    saved_by_1_6 = jdc.v1_6_layout((V1, TX.init(V1)))
    check_as_fresh(jdc.from_v1_6_layout((target, TX.init(target)), saved_by_1_6))


def test_an_abstract_optimizer_state_cannot_give_an_added_field_its_value() -> None:
    """Only a target holding values says what the optimizer holds: refused, by key path."""
    abstract = jax.eval_shape(lambda: (Net(jnp.zeros(4)), TX.init(Net(jnp.zeros(4)))))
    state = serialization.to_state_dict((V1, TX.init(V1)))
    with pytest.raises(ValueError) as caught:
        jdc.from_saved_layout(abstract, state)
    message = str(caught.value)
    assert message.startswith("cannot restore field 's' of Net at key path [1][0].mu:")
    assert "inside an optimizer state" in message and "tx.init(model)" in message
    with pytest.raises(ValueError) as caught:
        jdc.from_v1_6_layout(abstract, jdc.v1_6_layout((V1, TX.init(V1))))
    assert str(caught.value).startswith("cannot restore field 's' of Net at key path [1][0].mu:")
    with pytest.raises(ValueError) as caught:
        serialization.from_state_dict(abstract, state)
    message = str(caught.value)
    assert message.startswith("cannot restore field 's' of Net at path './0':")
    assert "does not say whether the class is inside an optimizer state" in message
    # The model's own field, outside any optimizer state: its default.
    restored = jdc.from_saved_layout(abstract[0], state["0"])
    np.testing.assert_array_equal(restored.s, np.ones(4))


# -- 2. flax: shapes and dtypes of a class that declares its changes ---------------------------


@jdc.pytree_dataclass
class Layer:
    kernel: jax.Array
    bias: jax.Array = jnp.zeros(())
    __jdc_evolution__ = jdc.Evolution(added=["bias"], renamed={"kernel": "w"})


@pytest.mark.parametrize(
    ("saved", "now", "change"),
    [
        (np.zeros(4, np.float32), jnp.zeros(5), "shape (4,) in the state dict, (5,) in the target"),
        (
            np.zeros(4, np.float32),
            jnp.zeros(4, jnp.bfloat16),
            "dtype float32 in the state dict, bfloat16 in the target",
        ),
        (
            np.zeros(4, np.int32),
            jnp.zeros(4),
            "dtype int32 in the state dict, float32 in the target",
        ),
    ],
    ids=["shape", "f32 to bf16", "i32 to f32"],
)
def test_flax_refuses_a_changed_array_in_a_class_that_declares_its_changes(
    saved: np.ndarray, now: jax.Array, change: str
) -> None:
    data = serialization.msgpack_serialize({"layers": {"0": {"w": saved}}})
    with pytest.raises(ValueError) as caught:
        serialization.from_bytes({"layers": [Layer(now)]}, data)
    message = str(caught.value)
    assert message.startswith(
        f"the array at path './layers/0/w' (in a Layer, which declares how it changed) has {change}."
    )
    assert "restore into a target of the checkpoint's shapes and dtypes" in message


def test_flax_keeps_its_own_rule_for_a_class_that_declares_no_change() -> None:
    """As in flax and 1.6, the target supplies the structure, not the shapes."""
    restored = serialization.from_state_dict(NetV1(jnp.zeros(3)), {"w": np.ones((2, 5))})
    assert restored.w.shape == (2, 5)


# -- 3. order in 1.6's positional layout ------------------------------------------------------


@jdc.pytree_dataclass
class PairV1:
    a: jax.Array
    b: jax.Array


def test_a_class_that_declares_its_changes_declares_its_1_6_order() -> None:
    """Positions cannot show a reorder: without the order 1.6 saved, refused; with it, exact."""

    @jdc.pytree_dataclass
    class Pair:
        b: jax.Array
        a: jax.Array
        c: jax.Array = jnp.zeros(2)
        __jdc_evolution__ = jdc.Evolution(added=["c"])

    saved = jdc.v1_6_layout(PairV1(jnp.zeros(2), jnp.ones(2)))
    target = Pair(jnp.full(2, 5.0), jnp.full(2, 5.0))
    with pytest.raises(ValueError) as caught:
        jdc.from_v1_6_layout(target, saved)
    message = str(caught.value)
    assert message.startswith("cannot restore test_a_class_that_declares_its_changes_declares_")
    assert "jdc.Evolution(..., v1_6_order=['b', 'a'])" in message
    with pytest.raises(ValueError, match="v1_6_order"):
        jdc.v1_6_layout(target)

    @jdc.pytree_dataclass
    class PairOrdered:
        b: jax.Array
        a: jax.Array
        c: jax.Array = jnp.zeros(2)
        __jdc_evolution__ = jdc.Evolution(added=["c"], v1_6_order=["a", "b"])

    ordered = PairOrdered(jnp.full(2, 5.0), jnp.full(2, 5.0))
    assert [np.shape(x) for x in jdc.v1_6_layout(ordered)] == [(2,), (2,)]
    restored = jdc.from_v1_6_layout(ordered, saved)
    np.testing.assert_array_equal(restored.a, np.zeros(2))
    np.testing.assert_array_equal(restored.b, np.ones(2))


def test_a_1_6_order_that_is_not_an_order_of_the_saved_fields_is_refused() -> None:
    with pytest.raises(TypeError) as caught:

        @jdc.pytree_dataclass
        class Pair:
            a: jax.Array
            b: jax.Array
            c: jax.Array = jnp.zeros(2)
            __jdc_evolution__ = jdc.Evolution(added=["c"], v1_6_order=["a", "c"])

    assert (
        "v1_6_order ('a', 'c') of test_a_1_6_order_that_is_not_an_order_of_the_saved_fields_is_"
        "refused.<locals>.Pair is not an order of the fields 1.6 saved ('a', 'b'"
    ) in str(caught.value)


# -- 4. an added field inside a stacked field ---------------------------------------------------


@jdc.pytree_dataclass
class BlockV1:
    w: jax.Array


@jdc.pytree_dataclass
class Block:
    w: jax.Array
    gain: jax.Array = jnp.ones(())
    __jdc_evolution__ = jdc.Evolution(added=["gain"])


@jdc.pytree_dataclass
class StackV1:
    layers: jdc.Sharded[BlockV1, "layers"]  # noqa: F821, UP037 (an axis name, not a type)


@jdc.pytree_dataclass
class Stack:
    layers: jdc.Sharded[Block, "layers"]  # noqa: F821, UP037 (an axis name, not a type)


def stacked(block: type, n: int = 3) -> Any:
    return jax.vmap(lambda i: block(jnp.full(2, i)))(jnp.arange(float(n)))


def test_an_added_default_inside_a_stacked_field_is_stacked_and_placed() -> None:
    saved = StackV1(stacked(BlockV1))
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    abstract = jax.tree.map(
        lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device),
        jax.eval_shape(lambda: Stack(stacked(Block))),
    )
    assert set(jdc.saved_layout(abstract, metadata_of(saved))["layers"]) == {"w"}
    for restored in (
        jdc.from_saved_layout(abstract, serialization.to_state_dict(saved)),
        jdc.from_v1_6_layout(abstract, jdc.v1_6_layout(saved)),
    ):
        assert restored.layers.gain.shape == (3,) and restored.layers.gain.sharding == device
        np.testing.assert_array_equal(restored.layers.gain, np.ones(3))
        np.testing.assert_array_equal(restored.layers.w, saved.layers.w)
        total, _ = jax.lax.scan(
            lambda c, b: (c + b.gain * b.w, None), jnp.zeros(2), restored.layers
        )
        np.testing.assert_array_equal(total, [3.0, 3.0])


def test_an_added_default_that_does_not_fit_the_target_is_refused() -> None:
    @jdc.pytree_dataclass
    class Wide:
        w: jax.Array
        gain: jax.Array = jnp.ones(3)
        __jdc_evolution__ = jdc.Evolution(added=["gain"])

    abstract = jax.eval_shape(lambda: {"wide": Wide(jnp.zeros(2), jnp.ones(2))})
    with pytest.raises(ValueError) as caught:
        jdc.from_saved_layout(abstract, {"wide": {"w": np.zeros(2, np.float32)}})
    message = str(caught.value)
    assert message.startswith(
        "cannot give field 'gain' of test_an_added_default_that_does_not_fit_the_target_is_"
        "refused.<locals>.Wide at key path ['wide'] its default"
    )
    assert "float32[3]" in message and "float32[2]" in message
    assert "Give the field a default that does" in message


# -- 5. a child that became static ---------------------------------------------------------------


@jdc.pytree_dataclass
class AttentionV1:
    w: jax.Array
    n_heads: jax.Array


@jdc.pytree_dataclass
class AttentionUndeclared:
    w: jax.Array
    n_heads: jdc.Static[int] = 4


def test_a_child_that_became_static_declares_its_entry_removed() -> None:
    """A static field is never saved, so its name cannot be ambiguous: it can be `removed`."""

    @jdc.pytree_dataclass
    class Attention:
        w: jax.Array
        n_heads: jdc.Static[int] = 4
        __jdc_evolution__ = jdc.Evolution(removed=["n_heads"])

    saved = AttentionV1(jnp.arange(3.0), jnp.asarray(8))
    target = Attention(jnp.zeros(3), n_heads=2)
    restored = serialization.from_bytes(target, serialization.to_bytes(saved))
    assert restored.n_heads == 2  # static: from the target
    np.testing.assert_array_equal(restored.w, saved.w)
    state = serialization.to_state_dict(saved)
    assert set(jdc.saved_layout(target, metadata_of(saved))) == {"w", "n_heads"}
    np.testing.assert_array_equal(jdc.from_saved_layout(target, state).w, saved.w)


def test_an_undeclared_child_that_became_static_says_to_declare_it_removed() -> None:
    saved = AttentionV1(jnp.arange(3.0), jnp.asarray(8))
    target = AttentionUndeclared(jnp.zeros(3))
    with pytest.raises(ValueError) as caught:
        serialization.from_state_dict(target, serialization.to_state_dict(saved))
    message = str(caught.value)
    assert "AttentionUndeclared at path '.' has unknown field(s) 'n_heads'" in message
    assert "jdc.Evolution(removed=['n_heads'])" in message
    with pytest.raises(ValueError) as caught:
        jdc.saved_layout(target, metadata_of(saved))
    assert (
        "- .n_heads: the checkpoint's entry 'n_heads' is not a field of AttentionUndeclared "
        "(field 'n_heads' is static now, so not saved: declare its entry removed)"
    ) in str(caught.value)


# -- 6. a list whose length changed ------------------------------------------------------------


@jdc.pytree_dataclass
class Deep:
    layers: list[NetV1]


def deep(n: int) -> Deep:
    return Deep([NetV1(jnp.full(2, float(i))) for i in range(n)])


@pytest.mark.parametrize(("saved", "now"), [(3, 2), (2, 3)], ids=["shrunk", "grown"])
def test_a_list_whose_length_changed_is_one_difference_without_an_evolution_to_declare(
    saved: int, now: int
) -> None:
    with pytest.raises(ValueError) as caught:
        jdc.saved_layout(deep(now), metadata_of(deep(saved)))
    assert str(caught.value).splitlines() == [
        "the checkpoint does not fit the target: 1 difference:",
        f"- .layers: a list of {saved} in the checkpoint, of {now} in the target (a list's length "
        "is not a class change that a jdc.Evolution declares: build the target with the "
        "checkpoint's length)",
    ]
    with pytest.raises(ValueError) as caught:
        serialization.from_state_dict(deep(now), serialization.to_state_dict(deep(saved)))
    assert str(caught.value) == (
        f"the list at path './layers' has {now} entries in the target and {saved} in the state "
        "dict. A list's length is not a class change that a jdc.Evolution declares: build the "
        "target with the state dict's length."
    )


def test_a_1_6_order_is_part_of_the_value() -> None:
    evolution = jdc.Evolution(added=["c"], v1_6_order=["b", "a"])
    assert repr(evolution) == (
        "Evolution(added=('c',), renamed={}, removed=(), v1_6_order=('b', 'a'))"
    )
    assert pickle.loads(pickle.dumps(evolution)) == evolution
    assert evolution != jdc.Evolution(added=["c"], v1_6_order=["a", "b"])
    assert (jdc.Evolution(v1_6_order=["a"]) | jdc.Evolution(added=["c"])).v1_6_order == ("a",)
    with pytest.raises(TypeError, match="takes field names"):
        jdc.Evolution(v1_6_order=[3])
