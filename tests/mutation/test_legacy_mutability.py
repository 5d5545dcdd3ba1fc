"""jax_dataclasses 1.6's private mutability API, as downstream libraries use it: import
`_Mutability` and `_mark_mutable` from `jax_dataclasses._copy_and_mutate`, mark a model
mutable in place, assign fields outside any block, restore the previous state."""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import pytest

import jax_dataclasses as jdc
from jax_dataclasses._copy_and_mutate import _mark_mutable, _Mutability


@jdc.pytree_dataclass
class Base:
    """A downstream library's base class declares the state itself, as 1.6 code does."""

    __mutability__: ClassVar[_Mutability] = _Mutability.FROZEN


@jdc.pytree_dataclass
class Link(Base):
    mass: jax.Array
    name: jdc.Static[str] = "link"


@jdc.pytree_dataclass
class Robot(Base):
    links: list[Link]
    base: Link


@jdc.pytree_dataclass
class Plain:
    x: Any


def robot() -> Robot:
    return Robot([Link(jnp.ones(2)), Link(jnp.ones(2), "arm")], Link(jnp.zeros(2), "base"))


def test_mark_mutable_assigns_outside_any_block_with_validation() -> None:
    model = robot()
    assert model.__mutability__ is _Mutability.FROZEN
    _mark_mutable(model, mutable=_Mutability.MUTABLE, visited=set())
    assert model.links[1].__mutability__ is _Mutability.MUTABLE
    model.links[1].mass = jnp.full(2, 3.0)  # nested, in place
    model.base.name = "torso"
    with pytest.raises(jdc.MutationValidationError, match=r"field 'mass' of Link .*shape"):
        model.links[0].mass = jnp.ones(3)
    with pytest.raises(
        dataclasses.FrozenInstanceError, match=r"'extra' of Link: it is not a field"
    ):
        model.base.extra = 1  # type: ignore[attr-defined]
    with pytest.warns(jdc.StaticFieldWarning, match=r"static field 'name' of Link: .*array"):
        model.base.name = jnp.ones(2)  # type: ignore[assignment]
    model.base.name = "torso"
    _mark_mutable(model, mutable=_Mutability.FROZEN, visited=set())
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"field 'mass' of Link"):
        model.links[0].mass = jnp.ones(2)
    assert model.links[1].mass.tolist() == [3.0, 3.0] and model.base.name == "torso"


def test_without_validation_anything_can_be_set_as_in_1_6() -> None:
    model = robot()
    _mark_mutable(model, mutable=_Mutability.MUTABLE_NO_VALIDATION, visited=set())
    model.links = [Link(jnp.ones(5))]
    assert len(jax.tree_util.tree_leaves(model)) == 2
    model.cache = 1  # type: ignore[attr-defined]  # 1.6 allowed it; JAX does not carry it
    assert model.cache == 1  # type: ignore[attr-defined]
    # New objects assigned in are not marked: 1.6 marked only what was there.
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.links[0].mass = jnp.ones(5)


def test_a_post_init_that_marks_itself_to_set_a_derived_attribute() -> None:
    @jdc.pytree_dataclass
    class Task(Base):  # a downstream pattern: derived callables cached on the instance
        gain: jax.Array

        def __post_init__(self) -> None:
            _mark_mutable(self, mutable=_Mutability.MUTABLE_NO_VALIDATION, visited=set())
            self._scaled = lambda x: self.gain * x
            _mark_mutable(self, mutable=_Mutability.FROZEN, visited=set())

    task = Task(jnp.full(2, 3.0))
    assert task._scaled(2.0).tolist() == [6.0, 6.0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.gain = jnp.ones(2)


def test_marks_win_over_an_ended_block_in_a_copied_context() -> None:
    with jdc.copy_and_mutate(robot()) as copy:
        context = contextvars.copy_context()  # as a task started inside the block would
    _mark_mutable(copy, mutable=_Mutability.MUTABLE, visited=set())

    def assign() -> None:
        copy.base.name = "marked"

    context.run(assign)
    assert copy.base.name == "marked"


def test_restore_the_previous_state_after_an_exception() -> None:
    model = robot()

    def edit(obj: Robot) -> None:
        previous = obj.__mutability__
        _mark_mutable(obj, mutable=_Mutability.MUTABLE, visited=set())
        try:
            obj.base.mass = jnp.ones(3)  # fails validation
        finally:
            _mark_mutable(obj, mutable=previous, visited=set())

    with pytest.raises(AssertionError):
        edit(model)
    assert model.base.__mutability__ is _Mutability.FROZEN
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.base.mass = jnp.ones(2)


def test_visited_is_shared_between_calls() -> None:
    first, second = robot(), robot()
    visited: set[int] = set()
    _mark_mutable(first, mutable=_Mutability.MUTABLE, visited=visited)
    _mark_mutable(first, mutable=_Mutability.FROZEN, visited=visited)  # already visited: no-op
    assert first.__mutability__ is _Mutability.MUTABLE
    _mark_mutable(second, mutable=_Mutability.MUTABLE, visited=visited)
    assert second.links[0].__mutability__ is _Mutability.MUTABLE
    assert id(second.links[0]) in visited


def test_transformations_after_freezing_again() -> None:
    model = robot()
    _mark_mutable(model, mutable=_Mutability.MUTABLE, visited=set())
    model.links[0].mass = jnp.full(2, 2.0)
    _mark_mutable(model, mutable=_Mutability.FROZEN, visited=set())
    total = jax.jit(lambda r: sum(link.mass.sum() for link in r.links))(model)
    assert total == 6.0
    batched = jax.vmap(lambda r: r)(jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), model))
    assert batched.links[0].mass.shape == (2, 2)
    assert batched.__mutability__ is _Mutability.FROZEN  # rebuilt objects are not marked
    assert jax.tree_util.tree_structure(model) == jax.tree_util.tree_structure(robot())


def test_every_pytree_dataclass_reads_frozen() -> None:
    assert Plain(1.0).__mutability__ is _Mutability.FROZEN  # type: ignore[attr-defined]
    plain = Plain(1.0)
    _mark_mutable(plain, mutable=_Mutability.MUTABLE, visited=set())
    plain.x = 2.0
    assert plain.x == 2.0


def test_slots_classes_cannot_be_marked() -> None:
    @jdc.pytree_dataclass(slots=True)
    class Slotted:
        x: Any

    with pytest.raises(TypeError, match=r"cannot mark \S*Slotted mutable.*copy_and_mutate"):
        _mark_mutable(Slotted(1.0), mutable=_Mutability.MUTABLE, visited=set())
