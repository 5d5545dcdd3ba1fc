"""Mistakes users make moving code over (from 1.6, flax.struct, equinox, notebooks): each is
refused with a message that names the class and field and says what to do, never silently."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Weights:
    w: jax.Array
    scale: jdc.Static[float] = 1.0

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.w * x * self.scale


def test_a_block_without_with_is_refused() -> None:
    manager = jdc.copy_and_mutate(Weights(jnp.ones(2)))
    with pytest.raises(
        AttributeError,
        match=r"cannot assign to 'w': .*returns a context manager, not the copy of the Weights",
    ):
        manager.w = jnp.zeros(2)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"`with jdc.copy_and_mutate\(obj\) as copy:`"):
        manager.w  # type: ignore[attr-defined]  # noqa: B018
    with manager as copy:  # the manager itself still works
        copy.w = jnp.zeros(2)
    assert copy.w.tolist() == [0.0, 0.0]


def test_jit_of_a_callable_instance_names_the_unhashable_field_and_the_fix() -> None:
    model = Weights(jnp.ones(2))
    with pytest.raises(
        TypeError, match=r"cannot hash Weights: field 'w' holds a value of type"
    ) as info:
        jax.jit(model)(1.0)
    assert "jax.jit(type(model).__call__)(model, ...)" in str(info.value)
    assert jax.jit(type(model).__call__)(model, 2.0).tolist() == [2.0, 2.0]
    assert hash(Weights(1.0)) == hash(Weights(1.0))  # hashable fields still hash by value


def test_equinox_converters_are_refused_at_decoration() -> None:
    eqx = pytest.importorskip("equinox")
    with pytest.raises(TypeError, match=r"field 'w' of \S*Conv has a converter") as info:

        @jdc.pytree_dataclass
        class Conv:
            w: Any = eqx.field(converter=jnp.asarray)

    assert "convert in __init__ or __post_init__" in str(info.value)


def test_an_equinox_module_base_is_named() -> None:
    eqx = pytest.importorskip("equinox")
    with pytest.raises(
        TypeError, match=r"\S*Net subclasses equinox.Module.*Remove the eqx.Module base"
    ):

        @jdc.pytree_dataclass
        class Net(eqx.Module):
            w: jax.Array


def test_flax_leftovers_are_named() -> None:
    struct = pytest.importorskip("flax.struct")
    train_state = pytest.importorskip("flax.training.train_state")
    with pytest.raises(TypeError, match=r"already a flax dataclass.*remove @flax.struct.dataclass"):

        @jdc.pytree_dataclass
        @struct.dataclass
        class Decorated:
            x: jax.Array

    with pytest.raises(TypeError, match=r"subclasses flax.struct.PyTreeNode, which"):

        @jdc.pytree_dataclass
        class Node(struct.PyTreeNode):
            x: jax.Array

    with pytest.raises(TypeError, match=r"PyTreeNode \(through TrainState\).*for TrainState, see"):

        @jdc.pytree_dataclass
        class State(train_state.TrainState):
            extra: int = 0


def test_another_registration_is_named() -> None:
    with pytest.raises(ValueError, match=r"Registered is already registered with JAX"):

        @jdc.pytree_dataclass
        @jax.tree_util.register_dataclass
        @dataclasses.dataclass
        class Registered:
            x: jax.Array

    with pytest.raises(TypeError, match=r"Frozen is already a frozen dataclass: remove"):

        @jdc.pytree_dataclass
        @dataclasses.dataclass(frozen=True)
        class Frozen:
            x: jax.Array


def define_layer() -> type:
    @jdc.pytree_dataclass
    class Layer:
        w: jax.Array

    return Layer


def test_a_class_defined_again_is_named_as_a_different_class() -> None:
    old, new = define_layer(), define_layer()  # a notebook cell run twice
    again = r"Layer → a different class also named \S*Layer: the class was defined again"
    refused = pytest.raises(jdc.MutationValidationError, match=again)
    with jdc.copy_and_mutate(Weights(old(jnp.ones(2)))) as holder, refused:
        holder.w = new(jnp.ones(2))
    refused = pytest.raises(jdc.MutationValidationError, match=again)
    with refused, jdc.copy_and_mutate([old(jnp.ones(2))]) as layers:
        layers[0] = new(jnp.ones(2))  # into a list: checked when the block ends


@jdc.pytree_dataclass
class EnvParams:
    """A library's public base class, which its users extend."""

    gravity: float = 9.8


def test_a_subclass_decorated_with_flax_struct_names_the_decorator_and_the_fix() -> None:
    struct = pytest.importorskip("flax.struct")

    @struct.dataclass
    class CustomParams(EnvParams):
        wind: float = 0.0

    with pytest.raises(TypeError) as info:
        CustomParams()
    message = str(info.value)
    assert "CustomParams subclasses the pytree dataclass EnvParams" in message
    assert "decorated with @flax.struct.dataclass" in message and "'wind'" in message
    assert "@jdc.pytree_dataclass instead" in message


def test_a_subclass_decorated_with_a_frozen_dataclass_names_the_decorator_and_the_fix() -> None:
    @dataclasses.dataclass(frozen=True)
    class CustomParams(EnvParams):
        wind: float = 0.0

    with pytest.raises(TypeError, match=r"decorated with @dataclasses\.dataclass.*'wind'"):
        CustomParams()

    @jdc.pytree_dataclass
    class Fixed(EnvParams):
        wind: float = 0.0

    assert jax.tree.leaves(Fixed(wind=1.0)) == [9.8, 1.0]
