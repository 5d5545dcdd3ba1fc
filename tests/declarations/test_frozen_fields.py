"""Frozen fields (`jdc.Frozen[T]`): declared like `Static` and `Sharded`, children all the same
(traced, shardable, saved), and what the training helpers derive from them: `jdc.trainable`'s
masks for models, lists, dicts and optax states, a run's own `freeze=`/`unfreeze=`, and
`jdc.stop_frozen_gradients`; with adamw and gradient clipping, frozen leaves stay bit-identical
and the clipped norm counts only the trained ones.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import SPELLINGS, define

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Dense:
    w: jax.Array
    b: jax.Array
    stats: jdc.Frozen[jax.Array]  # a buffer: traced, never trained

    def __call__(self, x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ self.w + self.b) * self.stats


@jdc.pytree_dataclass
class Model:
    embed: jdc.Frozen[jax.Array]
    layers: list[Dense]
    encoder: jdc.Frozen[Dense]
    extras: dict[str, Any]
    name: jdc.Static[str] = "model"

    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = self.encoder(x @ self.embed)
        for layer in self.layers:
            hidden = layer(hidden)
        return hidden * self.extras["gain"]


def dense(key: jax.Array, n: int = 4) -> Dense:
    return Dense(jax.random.normal(key, (n, n)), jnp.zeros(n), jnp.ones(n))


def make_model(seed: int = 0) -> Model:
    keys = jax.random.split(jax.random.key(seed), 5)
    return Model(
        embed=jax.random.normal(keys[0], (3, 4)),
        layers=[dense(keys[1]), dense(keys[2]), dense(keys[3])],
        encoder=dense(keys[4]),
        extras={"gain": jnp.ones(()), "none": None},
    )


def flags(mask: Any) -> dict[str, bool]:
    return {jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_leaves_with_path(mask)}


# -- a child all the same ----------------------------------------------------------------------


def test_a_frozen_field_is_a_child_under_its_name() -> None:
    model = make_model()
    paths = list(flags(jax.tree.map(lambda _: True, model)))
    assert paths[:2] == [".embed", ".layers[0].w"]
    assert ".encoder.stats" in paths and len(paths) == 1 + 3 * 3 + 3 + 1
    traces = []

    @jax.jit
    def forward(model: Model) -> jax.Array:
        traces.append(1)
        return model(jnp.ones((2, 3)))

    forward(model)
    forward(jdc.replace(model, embed=model.embed + 1.0))  # a new frozen value: no new trace
    assert len(traces) == 1


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_frozen_composes_with_sharded_in_either_order(spelling: str) -> None:
    module = define(
        """
        import jax
        import jax_dataclasses as jdc
        from jax_dataclasses import Frozen, Sharded

        FrozenArray = jdc.Frozen[jax.Array]

        @DECORATE
        class Tower:
            a: jdc.Frozen[jdc.Sharded[jax.Array, "embed", None]]
            b: Sharded[Frozen[jax.Array], "embed"]
            c: FrozenArray
            d: "jdc.Frozen[Later]"
            e: jax.Array

        Later = jax.Array
        """,
        spelling,
    )
    tower = module.Tower(jnp.ones((2, 2)), *(jnp.ones(2),) * 4)
    assert flags(jdc.trainable(tower)) == {".a": False, ".b": False, ".c": False, ".d": False,
                                           ".e": True}  # fmt: skip
    specs = jdc.partition_specs(tower, {"embed": None})
    assert (tuple(specs.a), tuple(specs.b), tuple(specs.c)) == ((None, None), (None,), ())


@pytest.mark.parametrize(
    "annotation",
    [
        "Optional[jdc.Frozen[jax.Array]]",
        "list[jdc.Frozen[jax.Array]]",
        "Optional['jdc.Frozen[int]']",
    ],
)
def test_frozen_nested_inside_a_type_is_refused(annotation: str) -> None:
    with pytest.raises(
        jdc.StaticAnnotationError,
        match=r"Frozen must be the outermost part of "
        r"the annotation of field 'x' of Nested",
    ):
        exec(
            f"@jdc.pytree_dataclass\nclass Nested:\n    x: {annotation}\n",
            {"jdc": jdc, "jax": jax, "Optional": Optional},
        )


@pytest.mark.parametrize(
    "field",
    [
        "x: jdc.Static[jdc.Frozen[int]] = 0",
        "x: jdc.Frozen[jdc.Static[int]] = 0",
        "x: jdc.Frozen[int] = dataclasses.field(default=0, metadata={'static': True})",
        "x: jdc.Frozen[int] = dataclasses.field(default=0, metadata={'pytree_node': False})",
        "x: 'jdc.Frozen[jdc.Static[int]]' = 0",
    ],
)
def test_static_and_frozen_is_refused_naming_class_and_field(field: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(
            jdc.StaticAnnotationError, match="field 'x' of Both is static and frozen"
        ):
            exec(
                f"@jdc.pytree_dataclass\nclass Both:\n    {field}\n",
                {"jdc": jdc, "dataclasses": dataclasses},
            )


def test_a_frozen_later_name_that_turns_out_static_is_refused_at_first_use() -> None:
    module = define(
        """
        import jax
        import jax_dataclasses as jdc

        @DECORATE
        class Late:
            x: jdc.Frozen[Alias]

        Alias = jdc.Static[int]
        """,
        "future import",
    )
    with pytest.raises(jdc.StaticAnnotationError, match="field 'x' of Late is static and frozen"):
        module.Late(1)


# -- masks ----------------------------------------------------------------------------------


def test_the_mask_follows_the_declarations_through_lists_dicts_and_nested_classes() -> None:
    mask = jdc.trainable(make_model())
    assert jax.tree.structure(mask) == jax.tree.structure(make_model())
    assert flags(mask) == {
        ".embed": False,
        **{
            f".layers[{i}].{name}": name != "stats"
            for i in range(3)
            for name in ["w", "b", "stats"]
        },
        **{f".encoder.{name}": False for name in ("w", "b", "stats")},
        ".extras['gain']": True,
    }
    assert mask.name == "model" and mask.extras["none"] is None


def test_the_mask_of_an_optax_state_follows_the_model_copies_in_it() -> None:
    optax = pytest.importorskip("optax")
    model = make_model()
    state = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3)).init(model)
    mask = jdc.trainable(state)
    assert jax.tree.structure(mask) == jax.tree.structure(state)
    adam = state[1][0]
    for moments in ("mu", "nu"):
        moment_mask = getattr(mask[1][0], moments)
        assert flags(moment_mask) == flags(jdc.trainable(model))
    assert mask[1][0].count is False and adam.count.dtype == jnp.int32  # an integer leaf


def test_abstract_trees_give_the_same_mask() -> None:
    model = make_model()
    assert jdc.trainable(jax.eval_shape(lambda: model)) == jdc.trainable(model)
    assert jdc.trainable([model, {"copy": model}]) == [
        jdc.trainable(model),
        {"copy": jdc.trainable(model)},
    ]


def test_integer_boolean_and_key_leaves_are_never_trainable() -> None:
    """Issue 37, item 8: a step counter that is not declared frozen has no gradient an
    optimizer could apply (`float0`); reported trainable, it reached the optimizer."""

    @jdc.pytree_dataclass
    class TrainState:
        params: Dense
        step: jax.Array
        done: jax.Array
        rng: jax.Array
        scale: Any

    state = TrainState(
        dense(jax.random.key(0)), jnp.zeros((), jnp.int32), jnp.zeros(2, bool),
        jax.random.key(1), [1.5, 2, jnp.ones((), jnp.bfloat16), jnp.ones((), jnp.complex64)],
    )  # fmt: skip
    assert flags(jdc.trainable(state)) == {
        ".params.w": True, ".params.b": True, ".params.stats": False, ".step": False,
        ".done": False, ".rng": False, ".scale[0]": True, ".scale[1]": False,
        ".scale[2]": True, ".scale[3]": True,
    }  # fmt: skip
    assert flags(jdc.trainable(state, unfreeze=[".step"]))[".step"] is False
    abstract = jax.eval_shape(lambda: state)
    assert jdc.trainable(abstract) == jdc.trainable(state)
    stopped = jdc.stop_frozen_gradients(state)
    assert stopped.scale[1] == 2 and type(stopped.scale[1]) is int  # left as it is


# -- a subclass that re-declares a frozen field ------------------------------------------------


def test_a_subclass_dropping_frozen_from_a_base_field_is_refused() -> None:
    """Issue 37, item 8: `embed: X` in a subclass of a class with `embed: jdc.Frozen[X]` made
    the field trainable without a word."""

    @jdc.pytree_dataclass
    class Base:
        w: jax.Array
        embed: jdc.Frozen[jax.Array]

    with pytest.raises(jdc.StaticAnnotationError) as caught:

        @jdc.pytree_dataclass
        class Tuned(Base):
            embed: jax.Array

    message = str(caught.value)
    assert message.startswith(
        "field 'embed' of test_a_subclass_dropping_frozen_from_a_base_field_is_refused"
        ".<locals>.Tuned re-declares field 'embed' of "
    )
    assert "which is Frozen, without Frozen[...]: the key path .embed of every" in message
    assert "Write embed: jdc.Frozen[...] again to keep it frozen" in message
    assert "jdc.trainable(model, unfreeze=['.embed'])" in message


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_subclass_may_redeclare_a_frozen_field_frozen_or_static(spelling: str) -> None:
    module = define(
        """
        import jax
        import jax_dataclasses as jdc

        @DECORATE
        class Base:
            w: jax.Array
            embed: jdc.Frozen[jax.Array]

        @DECORATE
        class Narrower(Base):
            embed: jdc.Frozen[jax.Array]

        @DECORATE
        class Fixed(Base):
            embed: jdc.Static[int] = 3

        class Adopted(Base):  # undecorated: the base's declarations
            embed: jax.Array
        """,
        spelling,
    )
    ones = jnp.ones(2)
    assert flags(jdc.trainable(module.Narrower(ones, ones))) == {".w": True, ".embed": False}
    assert flags(jdc.trainable(module.Fixed(ones))) == {".w": True}
    assert flags(jdc.trainable(module.Adopted(ones, ones))) == {".w": True, ".embed": False}


def test_a_pending_redeclaration_dropping_frozen_is_refused_at_first_use() -> None:
    module = define(
        """
        import jax
        import jax_dataclasses as jdc

        @DECORATE
        class Base:
            embed: jdc.Frozen[jax.Array]

        @DECORATE
        class Later(Base):
            embed: LaterArray

        @DECORATE
        class StillFrozen(Base):
            embed: LaterFrozen

        LaterArray = jax.Array
        LaterFrozen = jdc.Frozen[jax.Array]
        """,
        "future import",
    )
    assert flags(jdc.trainable(module.StillFrozen(jnp.ones(2)))) == {".embed": False}
    with pytest.raises(jdc.StaticAnnotationError, match="field 'embed' of Later re-declares"):
        module.Later(jnp.ones(2))


# -- one run's own choices --------------------------------------------------------------------


def test_freeze_everything_but_one_layer() -> None:
    mask = flags(jdc.trainable(make_model(), freeze=Model, unfreeze=".layers[1]"))
    assert [path for path, train in mask.items() if train] == [".layers[1].w", ".layers[1].b"]


def test_a_declared_field_stays_frozen_under_an_unfrozen_subtree_unless_selected() -> None:
    model = make_model()
    assert flags(jdc.trainable(model, unfreeze=[".encoder"]))[".encoder.stats"] is False
    assert flags(jdc.trainable(model, unfreeze=[".encoder"]))[".encoder.w"] is True
    unfrozen = flags(jdc.trainable(model, unfreeze=[".encoder", ".encoder.stats", ".embed"]))
    assert unfrozen[".encoder.stats"] and unfrozen[".embed"]


def test_freeze_by_class_and_by_key_path() -> None:
    by_class = flags(jdc.trainable(make_model(), freeze=[Dense]))
    assert [p for p, train in by_class.items() if train] == [".extras['gain']"]
    by_path = flags(jdc.trainable(make_model(), freeze=[".extras['gain']"]))
    assert by_path[".extras['gain']"] is False and by_path[".layers[0].w"] is True
    everything = flags(jdc.trainable(make_model(), freeze=""))  # the root
    assert len(everything) == 14 and set(everything.values()) == {False}


def test_selectors_that_match_nothing_are_refused_with_the_nearest_key_paths() -> None:
    with pytest.raises(ValueError) as caught:
        jdc.trainable(make_model(), freeze=[".layer[1]", Model], unfreeze=[int])
    message = str(caught.value)
    assert message.startswith("trainable: in the Model given, freeze='.layer[1]' is no key path")
    assert "'.layers[1]'" in message and "unfreeze=int has no instance in the tree" in message


def test_a_subtree_both_frozen_and_unfrozen_is_refused() -> None:
    with pytest.raises(ValueError, match=r"subtree at key path \.layers\[0\] is both frozen"):
        jdc.trainable(make_model(), freeze=[".layers[0]"], unfreeze=[Dense])


@pytest.mark.parametrize("selector", [3, [None], [jnp.ones(2)]])
def test_a_selector_of_another_kind_is_a_type_error(selector: Any) -> None:
    with pytest.raises(TypeError, match=r"trainable\(freeze=...\) takes key paths"):
        jdc.trainable(make_model(), freeze=selector)


# -- gradients -------------------------------------------------------------------------------


def loss(model: Model) -> jax.Array:
    x = jnp.linspace(-1.0, 1.0, 24).reshape(8, 3)
    return jnp.mean((model(x) - jnp.sin(x[:, :1])) ** 2)


DECLARED_FROZEN = {
    ".embed", ".encoder.w", ".encoder.b", ".encoder.stats",
    ".layers[0].stats", ".layers[1].stats", ".layers[2].stats",
}  # fmt: skip
"""The leaves `make_model`'s classes declare `Frozen` (the field, or the class holding it)."""


def test_stopped_gradients_are_exactly_zero_for_frozen_leaves() -> None:
    model = make_model()
    grads = flags(jax.grad(lambda m: loss(jdc.stop_frozen_gradients(m)))(model))
    raw = flags(jax.grad(loss)(model))
    for path, grad in grads.items():
        expected = np.zeros_like(raw[path]) if path in DECLARED_FROZEN else raw[path]
        np.testing.assert_array_equal(grad, expected, err_msg=path)
    assert np.any(raw[".embed"]) and np.any(raw[".encoder.w"])  # without it, frozen have some


def test_stopped_gradients_follow_a_runs_mask() -> None:
    model = make_model()
    mask = jdc.trainable(model, freeze=Model, unfreeze=".layers[2]")
    grads = jax.grad(lambda m: loss(jdc.stop_frozen_gradients(m, mask)))(model)
    trained = {p for p, g in flags(jax.tree.map(lambda g: bool(np.any(g)), grads)).items() if g}
    assert trained == {".layers[2].w", ".layers[2].b"}


def test_a_mask_of_another_structure_is_refused() -> None:
    with pytest.raises(ValueError, match="the mask does not have the tree's structure"):
        jdc.stop_frozen_gradients(make_model(), jdc.trainable(make_model().layers))


def norm(tree: Any) -> jax.Array:
    """The global norm of the leaves of `tree`, as `optax.clip_by_global_norm` computes it."""
    return jnp.sqrt(sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree.leaves(tree)))


@pytest.mark.parametrize(
    ("selectors", "moving"),
    [
        ({}, {".layers[0].w", ".layers[0].b", ".layers[1].w", ".layers[1].b", ".layers[2].w",
              ".layers[2].b", ".extras['gain']"}),
        ({"freeze": Model, "unfreeze": ".layers[1]"}, {".layers[1].w", ".layers[1].b"}),
    ],
    ids=["the declared mask", "one layer trained"],
)  # fmt: skip
def test_fine_tuning_with_adamw_and_clipping_keeps_frozen_leaves_bit_identical(
    selectors: dict[str, Any], moving: set[str]
) -> None:
    """The issue's "Done when": 10 steps of adamw with gradient clipping."""
    optax = pytest.importorskip("optax")
    model = make_model()
    mask = jdc.trainable(model, **selectors)
    labels = jax.tree.map(lambda train: "train" if train else "frozen", mask)
    max_norm = 1e-3  # small: clipping is active at every step
    train = optax.chain(optax.clip_by_global_norm(max_norm), optax.adamw(1e-2, weight_decay=0.1))
    optimizer = optax.multi_transform(
        {"train": train, "frozen": optax.set_to_zero()}, lambda _: labels
    )

    @jax.jit
    def step(model: Model, state: Any) -> tuple[Model, Any]:
        grads = jax.grad(loss)(model)
        updates, state = optimizer.update(grads, state, model)
        return optax.apply_updates(model, updates), state

    trained, state = model, optimizer.init(model)
    for _ in range(10):
        trained, state = step(trained, state)
    before, after = flags(model), flags(trained)
    moved = {p for p in before if np.asarray(before[p]).tobytes() != np.asarray(after[p]).tobytes()}
    assert moved == moving  # The rest, frozen, bit-identical.

    # The clip inside "train" sees the trained leaves only: its norm is theirs.
    clip = optax.multi_transform(
        {"train": optax.clip_by_global_norm(max_norm), "frozen": optax.set_to_zero()},
        lambda _: labels,
    )
    grads = jax.grad(loss)(model)
    clipped, _ = clip.update(grads, clip.init(model))
    trained_norm = norm(
        [g for g, t in zip(jax.tree.leaves(grads), jax.tree.leaves(mask), strict=True) if t]
    )
    assert trained_norm < norm(grads)
    for grad, update, train in zip(jax.tree.leaves(grads), jax.tree.leaves(clipped),
                                   jax.tree.leaves(mask), strict=True):  # fmt: skip
        expected = grad * (max_norm / trained_norm) if train else jnp.zeros_like(grad)
        np.testing.assert_allclose(update, expected, rtol=1e-5)
    stopped = jax.grad(lambda m: loss(jdc.stop_frozen_gradients(m, mask)))(model)
    np.testing.assert_allclose(norm(stopped), trained_norm, rtol=1e-6)


def bits(tree: Any) -> dict[str, bytes]:
    return {path: np.asarray(leaf).tobytes() for path, leaf in flags(tree).items()}


def test_trainable_only_gives_frozen_leaves_no_update_and_no_state() -> None:
    """Issue 37, item 7: the recipe the API led with, `optax.masked(adamw, mask)`, moved every
    frozen leaf by its raw gradient; `trainable_only` wraps any transformation so that it
    cannot. Trainable leaves move as adamw run on them alone."""
    optax = pytest.importorskip("optax")
    model = make_model()
    adamw = optax.adamw(1e-3, weight_decay=0.1)
    tx = jdc.trainable_only(adamw)
    grads = jax.tree.map(lambda leaf: jnp.full_like(leaf, 6.89), model)
    mask = flags(jdc.trainable(model))
    trained = [leaf for path, leaf in flags(model).items() if mask[path]]
    alone = [leaf for path, leaf in flags(grads).items() if mask[path]]

    state, alone_state = tx.init(model), adamw.init(trained)
    floats = [x.size for x in jax.tree.leaves(state) if jnp.issubdtype(x.dtype, jnp.floating)]
    assert sum(floats) == 2 * sum(leaf.size for leaf in trained)  # mu and nu: trained only
    for _ in range(10):
        updates, state = tx.update(grads, state, model)
        model = optax.apply_updates(model, updates)
        alone_updates, alone_state = adamw.update(alone, alone_state, trained)
        trained = optax.apply_updates(trained, alone_updates)
    before, after = bits(make_model()), bits(model)
    assert {p for p in before if before[p] != after[p]} == {p for p in mask if mask[p]}
    assert [after[p] for p in mask if mask[p]] == [np.asarray(t).tobytes() for t in trained]


def test_trainable_only_takes_a_runs_selectors_and_refuses_one_matching_nothing() -> None:
    optax = pytest.importorskip("optax")
    model = make_model()
    tx = jdc.trainable_only(optax.sgd(0.1), freeze=Model, unfreeze=".layers[1]")
    grads = jax.tree.map(jnp.ones_like, model)
    updates, _ = tx.update(grads, tx.init(model), model)
    moved = {path for path, leaf in flags(updates).items() if np.any(leaf)}
    assert moved == {".layers[1].w", ".layers[1].b"}
    with pytest.raises(ValueError, match=r"freeze='\.layer\[1\]' is no key path"):
        jdc.trainable_only(optax.sgd(0.1), freeze=".layer[1]").init(model)


def test_trainable_only_gives_an_integer_leaf_with_a_float0_gradient_a_zero_update() -> None:
    """`jax.grad(..., allow_int=True)` gives an integer leaf a `float0` gradient, which
    `optax.apply_updates` cannot add: its update is a zero of the leaf's own dtype."""
    optax = pytest.importorskip("optax")

    @jdc.pytree_dataclass
    class Counted:
        layer: Dense
        seen: jax.Array

    model = Counted(dense(jax.random.key(0)), jnp.asarray(7, jnp.int32))
    grads = jax.grad(lambda m: jnp.sum(m.layer.w**2), allow_int=True)(model)
    assert grads.seen.dtype == jax.dtypes.float0
    tx = jdc.trainable_only(optax.adamw(1e-2))
    for update in (tx.update, jax.jit(tx.update)):
        updates, _ = update(grads, tx.init(model), model)
        stepped = optax.apply_updates(model, updates)
        assert stepped.seen.dtype == jnp.int32 and int(stepped.seen) == 7
        assert np.any(stepped.layer.w != model.layer.w)


def test_optax_masked_with_the_mask_alone_moves_frozen_leaves() -> None:
    """Why the docs lead with `trainable_only`: `optax.masked` passes the updates it does
    not transform through, so the mask alone does not freeze (optax's documented behaviour,
    kept here so that the docs' warning stays true)."""
    optax = pytest.importorskip("optax")
    model = make_model()
    mask = jdc.trainable(model)
    masked = optax.masked(optax.adamw(1e-3, weight_decay=0.1), lambda _: mask)
    grads = jax.tree.map(lambda leaf: jnp.full_like(leaf, 6.89), model)
    updates, _ = masked.update(grads, masked.init(model), model)
    np.testing.assert_array_equal(updates.embed, grads.embed)


# -- with the rest of the library ---------------------------------------------------------------


def test_the_repr_shows_frozen_fields() -> None:
    layer = Dense(jnp.ones((1, 1)), jnp.zeros(1), jnp.ones(1))
    assert repr(layer) == "Dense(w=f32[1,1](1.0), b=f32[1](0.0), stats=Frozen(f32[1](1.0)))"
    assert repr(jdc.trainable(layer)) == "Dense(w=True, b=True, stats=Frozen(False))"
    text = jdc.pformat(make_model(), width=60)
    assert "    embed=Frozen(f32[3,4])," in text
    assert "    encoder=Frozen(\n        Dense(\n" in text  # a long one breaks inside


def test_copy_and_mutate_and_replace_keep_the_declaration() -> None:
    model = make_model()
    with jdc.copy_and_mutate(model) as edited:
        edited.embed = jnp.zeros((3, 4))
        edited.encoder.w = jnp.zeros((4, 4))
    assert flags(jdc.trainable(edited)) == flags(jdc.trainable(model))
    assert not np.any(edited.embed)
    assert jdc.trainable(jdc.replace(model, embed=jnp.ones((3, 4)))) == jdc.trainable(model)


def test_flax_state_dicts_hold_frozen_fields() -> None:
    serialization = pytest.importorskip("flax.serialization")
    model = make_model()
    state = serialization.to_state_dict(model)
    assert set(state) == {"embed", "layers", "encoder", "extras"}
    restored = serialization.from_bytes(make_model(seed=1), serialization.to_bytes(model))
    np.testing.assert_array_equal(restored.encoder.stats, model.encoder.stats)
    assert jdc.trainable(restored) == jdc.trainable(model)


def test_exported_functions_take_and_return_frozen_fields() -> None:
    pytest.importorskip("flatbuffers")
    from jax import export

    @jdc.pytree_dataclass
    class Exported:
        table: jdc.Frozen[jax.Array]
        w: jax.Array

    jdc.register_export(Exported, name="test_frozen_fields.Exported")
    value = Exported(jnp.ones(2), jnp.arange(2.0))
    exported = export.export(jax.jit(lambda e: jdc.replace(e, w=e.w + e.table)))(value)
    result = export.deserialize(exported.serialize()).call(value)
    assert type(result) is Exported and "table=Frozen(f32[2](1.0, 1.0))," in repr(result)
    np.testing.assert_array_equal(result.w, [1.0, 2.0])
