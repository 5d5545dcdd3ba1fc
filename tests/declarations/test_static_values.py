"""Values in static fields: arrays refused, uncacheable values warned about (docs/design/core.md)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import warnings
from collections import namedtuple
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Holder:
    x: Any
    meta: jdc.Static[Any] = None


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass(frozen=True)
class FrozenConfig:
    depth: int
    names: tuple[str, ...] = ()


Point = namedtuple("Point", "x y")


@pytest.mark.parametrize(
    "value",
    [
        1,
        2.5,
        "s",
        None,
        True,
        (1, ("a", 2.0)),
        frozenset({1, 2}),
        math.sqrt,
        len,
        Color.RED,
        FrozenConfig(2, ("a",)),
        Point(1, 2),
        jnp.float32,
        np.dtype("float32"),
        np.float32(1.0),
        functools,
        int,
    ],
)
def test_good_static_values_pass_silently(value: object) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        holder = Holder(1.0, value)
    assert holder.meta is value


def fresh_holder() -> type:
    """A new class per test: StaticFieldWarning is emitted once per class and field."""

    @jdc.pytree_dataclass
    class Fresh:
        x: Any
        meta: jdc.Static[Any] = None

    return Fresh


@pytest.mark.parametrize(
    "value", [jnp.ones(2), np.ones(2), (1, jnp.zeros(2)), (("nested", (np.zeros(1),)),)]
)
def test_concrete_arrays_in_static_fields_warn_as_1_6_accepted_them(value: object) -> None:
    cls = fresh_holder()
    with pytest.warns(
        jdc.StaticFieldWarning, match=r"static field 'meta' of \S*Fresh: .*array"
    ) as caught:
        holder = cls(1.0, value)
    assert holder.meta is value
    assert "that comparison raises an error" in str(caught[0].message)
    assert "Store a tuple (tuple(array.tolist())) or make the field a child" in str(
        caught[0].message
    )


def test_an_array_in_a_static_field_works_while_it_is_the_same_object() -> None:
    # A published library passes `mask_idxs=np.arange(n)` to a Static field, as 1.6.3 allowed.
    cls = fresh_holder()
    mask = np.arange(2)
    with pytest.warns(jdc.StaticFieldWarning):
        first = cls(jnp.ones(3), mask)
    compiles: list[object] = []

    @jax.jit
    def pick(holder: Any) -> jax.Array:
        compiles.append(holder.meta)
        return holder.x[holder.meta]

    assert pick(first).tolist() == [1.0, 1.0]
    assert pick(cls(jnp.zeros(3), mask)).tolist() == [0.0, 0.0]
    assert len(compiles) == 1  # the same object: equal, cached
    with pytest.raises(ValueError):  # what the warning foretold
        pick(cls(jnp.zeros(3), np.arange(2)))


@pytest.mark.parametrize(
    ("metadata", "fix"),
    [
        ({"pytree_node": False}, "remove pytree_node=False from its field metadata"),
        ({"pytree_node": 0}, "remove pytree_node=0 from its field metadata"),
        ({"static": True}, "remove static=True from its field metadata"),
        ({"__jax_dataclasses_static_field__": True}, "stop using jdc.static_field()"),
    ],
)
def test_a_tracer_in_a_field_static_by_metadata_says_which_metadata(
    metadata: dict[str, object], fix: str
) -> None:
    @jdc.pytree_dataclass
    class Gains:
        kp: jax.Array = dataclasses.field(metadata=metadata)

    with pytest.raises(
        TypeError, match=r"static field 'kp' of \S*Gains holds a traced array"
    ) as info:
        jax.jit(Gains)(jnp.ones(3))
    assert fix in str(info.value)


def test_tracers_in_static_fields_are_refused() -> None:
    @jax.jit
    def build(x: jax.Array) -> jax.Array:
        Holder(x, x)
        return x

    with pytest.raises(
        TypeError, match=r"static field 'meta' of Holder holds a traced array"
    ) as info:
        build(jnp.ones(1))
    assert "remove Static[...] from its annotation" in str(info.value)


def test_tuples_of_concrete_0d_arrays_work_under_jit() -> None:
    # Downstream code stores `tuple(jnp.argwhere(mask).ravel())` in a static field.
    indices = tuple(jnp.argwhere(jnp.array([True, False, True])).ravel())
    compiles: list[object] = []

    @jax.jit
    def pick(holder: Holder) -> jax.Array:
        compiles.append(holder.meta)
        return holder.x[jnp.asarray(holder.meta)]

    with pytest.warns(jdc.StaticFieldWarning, match=r"static field 'meta' of Holder: .*0-d"):
        first = Holder(jnp.arange(3.0), indices)
    assert pick(first).tolist() == [0.0, 2.0]
    same = Holder(jnp.arange(3.0) + 1, tuple(jnp.argwhere(jnp.array([True, False, True])).ravel()))
    assert pick(same).tolist() == [1.0, 3.0] and len(compiles) == 1  # equal by value: cached
    assert jax.tree_util.tree_leaves(same)[0].shape == (3,)


def test_0d_tracers_in_static_fields_are_refused() -> None:
    @jax.jit
    def build(x: jax.Array) -> jax.Array:
        Holder(x, (1, x[0]))
        return x

    with pytest.raises(TypeError, match=r"static field 'meta' of Holder holds a traced array"):
        build(jnp.ones(1))


def test_replace_also_checks() -> None:
    cls = fresh_holder()
    with pytest.warns(jdc.StaticFieldWarning, match=r"static field 'meta' of \S*Fresh"):
        jdc.replace(cls(1.0), meta=np.zeros(1))


@pytest.mark.parametrize(
    ("factory", "problem"),
    [
        (lambda: [1, 2], "not hashable"),
        (lambda: {"a": 1}, "not hashable"),
        (lambda: (1, [2]), "not hashable"),
        (lambda: object(), "hashes by identity"),
        (lambda: FrozenConfig(1, ([1],)), "not hashable"),  # type: ignore[arg-type]
        (lambda: jnp.asarray(3), "0-d array"),
        (lambda: np.asarray(3.0), "0-d array"),
        (lambda: (jnp.asarray(1), jnp.asarray(4)), "0-d array"),
    ],
)
def test_uncacheable_values_warn_once_per_class_and_field(factory: Any, problem: str) -> None:
    @jdc.pytree_dataclass
    class Fresh:  # a new class per case, so "once" starts afresh
        a: jdc.Static[Any]
        b: jdc.Static[Any] = None

    with pytest.warns(jdc.StaticFieldWarning, match=rf"static field 'a' of \S*Fresh: .*{problem}"):
        Fresh(factory())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Fresh(factory())  # the same class and field: no second warning
    with pytest.warns(jdc.StaticFieldWarning, match=r"static field 'b'"):
        Fresh(1, factory())


def test_the_warning_can_become_an_error() -> None:
    @jdc.pytree_dataclass
    class Strict:
        a: jdc.Static[Any]

    with warnings.catch_warnings():
        warnings.simplefilter("error", jdc.StaticFieldWarning)
        for _ in range(2):  # an error every time, not just the first
            with pytest.raises(jdc.StaticFieldWarning):
                Strict([1])
    assert issubclass(jdc.StaticFieldWarning, UserWarning)


def test_post_init_changes_are_checked() -> None:
    @jdc.pytree_dataclass
    class Normalising:
        shape: jdc.Static[Any]

        def __post_init__(self) -> None:
            object.__setattr__(self, "shape", jnp.asarray(self.shape))

    with pytest.warns(jdc.StaticFieldWarning, match=r"static field 'shape' of \S*Normalising"):
        Normalising((1, 2))
    with pytest.raises(TypeError, match=r"static field 'shape' of \S*Normalising holds a traced"):
        jax.jit(lambda n: Normalising(n).shape)(2)


def test_the_warning_points_at_the_users_line() -> None:
    @jdc.pytree_dataclass
    class Generated:
        a: jdc.Static[Any]

    @jdc.pytree_dataclass
    class PostInit:
        a: jdc.Static[Any]

        def __post_init__(self) -> None:
            pass

    @jdc.pytree_dataclass
    class OwnInit:
        a: jdc.Static[Any]

        def __init__(self, a: Any) -> None:
            self.a = a

    for cls in (Generated, PostInit, OwnInit):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cls([1])
        assert [w.filename for w in caught] == [__file__], cls
