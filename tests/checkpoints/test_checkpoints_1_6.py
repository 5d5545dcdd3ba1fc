"""Checkpoints written with jax_dataclasses 1.6 load into the same classes.

1.6 registered each class with `jax.tree_util.register_pytree_node` (no keys), flattening the
fields `__init__` takes (children in field order, static values as aux data) and leaving
`init=False` fields out; its flax state dicts held the same children by name. `Legacy*`
below are registered exactly that way, so what they write is what 1.6 wrote (checked against
jax_dataclasses 1.6.3 itself: the same orbax tree metadata and flax state dicts).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import Layer

import jax_dataclasses as jdc

serialization = pytest.importorskip("flax.serialization")
ocp = pytest.importorskip("orbax.checkpoint")


@jdc.pytree_dataclass
class Model:
    encoder: Layer
    heads: list[Layer]
    steps: jax.Array = dataclasses.field(init=False)
    name: jdc.Static[str] = "model"

    def __post_init__(self) -> None:
        self.steps = jnp.zeros((), jnp.int32)


def _register_as_1_6(cls: type, children: list[str], statics: list[str]) -> None:
    def flatten(obj: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        return tuple(getattr(obj, n) for n in children), tuple(getattr(obj, n) for n in statics)

    def unflatten(aux: tuple[Any, ...], values: tuple[Any, ...]) -> Any:
        return cls(
            **dict(zip(children, values, strict=True)), **dict(zip(statics, aux, strict=True))
        )

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)
    serialization.register_serialization_state(
        cls,
        lambda obj: {n: serialization.to_state_dict(getattr(obj, n)) for n in children},
        lambda target, state: target,  # only used to write
    )


@dataclasses.dataclass(frozen=True)
class LegacyLayer:
    w: jax.Array
    b: jax.Array
    activation: str = "tanh"


@dataclasses.dataclass(frozen=True)
class LegacyModel:
    encoder: LegacyLayer
    heads: list[LegacyLayer]
    steps: jax.Array = dataclasses.field(init=False, default=None)  # type: ignore[assignment]
    name: str = "model"


_register_as_1_6(LegacyLayer, ["w", "b"], ["activation"])
_register_as_1_6(LegacyModel, ["encoder", "heads"], ["name"])


def saved_model() -> LegacyModel:
    return LegacyModel(
        LegacyLayer(jnp.arange(6.0).reshape(2, 3), jnp.ones(3)),
        [LegacyLayer(jnp.eye(3), jnp.full(3, 2.0), "relu")],
    )


def target_model() -> Model:
    return Model(
        Layer(jnp.zeros((2, 3)), jnp.zeros(3)), [Layer(jnp.zeros((3, 3)), jnp.zeros(3), "relu")]
    )


def assert_restored(restored: Model) -> None:
    assert type(restored) is Model and type(restored.heads[0]) is Layer
    np.testing.assert_array_equal(restored.encoder.w, np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(restored.heads[0].b, np.full(3, 2.0))
    assert restored.heads[0].activation == "relu" and restored.steps == 0


def test_orbax_checkpoint_written_by_1_6_restores_through_its_layout(tmp_path: Path) -> None:
    directory = tmp_path / "checkpoint"
    target = target_model()
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(directory, saved_model())
        checkpointer.wait_until_finished()
        with pytest.raises(ValueError):  # the keyed layout does not match 1.6's
            checkpointer.restore(directory, jax.tree.map(ocp.utils.to_shape_dtype_struct, target))
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        restored = checkpointer.restore(directory, jdc.v1_6_layout(abstract))
        untargeted = checkpointer.restore(directory)
    assert_restored(jdc.from_v1_6_layout(target, restored))
    assert_restored(jdc.from_v1_6_layout(target, untargeted))


def test_v1_6_layout_is_what_1_6_flattened() -> None:
    legacy = saved_model()
    ours = Model(
        Layer(legacy.encoder.w, legacy.encoder.b), [Layer(legacy.heads[0].w, legacy.heads[0].b)]
    )
    layout = jdc.v1_6_layout(ours)
    assert [id(x) for x in jax.tree.leaves(layout)] == [id(x) for x in jax.tree.leaves(legacy)]
    assert jax.tree.structure(layout) == jax.tree.structure([[0, 0], [[0, 0]]])


def test_a_checkpoint_of_another_layout_names_the_class_and_key_path() -> None:
    with pytest.raises(ValueError, match=r"Layer at key path \.encoder from a 1.6 .*3 entries"):
        jdc.from_v1_6_layout(target_model(), [[1, 2, 3], [[1, 2]]])
    with pytest.raises(ValueError, match=r"list at key path \.heads .*1 entries, the checkpoint 2"):
        jdc.from_v1_6_layout(target_model(), [[1, 2], [[1, 2], [3, 4]]])


def test_flax_state_dict_written_by_1_6_restores_init_false_fields_from_the_target() -> None:
    state = serialization.to_state_dict(saved_model())  # 1.6 left `steps` out
    assert set(state) == {"encoder", "heads"}
    restored = serialization.from_state_dict(target_model(), state)
    assert_restored(restored)
    from_bytes = serialization.from_bytes(target_model(), serialization.to_bytes(saved_model()))
    assert_restored(from_bytes)


def test_flax_state_missing_an_init_field_is_still_an_error() -> None:
    state = dict(serialization.to_state_dict(saved_model()))
    del state["encoder"]
    with pytest.raises(ValueError, match=r"Model at path .*missing field\(s\) 'encoder'"):
        serialization.from_state_dict(target_model(), state)


# 1.6 read only its own static marks: a field that another library's metadata makes static
# (here, and in flax or equinox) was one of its children, and its checkpoints hold it.
@jdc.pytree_dataclass
class Gains:
    kp: jax.Array
    kd: float = dataclasses.field(default=0.5, metadata={"pytree_node": False})
    order: int = dataclasses.field(default=2, metadata={"static": True})
    clip: jdc.Static[float] = 1.0


@dataclasses.dataclass(frozen=True)
class LegacyGains:
    kp: jax.Array
    kd: float = 0.5
    order: int = 2
    clip: float = 1.0


_register_as_1_6(LegacyGains, ["kp", "kd", "order"], ["clip"])


def restored_as_1_6_wrote(tmp_path: Path, saved: Any, target: Any) -> tuple[Any, Any]:
    """`saved` (a `Legacy*` object) written as 1.6 wrote it, restored into `target`: from an
    orbax checkpoint (through `v1_6_layout`) and from a flax state dict."""
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "checkpoint", saved)
        checkpointer.wait_until_finished()
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        restored = checkpointer.restore(tmp_path / "checkpoint", jdc.v1_6_layout(abstract))
    from_orbax = jdc.from_v1_6_layout(target, restored)
    from_flax = serialization.from_state_dict(target, serialization.to_state_dict(saved))
    return from_orbax, from_flax


def test_fields_static_only_by_other_metadata_were_saved_by_1_6(tmp_path: Path) -> None:
    saved = LegacyGains(jnp.arange(3.0), kd=0.25, order=3, clip=4.0)
    target = Gains(jnp.zeros(3), kd=0.75, order=5, clip=9.0)
    assert jax.tree.structure(jdc.v1_6_layout(target)) == jax.tree.structure([0, 0, 0])
    for gains in restored_as_1_6_wrote(tmp_path, saved, target):
        np.testing.assert_array_equal(gains.kp, np.arange(3.0))
        assert (gains.kd, gains.order, gains.clip) == (0.75, 5, 9.0)  # static: the target's


def test_static_field_was_static_to_1_6_too() -> None:
    with pytest.warns(DeprecationWarning):

        @jdc.pytree_dataclass
        class Old:
            kp: jax.Array
            order: int = jdc.static_field(default=2)

    old = Old(jnp.zeros(3))
    layout = jdc.v1_6_layout(old)
    assert len(layout) == 1 and layout[0] is old.kp
    with pytest.raises(ValueError, match=r"Old at path .*unknown field\(s\) 'bogus'"):
        serialization.from_state_dict(Old(jnp.zeros(3)), {"kp": np.zeros(3), "bogus": 1})


def solver_with_a_local_alias() -> type:
    """A class whose `Static` alias is local to the function defining it. Under the future
    import (this module's), 1.6.3's reading of annotations (`get_type_hints`, then its
    partial fallback, with module globals only) could not see the alias: it saved `iters` as a
    child (checked against jax_dataclasses 1.6.3 itself: flax state `{'x': ..., 'iters': 5}`,
    two leaves)."""
    Int = jdc.Static[int]

    @jdc.pytree_dataclass
    class Solver:
        x: jax.Array
        iters: Int = 5

    return Solver


@dataclasses.dataclass(frozen=True)
class LegacySolver:
    x: jax.Array
    iters: int = 5


_register_as_1_6(LegacySolver, ["x", "iters"], [])


def test_fields_with_a_local_static_alias_were_saved_by_1_6(tmp_path: Path) -> None:
    solver = solver_with_a_local_alias()
    target = solver(jnp.zeros(3), iters=7)
    assert len(jax.tree.leaves(target)) == 1  # Static for us, as intended.
    saved = LegacySolver(jnp.arange(3.0), iters=5)
    assert jax.tree.structure(jdc.v1_6_layout(target)) == jax.tree.structure([0, 0])
    for loaded in restored_as_1_6_wrote(tmp_path, saved, target):
        np.testing.assert_array_equal(loaded.x, np.arange(3.0))
        assert loaded.iters == 7  # static: the target's
