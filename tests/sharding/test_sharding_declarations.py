# ruff reads the axis names in `Sharded[T, "embed"]` as forward references (see
# tests/sharding/_sharded_future.py): F821 is false here.
# ruff: noqa: F821
"""`jdc.Sharded` declarations and the trees made from them, on the one device of the main
process: spellings, rules (against flax's own), tree structure, every error, and
`check_shardings` on concrete arrays. Meshes of other sizes are `AbstractMesh`es; the 8-device
checks (jit, device_put, explicit axes) are in `tests/sharding/_sharding_decl_child.py`."""

import copy
import json
import pickle
import typing
from typing import Annotated, Any, Optional

import _sharded_future
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import abstract_mesh, sharding_error
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jax.tree_util import keystr

import jax_dataclasses as jdc

RULES = {"embed": None, "mlp": "model", "batch": "data"}
ONE_DEVICE = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))


MESH = abstract_mesh(data=4, model=2)


@jdc.pytree_dataclass
class Dense:
    w: jdc.Sharded[jax.Array, "embed", "mlp"]
    b: jdc.Sharded[jax.Array, "mlp"]
    scale: jax.Array
    activation: jdc.Static[str] = "tanh"


@jdc.pytree_dataclass
class Model:
    layers: list[Dense]
    head: jdc.Sharded[jax.Array, "mlp", None]


def dense(n: int = 4, m: int = 8) -> Dense:
    return Dense(jnp.ones((n, m)), jnp.zeros(m), jnp.ones(()))


def model() -> Model:
    return Model([dense(), dense(4, 8)], jnp.ones((8, 2)))


class TestSpelling:
    def test_sharded_is_annotated_with_a_readable_immutable_marker(self) -> None:
        hint = jdc.Sharded[jax.Array, "embed", None, ("data", "fsdp")]
        assert typing.get_origin(hint) is Annotated
        assert typing.get_args(hint)[0] is jax.Array
        (marker,) = hint.__metadata__
        assert repr(marker) == "jax_dataclasses.Sharded('embed', None, ('data', 'fsdp'))"
        assert marker == jdc.Sharded[int, "embed", None, ("data", "fsdp")].__metadata__[0]
        with pytest.raises(AttributeError, match="immutable"):
            marker.names = ()

    @pytest.mark.parametrize("entry", [3, ["data"], ("data", 1)])
    def test_an_axis_entry_of_another_kind_is_refused_where_it_is_written(
        self, entry: object
    ) -> None:
        with pytest.raises(TypeError, match=r"axis entry .* logical axis name \(str\), None"):
            jdc.Sharded[jax.Array, "embed", entry]

    def test_declarations_pickle_and_copy(self) -> None:
        declared = jdc.Sharded[np.ndarray, "embed", ("data", "model"), None]
        for copied in (pickle.loads(pickle.dumps(declared)), copy.copy(declared)):
            assert copied == declared
        assert copy.deepcopy(declared) == declared

    def test_the_functions_annotations_resolve_at_run_time(self) -> None:
        for function in (jdc.partition_specs, jdc.shardings, jdc.check_shardings):
            assert "mesh" in typing.get_type_hints(function)

    def test_sharded_is_not_instantiated(self) -> None:
        with pytest.raises(TypeError, match="annotations only"):
            jdc.Sharded()

    def test_a_sharded_field_is_a_child(self) -> None:
        layer = dense()
        assert len(jax.tree.leaves(layer)) == 3
        assert len(jax.tree.leaves(_sharded_future.Future(*[jnp.ones((4, 8))] * 7))) == 7

    def test_every_spelling_under_the_future_import(self) -> None:
        arrays = [jnp.ones((4, 8)), jnp.ones(8), jnp.ones((4, 8)), jnp.ones(8)]
        future = _sharded_future.Future(*arrays, jnp.ones(8), jnp.ones(4), jnp.ones(2))
        specs = jdc.partition_specs(future, RULES)
        assert specs.w == P(None, "model")
        assert specs.later == P("model")  # ("embed", "mlp"): embed is not sharded
        assert specs.quoted == P(None, "model")
        assert specs.renamed == P("model")
        assert specs.documented == P("model")
        assert specs.checker_only == P(None)  # Read from its spelling: CheckerOnly is undefined.
        assert specs.plain == P()

    def test_axis_names_are_never_read_as_types(self) -> None:
        odd = _sharded_future.NamedLikeStatic(jnp.ones(2))
        assert jdc.partition_specs(odd, {"jdc.Static": "model"}).w == P("model")

    def test_aliases_and_annotated_without_the_future_import(self) -> None:
        weight = jdc.Sharded[jax.Array, "batch", "mlp"]

        @jdc.pytree_dataclass
        class Plain:
            a: weight
            b: Annotated[weight, "doc"]
            c: "jdc.Sharded[jax.Array, 'mlp']"

        specs = jdc.partition_specs(Plain(jnp.ones((4, 2)), jnp.ones((4, 2)), jnp.ones(2)), RULES)
        assert (specs.a, specs.b, specs.c) == (P("data", "model"), P("data", "model"), P("model"))

    def test_a_local_alias_is_read_when_the_class_is_decorated(self) -> None:
        seen: list[Any] = []
        inner = _sharded_future.local_class(
            lambda cls: seen.append(jdc.partition_specs(cls(jnp.ones(4)), RULES))
        )
        assert [specs.v for specs in seen] == [P("model")]
        # Its function has returned: the declaration was read when the class was decorated.
        assert jdc.partition_specs(inner(jnp.ones(4)), RULES).v == P("model")

    def test_inherited_and_redeclared_fields(self) -> None:
        @jdc.pytree_dataclass
        class Wider(Dense):
            b: jdc.Sharded[jax.Array, "batch"]

        specs = jdc.partition_specs(Wider(jnp.ones((4, 8)), jnp.ones(8), jnp.ones(())), RULES)
        assert (specs.w, specs.b) == (P(None, "model"), P("data"))

    def test_static_and_sharded_together_is_an_error_naming_class_and_field(self) -> None:
        def decorate() -> None:
            @jdc.pytree_dataclass
            class Both:
                n: jdc.Static[jdc.Sharded[int, "batch"]] = 3

        text = sharding_error(decorate)
        assert "field 'n' of" in text and "Both" in text and "is static" in text
        assert "Drop Static[...]" in text

    def test_sharded_nested_or_twice_is_an_error(self) -> None:
        def nested() -> None:
            @jdc.pytree_dataclass
            class Nested:
                x: Optional[jdc.Sharded[jax.Array, "batch"]] = None  # noqa: UP045

        def twice() -> None:
            @jdc.pytree_dataclass
            class Twice:
                x: Annotated[
                    jdc.Sharded[jax.Array, "batch"], jdc.Sharded[int, "mlp"].__metadata__[0]
                ]

        text = sharding_error(nested)
        assert "outermost" in text and "field 'x' of" in text and "Nested" in text
        assert "Sharded[Optional[jax.Array], 'batch']" in text
        text = sharding_error(twice)
        assert "declares its sharding twice" in text and "Twice" in text


class TestRules:
    def test_mapping_and_flax_pairs_agree(self) -> None:
        pairs = list(RULES.items())
        assert jdc.partition_specs(model(), RULES) == jdc.partition_specs(model(), pairs)

    def test_without_rules_a_name_is_a_mesh_axis(self) -> None:
        @jdc.pytree_dataclass
        class Direct:
            x: jdc.Sharded[jax.Array, "data", ("model", "data2"), None]

        specs = jdc.partition_specs(Direct(jnp.ones((4, 4, 4))))
        assert specs.x == P("data", ("model", "data2"), None)

    def test_a_rule_may_name_several_mesh_axes_and_a_name_may_be_a_mesh_axis(self) -> None:
        @jdc.pytree_dataclass
        class Batch:
            x: jdc.Sharded[jax.Array, "batch", "model"]

        rules = {"batch": ("data", "fsdp")}
        mesh = abstract_mesh(data=2, fsdp=2, model=2)
        specs = jdc.partition_specs(Batch(jnp.ones((8, 2))), rules, mesh=mesh)
        assert specs.x == P(("data", "fsdp"), "model")

    def test_a_rule_whose_mesh_axis_is_taken_falls_back_as_in_flax(self) -> None:
        @jdc.pytree_dataclass
        class Heads:
            x: jdc.Sharded[jax.Array, "heads", "kv"]

        rules = [("heads", "model"), ("kv", "model"), ("kv", "data")]
        assert jdc.partition_specs(Heads(jnp.ones((2, 4))), rules).x == P("model", "data")

    def test_a_name_whose_every_rule_is_taken_is_refused_as_nnx_does(self) -> None:
        """flax linen leaves 'kv' unsharded without a word; nnx raises DuplicateSpecError."""

        @jdc.pytree_dataclass
        class Heads:
            x: jdc.Sharded[jax.Array, "heads", "kv"]

        rules = [("heads", "model"), ("kv", "model")]
        text = sharding_error(lambda: jdc.partition_specs(Heads(jnp.ones((2, 4))), rules))
        assert "- field 'x' of TestRules.test_a_name_whose_every_rule_is_taken_is_refused_as_" \
            "nnx_does.<locals>.Heads at .x (f32[2,4]): the logical axis 'kv' on dimension 1 goes " \
            "to the mesh axis 'model' by its rule, which 'heads' on dimension 0 already shards: " \
            "a mesh axis shards one dimension of an array at most once (flax nnx raises " \
            "DuplicateSpecError" in text  # fmt: skip
        assert "Map one of the names to another mesh axis or None ('kv': None)." in text

    def test_a_mesh_where_the_rules_go_is_taken_for_the_mesh(self) -> None:
        by_keyword = jdc.partition_specs(model(), RULES, mesh=MESH)
        unruled = sharding_error(lambda: jdc.partition_specs(model(), MESH))  # type: ignore[arg-type]
        assert unruled == sharding_error(lambda: jdc.partition_specs(model(), mesh=MESH))
        assert jdc.shardings(model(), ONE_DEVICE, RULES) == jdc.shardings(
            model(), RULES, mesh=ONE_DEVICE
        )
        assert jdc.sharded_shapes(model(), ONE_DEVICE, RULES) == jdc.sharded_shapes(
            model(), rules=RULES, mesh=ONE_DEVICE
        )
        with jdc.sharding_rules(RULES):  # The rules from the context, the mesh where they go.
            assert jdc.partition_specs(model(), MESH) == by_keyword  # type: ignore[arg-type]

    def test_a_mesh_or_rules_given_twice_are_refused_with_the_spelling(self) -> None:
        spelling = r"jdc.shardings\(tree, rules, mesh=mesh\)"
        with pytest.raises(TypeError, match=rf"got 2 meshes and 1 sets of rules: .*{spelling}"):
            jdc.shardings(model(), ONE_DEVICE, RULES, mesh=ONE_DEVICE)  # type: ignore[call-overload]
        with pytest.raises(TypeError, match=rf"got 1 meshes and 2 sets of rules: .*{spelling}"):
            jdc.shardings(model(), ONE_DEVICE, RULES, RULES)  # type: ignore[call-overload]
        with pytest.raises(TypeError, match="got the rules twice"):
            jdc.shardings(model(), RULES, rules=RULES, mesh=ONE_DEVICE)  # type: ignore[call-overload]
        with pytest.raises(TypeError, match=r"a mesh was given as the rules"):
            jdc.shardings(model(), rules=MESH, mesh=ONE_DEVICE)  # type: ignore[call-overload]

    def test_shardings_without_a_mesh_say_where_to_give_one(self) -> None:
        for function in (jdc.shardings, jdc.sharded_shapes):
            with pytest.raises(TypeError, match=r"needs a mesh: give mesh=mesh, or call it inside"):
                function(model(), RULES)

    def test_malformed_rules_are_refused(self) -> None:
        with pytest.raises(TypeError, match=r"the sharding rule \('mlp',\) is not a"):
            jdc.partition_specs(model(), [("mlp",)])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="the sharding rule"):
            jdc.partition_specs(model(), {"mlp": 3})  # type: ignore[dict-item]
        with pytest.raises(TypeError, match=r"the sharding rule \['mlp', \['model', 3\]\]"):
            jdc.partition_specs(model(), [["mlp", ["model", 3]]])
        with pytest.raises(TypeError, match=r"the sharding rule 3 is not a"):
            jdc.partition_specs(model(), 3)  # type: ignore[arg-type]

    def test_rules_as_lists_of_lists_as_json_and_yaml_load_them(self) -> None:
        loaded = json.loads('[["batch", ["data", "fsdp"]], ["mlp", "model"], ["embed", null]]')
        pairs = [("batch", ("data", "fsdp")), ("mlp", "model"), ("embed", None)]
        assert jdc.partition_specs(model(), loaded) == jdc.partition_specs(model(), pairs)

        @jdc.pytree_dataclass
        class Batch:
            x: jdc.Sharded[jax.Array, "batch", "mlp"]

        assert jdc.partition_specs(Batch(jnp.ones((8, 2))), loaded).x == P(
            ("data", "fsdp"), "model"
        )

    @settings(max_examples=200, deadline=None)
    @given(
        names=st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4, unique=True).flatmap(
            lambda names: st.permutations(names + [None] * 2)  # type: ignore[operator]
        ),
        rules=st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "c", "d"]),
                st.sampled_from([None, "x", "y", ("x", "z"), ("y", "z")]),
            ),
            max_size=8,
        ),
    )
    def test_logical_names_become_what_flax_makes_of_them(
        self, names: list[str | None], rules: list[tuple[str, Any]]
    ) -> None:
        from flax.linen import logical_to_mesh_axes

        covered = {logical for logical, _ in rules}
        if not set(filter(None, names)) <= covered:
            return  # flax replicates an unknown name silently; ours is an error (tested).

        declared = jdc.Sharded[jax.Array, *names]
        cls = type("Declared", (), {"__annotations__": {"x": declared}})
        cls = jdc.pytree_dataclass(cls)
        flaxs = tuple(logical_to_mesh_axes(names, rules))
        # A name whose rules all map to mesh axes that other dimensions took: flax linen
        # replicates it, ours refuses it as flax nnx does (DuplicateSpecError).
        targets = {n: [t for logical, t in rules if logical == n] for n in filter(None, names)}
        taken = [
            n
            for n, got in zip(names, flaxs, strict=True)
            if n and got is None and None not in targets[n]
        ]
        tree = cls(jnp.ones((1,) * len(names)))
        if taken:
            text = sharding_error(lambda: jdc.partition_specs(tree, rules))
            assert f"the logical axis {taken[0]!r} on dimension {names.index(taken[0])}" in text
        else:
            assert tuple(jdc.partition_specs(tree, rules).x) == flaxs


def nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Lists, dicts and tuples of `inner`."""
    keys = st.sampled_from("abc")
    return st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(keys, inner, max_size=3),
        st.tuples(inner, inner),
    )


MAKE: dict[str, Any] = {
    "dense": dense,
    "array": lambda: jnp.ones(2),
    "none": lambda: None,
    "int": lambda: 1,
}


class TestTrees:
    def test_the_specs_have_the_structure_of_the_tree(self) -> None:
        tree = {"model": model(), "step": 3, "none": None, "pair": (jnp.ones(2), model())}
        specs = jdc.partition_specs(tree, RULES)
        assert jax.tree.structure(specs) == jax.tree.structure(tree)
        assert specs["model"].layers[1].w == P(None, "model")
        assert specs["model"].layers[1].scale == P()  # undeclared: replicated
        assert specs["step"] == P() and specs["none"] is None
        assert specs["pair"][1].head == P("model", None)
        assert specs["model"].layers[0].activation == "tanh"  # static values kept

    def test_abstract_trees_get_the_specs_of_concrete_ones(self) -> None:
        abstract = jax.eval_shape(model)
        assert jdc.partition_specs(abstract, RULES) == jdc.partition_specs(model(), RULES)
        shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), model())
        assert jdc.partition_specs(shapes, RULES) == jdc.partition_specs(model(), RULES)

    def test_an_optax_state_gets_the_models_specs_and_replicated_counters(self) -> None:
        state = optax.adam(1e-3).init(model())
        specs = jdc.partition_specs(state, RULES)
        assert specs[0].mu == specs[0].nu == jdc.partition_specs(model(), RULES)
        assert specs[0].count == P()

    def test_a_declared_subtree_gives_each_array_the_spec_and_none_gives_nothing(self) -> None:
        @jdc.pytree_dataclass
        class Stack:
            layers: jdc.Sharded[tuple[jax.Array, ...], "batch", None]
            inner: jdc.Sharded[Any, "batch"]
            maybe: jdc.Sharded[Optional[jax.Array], "mlp"] = None  # noqa: UP045

        stack = Stack((jnp.ones((4, 2)), jnp.ones((4, 3))), jnp.ones(4))
        specs = jdc.partition_specs(stack, RULES)
        assert specs.layers == (P("data", None), P("data", None)) and specs.maybe is None
        assert specs.inner == P("data")
        text = sharding_error(
            lambda: jdc.partition_specs(jdc.replace(stack, layers=(jnp.ones(4),)))
        )
        assert "field 'layers' of" in text and "at .layers[0] (f32[4]): declares 2 axes" in text

    def test_default_spec_or_function_for_undeclared_leaves(self) -> None:
        layer = Dense(jnp.ones((4, 8)), jnp.zeros(8), jnp.ones(4))
        specs = jdc.partition_specs(layer, RULES, default=P("data"))
        assert specs.scale == P("data") and specs.w == P(None, "model")
        seen: list[str] = []

        def by_path(path: tuple[Any, ...], leaf: Any) -> P:
            seen.append(keystr(path))
            return P(None) if np.ndim(leaf) else P()

        specs = jdc.partition_specs({"m": model(), "x": jnp.ones(3)}, RULES, default=by_path)
        assert seen == ["['m'].layers[0].scale", "['m'].layers[1].scale", "['x']"]
        assert specs["x"] == P(None)

    def test_shardings_and_sharded_shapes(self) -> None:
        placed = jdc.shardings(model(), ONE_DEVICE, RULES)
        assert placed.layers[0].w == NamedSharding(ONE_DEVICE, P(None, "model"))
        shapes = jdc.sharded_shapes({"m": model(), "n": 3}, ONE_DEVICE, RULES)
        assert shapes["m"].head.shape == (8, 2) and shapes["m"].head.dtype == jnp.float32
        assert shapes["m"].head.sharding == NamedSharding(ONE_DEVICE, P("model", None))
        assert shapes["n"] == 3
        restored = jax.device_put(model(), jdc.shardings(model(), ONE_DEVICE, RULES))
        assert restored.head.sharding.spec == P("model", None)

    def test_sharded_shapes_keep_weak_types(self) -> None:
        abstract = jax.eval_shape(lambda: {"m": model(), "lr": jnp.asarray(0.1)})
        shapes = jdc.sharded_shapes(abstract, ONE_DEVICE, RULES)
        assert shapes["lr"].weak_type and not shapes["m"].head.weak_type

    @settings(max_examples=50, deadline=None)
    @given(st.recursive(st.sampled_from(["dense", "array", "none", "int"]), nested, max_leaves=8))
    def test_any_nesting_keeps_its_structure(self, shape: Any) -> None:
        tree = jax.tree.map(lambda kind: MAKE[kind](), shape)
        specs = jdc.partition_specs(tree, RULES)
        assert jax.tree.structure(specs) == jax.tree.structure(tree)
        assert all(isinstance(spec, P) for spec in jax.tree.leaves(specs))


class TestErrors:
    def test_wrong_number_of_axes(self) -> None:
        bad = Model([Dense(jnp.ones(8), jnp.zeros(8), jnp.ones(()))], jnp.ones((8, 2)))
        text = sharding_error(lambda: jdc.partition_specs(bad, RULES, mesh=MESH))
        assert text.startswith(
            "1 sharding declaration does not fit (mesh {'data': 4, 'model': 2}; rules "
        )
        assert "- field 'w' of Dense at .layers[0].w (f32[8]): declares 2 axes" in text
        assert "for an array of rank 1" in text and "Sharded[jax.Array, 'embed']" in text

    def test_an_axis_in_neither_the_rules_nor_the_mesh(self) -> None:
        text = sharding_error(lambda: jdc.partition_specs(model(), {"mlp": "model"}, mesh=MESH))
        assert "field 'w' of Dense at .layers[0].w (f32[4,8])" in text
        assert "the logical axis 'embed' is neither in the rules nor a mesh axis" in text
        assert "{'data': 4, 'model': 2}" in text and "Add a rule for it" in text

    def test_a_mesh_axis_the_mesh_does_not_have(self) -> None:
        text = sharding_error(lambda: jdc.partition_specs(model(), mesh=MESH))
        assert "shards along 'embed', 'mlp', which the mesh does not have" in text
        assert "Use its axes ('data', 'model')" in text
        text = sharding_error(
            lambda: jdc.partition_specs(model(), {**RULES, "mlp": "tp"}, mesh=MESH)
        )
        assert "shards along 'tp' (the rule for 'mlp'), which the mesh does not have" in text
        assert "change the rule" in text

    def test_a_dimension_the_mesh_does_not_divide(self) -> None:
        bad = Model([dense(4, 6)], jnp.ones((8, 2)))
        mesh = abstract_mesh(data=4, model=4)
        text = sharding_error(lambda: jdc.partition_specs(bad, RULES, mesh=mesh))
        assert "field 'b' of Dense at .layers[0].b (f32[6])" in text
        assert (
            "dimension 0 has size 6, which the mesh axes 'model' (4) (the rule for 'mlp')" in text
        )
        assert "Choose a size divisible by 4" in text
        assert text.startswith("2 sharding declarations do not fit")  # w and b, at once
        assert sharding_error(lambda: jdc.shardings(bad, mesh, RULES)) == text  # type: ignore[arg-type]

    def test_an_axis_twice(self) -> None:
        @jdc.pytree_dataclass
        class Square:
            x: jdc.Sharded[jax.Array, "mlp", "mlp"]
            y: jdc.Sharded[jax.Array, "model", ("model", "data")]

        square = Square(jnp.ones((4, 4)), jnp.ones((4, 4)))
        text = sharding_error(lambda: jdc.partition_specs(square))
        assert "field 'x' of" in text and "names the axis 'mlp' on several dimensions" in text
        assert "field 'y' of" in text and "names the axis 'model' on several dimensions" in text
        text = sharding_error(
            lambda: jdc.partition_specs(
                {"x": jnp.ones((4, 4))}, mesh=abstract_mesh(x=2), default=P("x", "x")
            )
        )
        assert "undeclared leaf at ['x'] (f32[4,4]): shards several dimensions along the mesh " \
            "axis 'x'; a mesh axis may shard one dimension only." in text  # fmt: skip

    def test_a_default_that_does_not_fit(self) -> None:
        text = sharding_error(
            lambda: jdc.partition_specs(model(), RULES, mesh=MESH, default=P("x"))
        )
        assert "undeclared leaf at .layers[0].scale (f32[])" in text and "rank 0" in text
        text = sharding_error(
            lambda: jdc.partition_specs({"x": jnp.ones(3)}, mesh=MESH, default=P("data"))
        )
        assert "undeclared leaf at ['x'] (f32[3])" in text and "size 3" in text
        text = sharding_error(lambda: jdc.partition_specs(model(), default=lambda p, x: "data"))  # type: ignore[arg-type,return-value]
        assert "default returned 'data', not a PartitionSpec" in text


class TestCheckShardings:
    def test_arrays_where_they_are_declared_pass(self) -> None:
        placed = jax.device_put(model(), jdc.shardings(model(), ONE_DEVICE, RULES))
        jdc.check_shardings(placed, RULES)
        jdc.check_shardings(placed, RULES, mesh=ONE_DEVICE)
        jdc.check_shardings({"step": 3, "host": np.ones(2)}, RULES)  # replicated: nothing to say

    def test_every_mismatch_after_surgery_in_one_message(self) -> None:
        placed = jax.device_put(model(), jdc.shardings(model(), ONE_DEVICE, RULES))
        layer = jdc.replace(placed.layers[1], w=jnp.ones((4, 8)), b=np.zeros(8, np.float32))
        edited = jdc.replace(placed, layers=[placed.layers[0], layer])
        text = sharding_error(lambda: jdc.check_shardings(edited, RULES))
        assert text.startswith("2 arrays do not carry their declared shardings (no mesh given;")
        assert "- field 'w' of Dense at .layers[1].w (f32[4,8]): has SingleDeviceSharding, " \
            "declared P(None, 'model')" in text  # fmt: skip
        assert "field 'b' of Dense at .layers[1].b (f32[8]): has no sharding" in text
        assert "jax.device_put(tree, jdc.shardings(tree, rules, mesh=mesh))" in text
        assert "or inside jax.jit jdc.constrain_shardings(tree, rules)." in text

    def test_another_spec_or_another_mesh(self) -> None:
        elsewhere = {**RULES, "mlp": "data"}
        wrong = jax.device_put(model(), jdc.shardings(model(), ONE_DEVICE, elsewhere))
        text = sharding_error(lambda: jdc.check_shardings(wrong, RULES))
        assert "at .head (f32[8@data,2]): has P('data', None), declared P('model', None)" in text
        other = Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1), ("data", "model", "x"))
        placed = jax.device_put(model(), jdc.shardings(model(), other, RULES))
        text = sharding_error(lambda: jdc.check_shardings(placed, RULES, mesh=ONE_DEVICE))
        assert "on mesh {'data': 1, 'model': 1, 'x': 1}" in text

    def test_declaration_errors_come_first(self) -> None:
        assert "declares 2 axes" in sharding_error(
            lambda: jdc.check_shardings(Dense(jnp.ones(8), jnp.ones(8), jnp.ones(())))
        )


def test_sharded_arrays_print_their_mesh_axes() -> None:
    placed = jax.device_put(model(), jdc.shardings(model(), ONE_DEVICE, RULES))
    assert "w=f32[4,8@model]" in repr(placed.layers[0]) and "scale=f32[](1.0)" in repr(placed)
    both = jax.device_put(jnp.ones((3, 4)), NamedSharding(ONE_DEVICE, P(("data", "model"))))
    assert jdc.pformat(both) == "f32[3@(data,model),4]"
