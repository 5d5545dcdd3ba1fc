# ruff reads the axis names in `Sharded[T, "embed"]` as forward references (see
# tests/sharding/_sharded_future.py): F821 is false here.
# ruff: noqa: F821
"""Scale-out on the one device of the main process: stacked layers declared on the field that
holds them, messages (one entry per field, close names, the rule only where one applies, the
header on every error), the rules context, the constraints, and checkpoints flax wrote restored
into our classes. The 8-device checks (flax's own run of its guide's model, `check_shardings`
inside `lax.scan`, Auto, Explicit and mixed meshes) are in `tests/sharding/_sharding_scale_child.py`."""

import threading
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import abstract_mesh, define, sharding_error
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc

RULES = [("batch", "data"), ("hidden", "model"), ("embed", None), ("stage", "data")]
ONE_DEVICE = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))


MESH = abstract_mesh(data=2, model=4)


@jdc.pytree_dataclass
class Linear:
    kernel: jdc.Sharded[jax.Array, "embed", "hidden"]


@jdc.pytree_dataclass
class Block:
    dot1: Linear
    w2: jdc.Sharded[jax.Array, "hidden", "embed"]
    norms: jdc.Sharded[tuple[jax.Array, ...], "embed"]
    scale: jax.Array  # undeclared


@jdc.pytree_dataclass
class Stack:
    layers: jdc.Sharded[Block, None]  # one leading axis, not sharded


@jdc.pytree_dataclass
class Pipeline:
    stages: jdc.Sharded[Stack, "stage"]


def block(_: object = None) -> Block:
    return Block(
        Linear(jnp.ones((8, 16))), jnp.ones((16, 8)), (jnp.ones(8), jnp.ones(8)), jnp.ones(())
    )


def stack(layers: int = 3) -> Stack:
    return Stack(jax.vmap(block)(jnp.arange(layers)))


class TestStackedLayers:
    def test_the_stacked_axes_come_first_for_every_leaf_inside(self) -> None:
        specs = jdc.partition_specs(stack(), RULES, mesh=MESH)
        assert specs.layers.dot1.kernel == P(None, None, "model")
        assert specs.layers.w2 == P(None, "model", None)
        assert specs.layers.norms == (P(None, None), P(None, None))
        assert specs.layers.scale == P(None)  # the default, after the stacked axis

    def test_the_layer_class_keeps_its_own_declarations_unstacked(self) -> None:
        specs = jdc.partition_specs(block(), RULES, mesh=MESH)
        assert (specs.dot1.kernel, specs.w2, specs.scale) == (
            P(None, "model"),
            P("model", None),
            P(),
        )

    def test_an_optax_state_follows(self) -> None:
        model = stack()
        specs = jdc.partition_specs((model, optax.adam(1e-3).init(model)), RULES, mesh=MESH)
        assert specs[1][0].mu == specs[1][0].nu == specs[0]
        assert specs[1][0].count == P()

    def test_stacked_levels_compose(self) -> None:
        pipeline = Pipeline(jax.vmap(lambda _: stack())(jnp.arange(2)))
        specs = jdc.partition_specs(pipeline, RULES, mesh=MESH)
        assert specs.stages.layers.dot1.kernel == P("data", None, None, "model")
        assert specs.stages.layers.scale == P("data", None)

    def test_a_default_function_gives_the_spec_of_one_layer(self) -> None:
        seen: list[tuple[int, ...]] = []

        def by_leaf(path: Any, leaf: Any) -> P:
            seen.append(leaf.shape)
            return P()

        specs = jdc.partition_specs(stack(), RULES, default=by_leaf)
        assert seen == [(3,)] and specs.layers.scale == P(None)

    def test_a_leaf_without_the_stacked_axis_names_the_field_that_stacks_it(self) -> None:
        text = sharding_error(lambda: jdc.partition_specs(Stack(block()), RULES, mesh=MESH))
        assert text.startswith("4 sharding declarations do not fit")
        assert "- field 'kernel' of Linear at .layers.dot1.kernel (f32[8,16]): has rank 2 (the " \
            "2 axes it declares), but field 'layers' of Stack stacks it along 1 axis (None,) in " \
            "front: the array is not stacked." in text  # fmt: skip
        assert "- undeclared leaf at .layers.scale (f32[]): has rank 0, but field 'layers' of " \
            "Stack stacks it" in text  # fmt: skip

    def test_stacked_arrays_under_an_undeclared_field_get_a_hint_naming_the_fields(self) -> None:
        @jdc.pytree_dataclass
        class Plain:
            layers: Block

        text = sharding_error(lambda: jdc.partition_specs(Plain(stack().layers), RULES))
        assert "- field 'w2' of Block at .layers.w2 (f32[3,16,8]): declares 2 axes ('hidden', " \
            "'embed') for an array of rank 3. If it is one of a stack of layers (made by jax.vmap," \
            " consumed by lax.scan), declare the 1 axis of the stack on the field that holds it: " \
            "field 'layers' of TestStackedLayers" in text  # fmt: skip
        assert ".Plain (Sharded[Block, None])" in text and "Sharded[jax.Array, 'hidden'" not in text

    def test_a_mesh_axis_claimed_by_the_stack_and_a_layer_axis_is_refused(self) -> None:
        """Issue 38, item 6: the layer axis was dropped without a word (P('model', None,
        None)); flax nnx raises DuplicateSpecError for the same model."""

        @jdc.pytree_dataclass
        class Layers:
            layers: jdc.Sharded[Linear, "layers"]

        rules = [("layers", "model"), ("hidden", "model"), ("embed", None)]
        model = Layers(Linear(jnp.ones((4, 8, 16))))
        text = sharding_error(lambda: jdc.partition_specs(model, rules, mesh=MESH))
        assert text.startswith("1 sharding declaration does not fit (mesh {'data': 2, 'model'")
        assert "- field 'kernel' of Linear at .layers.kernel (f32[4,8,16]): the logical axis " \
            "'hidden' on dimension 2 goes to the mesh axis 'model' by its rule, which 'layers' " \
            "(stacked by field 'layers' of TestStackedLayers.test_a_mesh_axis_claimed_by_the_" \
            "stack_and_a_layer_axis_is_refused.<locals>.Layers) on dimension 0 already shards" \
            in text  # fmt: skip
        assert "('hidden': None), or add a rule to fall back on ('hidden', 'data')." in text

    def test_an_undeclared_array_shared_by_the_layers_is_not_taken_for_stacked(self) -> None:
        """Issue 38, item 7: a (8,) vector in a 4-layer stack was sharded along 'model' by the
        layers rule, as if it held one entry per layer."""

        @jdc.pytree_dataclass
        class Shared:
            kernel: jdc.Sharded[jax.Array, "embed", "hidden"]
            offsets: jax.Array  # undeclared, the same for every layer

        @jdc.pytree_dataclass
        class Layers:
            layers: jdc.Sharded[Shared, "layers"]

        rules = [("layers", "model"), ("hidden", "data"), ("embed", None)]
        model = Layers(Shared(jnp.ones((4, 8, 16)), jnp.ones(8)))
        text = sharding_error(lambda: jdc.partition_specs((model, model), rules, mesh=MESH))
        assert "- undeclared leaf at [0].layers.offsets (f32[8]): has size 8 along the 1 axis " \
            "('layers',) that field 'layers' of TestStackedLayers.test_an_undeclared_array_shared" \
            "_by_the_layers_is_not_taken_for_stacked.<locals>.Layers stacks it along, where the " \
            "stack's arrays have 4: it is not one of the stack's layers, and lax.scan would " \
            "refuse it." in text  # fmt: skip
        assert "  Also at [1].layers.offsets." in text
        stacked = Layers(Shared(jnp.ones((4, 8, 16)), jnp.ones((4, 8))))
        assert jdc.partition_specs(stacked, rules, mesh=MESH).layers.offsets == P("model")

    def test_in_nested_stacks_each_level_has_its_own_size(self) -> None:
        pipeline = Pipeline(jax.vmap(lambda _: stack())(jnp.arange(2)))  # 2 stages of 3 layers
        assert jdc.partition_specs(pipeline, RULES, mesh=MESH).stages.layers.scale == P(
            "data", None
        )
        shared = Pipeline(Stack(jdc.replace(pipeline.stages.layers, scale=jnp.ones((2, 8)))))
        text = sharding_error(lambda: jdc.partition_specs(shared, RULES, mesh=MESH))
        assert "- undeclared leaf at .stages.layers.scale (f32[2,8]): has size 8 along the 1 " \
            "axis (None,) that field 'layers' of Stack stacks it along, where the stack's " \
            "arrays have 3" in text  # fmt: skip

    def test_adafactors_factored_moments_are_told_as_derived_not_as_unstacked(self) -> None:
        """Issue 38, item 8: v_row and v_col of a stacked kernel keep the stack's axis and
        lose one of the kernel's; they were reported as "not stacked: stack the layers"."""

        @jdc.pytree_dataclass
        class Layers:
            layers: jdc.Sharded[Linear, "layers"]

        rules = [("layers", "model"), ("hidden", "data"), ("embed", None)]
        model = Layers(Linear(jnp.ones((4, 128, 256))))
        state = optax.adafactor(1e-3).init(model)
        text = sharding_error(lambda: jdc.partition_specs((model, state), rules, mesh=MESH))
        assert "- field 'kernel' of Linear at [1][0].v_row.layers.kernel (f32[4,128]): has rank " \
            "2, where field 'layers' of TestStackedLayers.test_adafactors_factored_moments_are_" \
            "told_as_derived_not_as_unstacked.<locals>.Layers stacks it along 1 axis " \
            "('layers',) and it declares 2 axes ('embed', 'hidden') more, as for an array of " \
            "rank 3 elsewhere in the tree: it is derived from that stacked array, not a copy " \
            "of it." in text  # fmt: skip
        assert "  Also at [1][0].v_col.layers.kernel." in text
        assert "not stacked" not in text
        assert "give that state specs of its own, for example replicated, jax.tree.map(" in text

    def test_the_hint_names_only_the_field_whose_declaration_fits_every_array(self) -> None:
        """Issue 38, item 8: the kernel's hint offered `Sharded[Linear, None]` on 'dot1' too,
        which leaves w2 out of the stack; and with only the kernel stacked, 'layers', which
        would stack w2 as well."""

        @jdc.pytree_dataclass
        class Plain:
            layers: Block

        every = Plain(jdc.replace(stack().layers, norms=(jnp.ones((3, 8)),) * 2))
        text = sharding_error(lambda: jdc.partition_specs(every, RULES))
        assert "field 'layers' of TestStackedLayers.test_the_hint_names_only_the_field_whose_" \
            "declaration_fits_every_array.<locals>.Plain (Sharded[Block, None]), or logical " \
            "names for None" in text  # fmt: skip
        assert "Sharded[Linear, None]" not in text
        kernel_only = Plain(jdc.replace(block(), dot1=Linear(jnp.ones((3, 8, 16)))))
        text = sharding_error(lambda: jdc.partition_specs(kernel_only, RULES))
        assert "- field 'kernel' of Linear at .layers.dot1.kernel (f32[3,8,16]): declares 2 " \
            "axes ('embed', 'hidden') for an array of rank 3. If it is one of a stack of " \
            "layers (made by jax.vmap, consumed by lax.scan), declare the 1 axis of the stack " \
            "on the field that holds it: field 'dot1' of Block (Sharded[Linear, None]), or " \
            "logical names for None." in text  # fmt: skip
        assert "Sharded[Block, None]" not in text

    def test_check_shardings_of_a_placed_stack(self) -> None:
        placed = jax.device_put(stack(), jdc.shardings(stack(), RULES, mesh=ONE_DEVICE))
        jdc.check_shardings(placed, RULES, mesh=ONE_DEVICE)
        assert placed.layers.w2.sharding.spec == P(None, "model", None)


class TestMessages:
    @jdc.pytree_dataclass
    class Typo:
        kernel: jdc.Sharded[jax.Array, "embed", "hiden"]

    def test_one_entry_per_field_however_many_copies_carry_it(self) -> None:
        params = [self.Typo(jnp.ones((8, 16)))]
        state = {"params": params, "opt": optax.adam(1e-3).init(params)}
        text = sharding_error(lambda: jdc.partition_specs(state, RULES, mesh=MESH))
        lines = text.splitlines()
        assert lines[0] == (
            "1 sharding declaration does not fit (mesh {'data': 2, 'model': 4}; rules [('batch', "
            "'data'), ('hidden', 'model'), ('embed', None), ('stage', 'data')]):"
        )
        assert lines[1].startswith(
            "- field 'kernel' of TestMessages.Typo at ['opt'][0].mu[0].kernel (f32[8,16]): the "
            "logical axis 'hiden' is neither in the rules nor a mesh axis: did you mean 'hidden'?"
        )
        assert lines[2:] == ["  Also at ['opt'][0].nu[0].kernel, ['params'][0].kernel."]

    def test_a_name_given_twice_is_one_declaration_with_each_problem_once(self) -> None:
        @jdc.pytree_dataclass
        class Twice:
            w: jdc.Sharded[jax.Array, "hiden", "hiden"]

        lines = sharding_error(
            lambda: jdc.partition_specs(Twice(jnp.ones((8, 8))), RULES, mesh=MESH)
        )
        lines = lines.splitlines()
        assert lines[0].startswith("1 sharding declaration does not fit")
        assert len(lines) == 3 and "names the axis 'hiden' on several dimensions" in lines[1]
        assert "the logical axis 'hiden' is neither in the rules" in lines[2]

    def test_a_hint_names_the_field_that_holds_its_own_leaf(self) -> None:
        @jdc.pytree_dataclass
        class Pair:
            enc: Linear
            dec: Linear

        rank_3 = Linear(jnp.ones((2, 16, 8)))
        text = sharding_error(lambda: jdc.partition_specs(Pair(rank_3, rank_3), RULES, mesh=MESH))
        (enc,) = [
            line
            for line in text.splitlines()
            if line.startswith("- field 'kernel' of Linear at .enc")
        ]
        (dec,) = [
            line
            for line in text.splitlines()
            if line.startswith("- field 'kernel' of Linear at .dec")
        ]
        assert "field 'enc' of " in enc and "field 'dec' of " in dec

    def test_many_copies_are_counted(self) -> None:
        typos = [self.Typo(jnp.ones((8, 16)))] * 6
        text = sharding_error(lambda: jdc.partition_specs(typos, RULES, mesh=MESH))
        assert text.splitlines()[-1] == "  Also at [1].kernel, [2].kernel, [3].kernel and 2 more."

    def test_a_mismatch_in_every_copy_is_one_entry_counting_the_arrays(self) -> None:
        @jdc.pytree_dataclass
        class Row:
            w: jdc.Sharded[jax.Array, "batch"]

        elsewhere = jdc.shardings(Row(jnp.ones(4)), {"batch": "model"}, mesh=ONE_DEVICE)
        wrong = jax.device_put(Row(jnp.ones(4)), elsewhere)
        text = sharding_error(lambda: jdc.check_shardings([wrong] * 3, RULES))
        assert text.splitlines()[:3] == [
            "3 arrays do not carry their declared shardings (no mesh given; rules [('batch', "
            "'data'), ('hidden', 'model'), ('embed', None), ('stage', 'data')]):",
            "- field 'w' of TestMessages.test_a_mismatch_in_every_copy_is_one_entry_counting_the"
            "_arrays.<locals>.Row at [0].w (f32[4@model]): has P('model'), declared P('data')",
            "  Also at [1].w, [2].w.",
        ]

    def test_without_rules_no_rule_is_blamed(self) -> None:
        text = sharding_error(lambda: jdc.partition_specs(self.Typo(jnp.ones((8, 16))), mesh=MESH))
        assert "(no rule" not in text and "the rule" not in text and "through" not in text
        assert "shards along 'embed', 'hiden', which the mesh does not have. Use its axes " \
            "('data', 'model'), or give rules that map the name to them." in text  # fmt: skip

    def test_declaration_errors_carry_the_header_too(self) -> None:
        """A declaration that cannot mean anything, met first by a call (its alias defined
        later, an instance made without `__init__`, as pickle makes one), is reported under
        the call's header."""
        later = define(
            """
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Both:
    n: Later = 3

Later = jdc.Static[jdc.Sharded[int, "batch"]]
""",
            "future import",
        )
        unpickled = object.__new__(later.Both)
        object.__setattr__(unpickled, "n", 3)
        text = sharding_error(lambda: jdc.partition_specs([unpickled], RULES, mesh=MESH))
        assert text.startswith("1 sharding declaration does not fit (mesh {'data': 2, 'model': 4}")
        assert "\n- field 'n' of Both is static and declares sharding axes ('batch',)" in text

    def test_the_header_says_where_the_rules_and_mesh_came_from(self) -> None:
        if not hasattr(jax, "set_mesh"):
            pytest.skip("jax.set_mesh: jax 0.7+")
        with jdc.sharding_rules({"embed": None}), jax.set_mesh(ONE_DEVICE):
            text = sharding_error(lambda: jdc.partition_specs(self.Typo(jnp.ones((8, 16)))))
        assert text.startswith(
            "1 sharding declaration does not fit (mesh {'data': 1, 'model': 1} from jax.set_mesh; "
            "rules {'embed': None} from jdc.sharding_rules):"
        )

    def test_a_check_under_jit_that_cannot_be_made_names_the_field(self) -> None:
        def check(linear: Linear) -> jax.Array:
            jdc.check_shardings(linear, RULES, mesh=ONE_DEVICE)
            return linear.kernel

        text = sharding_error(lambda: jax.jit(check)(Linear(jnp.ones((8, 16)))))
        assert text.startswith(
            "check_shardings met a traced array whose type carries no sharding, field 'kernel' "
            "of Linear at .kernel (mesh {'data': 1, 'model': 1}; rules "
        )


class TestRulesContext:
    def test_every_function_takes_the_rules_of_the_block(self) -> None:
        layer = block()
        with jdc.sharding_rules(RULES):
            specs = jdc.partition_specs(layer)
            shardings = jdc.shardings(layer, mesh=ONE_DEVICE)
            shapes = jdc.sharded_shapes(layer, mesh=ONE_DEVICE)
            jdc.check_shardings(jax.device_put(layer, shardings))
        assert specs == jdc.partition_specs(layer, RULES)
        assert shardings == jdc.shardings(layer, RULES, mesh=ONE_DEVICE)
        assert shapes == jdc.sharded_shapes(layer, RULES, mesh=ONE_DEVICE)

    def test_explicit_rules_win_blocks_nest_and_end(self) -> None:
        layer = Linear(jnp.ones((8, 16)))
        with jdc.sharding_rules({"embed": None, "hidden": "model"}):
            assert jdc.partition_specs(layer, {"embed": "data", "hidden": None}).kernel == P(
                "data", None
            )
            with jdc.sharding_rules({"embed": "model", "hidden": "data"}):
                assert jdc.partition_specs(layer).kernel == P("model", "data")
            assert jdc.partition_specs(layer).kernel == P(None, "model")
        assert jdc.partition_specs(layer).kernel == P("embed", "hidden")  # no rules: mesh axes

    def test_the_block_is_its_threads_own(self) -> None:
        seen: list[Any] = []
        layer = Linear(jnp.ones((8, 16)))
        with jdc.sharding_rules({"embed": None, "hidden": "model"}):
            thread = threading.Thread(target=lambda: seen.append(jdc.partition_specs(layer)))
            thread.start()
            thread.join()
        assert seen[0].kernel == P("embed", "hidden")

    def test_malformed_rules_are_refused_where_the_block_starts(self) -> None:
        with pytest.raises(TypeError, match=r"the sharding rule \('mlp',\) is not a"):
            jdc.sharding_rules([("mlp",)]).__enter__()  # type: ignore[list-item]

    def test_the_mesh_comes_from_jax_set_mesh(self) -> None:
        if not hasattr(jax, "set_mesh"):
            pytest.skip("jax.set_mesh: jax 0.7+")
        layer = block()
        with jax.set_mesh(ONE_DEVICE), jdc.sharding_rules(RULES):
            assert jdc.shardings(layer) == jdc.shardings(layer, RULES, mesh=ONE_DEVICE)
            placed = jax.device_put(layer, jdc.shardings(layer))
            jdc.check_shardings(placed)
            assert jax.jit(lambda x: jdc.constrain_shardings(2 * x))(placed.w2).shape == (16, 8)
        with pytest.raises(TypeError, match=r"jdc.shardings needs a mesh"):
            jdc.shardings(layer, RULES)


class TestConstraints:
    """On one device every layout is the same, so what a constraint asked for shows only in
    the types of explicit axes (the 8-device child checks the placements)."""

    @pytest.fixture
    def explicit(self) -> Any:
        axis_type = getattr(jax.sharding, "AxisType", None)
        if not hasattr(jax, "set_mesh") or axis_type is None:
            pytest.skip("explicit axes and jax.set_mesh: jax 0.7+")
        types = (axis_type.Explicit,) * 2
        return jax.make_mesh((1, 1), ("data", "model"), axis_types=types)

    def test_a_tree_is_constrained_as_declared_inside_jit(self, explicit: Mesh) -> None:
        seen: list[Any] = []

        @jax.jit
        def step(layer: Block) -> Block:
            result = jdc.constrain_shardings(jax.tree.map(lambda x: x + 1, layer), RULES)
            seen.append(jax.tree.map(lambda x: jax.typeof(x).sharding.spec, result))
            return result

        with jax.set_mesh(explicit):
            step(block())
        assert seen[0].dot1.kernel == P(None, "model") and seen[0].w2 == P("model", None)
        assert seen[0].scale == P()

    def test_an_array_is_constrained_by_logical_names(self, explicit: Mesh) -> None:
        seen: list[Any] = []

        def hidden(x: jax.Array) -> jax.Array:
            y = jdc.with_logical_constraint(x, ("batch", "hidden"), RULES)
            seen.append(jax.typeof(y).sharding.spec)
            return y

        with jax.set_mesh(explicit):
            jax.jit(hidden)(jnp.ones((4, 8)))
        assert seen == [P("data", "model")]

    def test_a_python_number_outside_jit_is_kept_as_it_is(self) -> None:
        @jdc.pytree_dataclass
        class Scaled:
            w: jdc.Sharded[jax.Array, "hidden"]
            gain: float = 0.5

        constrained = jdc.constrain_shardings(Scaled(jnp.ones(4)), RULES, mesh=ONE_DEVICE)
        assert constrained.gain == 0.5 and type(constrained.gain) is float

    def test_a_replicated_declaration_fits_an_array_on_one_device(self) -> None:
        @jdc.pytree_dataclass
        class Row:
            w: jdc.Sharded[jax.Array, None]

        jdc.check_shardings(Row(jax.device_put(jnp.ones(4), jax.devices()[0])), mesh=ONE_DEVICE)

    def test_bad_logical_axes_are_refused_naming_the_array_and_the_fix(self) -> None:
        with pytest.raises(TypeError, match=r"got the axes 'batch': give a tuple"):
            jdc.with_logical_constraint(jnp.ones(4), "batch", RULES, mesh=ONE_DEVICE)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"got the axes \('batch', 3\)"):
            jdc.with_logical_constraint(jnp.ones((4, 2)), ("batch", 3), RULES, mesh=ONE_DEVICE)  # type: ignore[arg-type]
        text = sharding_error(
            lambda: jdc.with_logical_constraint(jnp.ones((4, 2)), ("batch",), RULES, mesh=MESH)
        )
        assert text.startswith(
            "1 problem with the logical axes ('batch',) of with_logical_constraint (mesh "
            "{'data': 2, 'model': 4}; rules [('batch', 'data')"
        )
        assert (
            "\n- the array (f32[4,2]): declares 1 axis ('batch',) for an array of rank 2." in text
        )

    def test_a_constraint_needs_a_mesh(self) -> None:
        with pytest.raises(TypeError, match=r"jdc.constrain_shardings needs a mesh: give mesh="):
            jdc.constrain_shardings(block(), RULES)


def value(variable: Any) -> Any:
    """The array of an nnx variable, on every flax version (it is the variable's one leaf)."""
    (array,) = jax.tree.leaves(variable)
    return array


class TestCheckpointsFlaxWrote:
    """A checkpoint flax wrote is nested dicts keyed by module attribute names (nnx) or
    submodule names (linen), each nnx variable (and each boxed linen parameter) stored as
    `{'value': array}`: with fields named as the keys, the mapping of
    docs/migrating/from-flax-partitioning.md restores it into our classes."""

    @staticmethod
    def restore(directory: Path, abstract: Any) -> Any:
        ocp = pytest.importorskip("orbax.checkpoint")
        from flax_checkpoints import restore_flax_checkpoint

        with ocp.StandardCheckpointer() as checkpointer:
            return restore_flax_checkpoint(
                checkpointer, directory, abstract, RULES, mesh=ONE_DEVICE
            )

    @staticmethod
    def save(tree: Any, into: Path) -> Path:
        ocp = pytest.importorskip("orbax.checkpoint")
        directory = into / "flax"
        with ocp.StandardCheckpointer() as checkpointer:
            checkpointer.save(directory, tree)
            checkpointer.wait_until_finished()
        return directory

    @jdc.pytree_dataclass
    class Dense:
        kernel: jdc.Sharded[jax.Array, "embed", "hidden"]
        bias: jdc.Sharded[jax.Array, "hidden"]

    @jdc.pytree_dataclass
    class MLP:
        Dense_0: "TestCheckpointsFlaxWrote.Dense"  # linen's automatic names
        Dense_1: "TestCheckpointsFlaxWrote.Dense"

    @pytest.mark.parametrize("boxed", [True, False], ids=["boxed", "unboxed"])
    def test_linen_params(self, boxed: bool, tmp_path: Path) -> None:
        nn = pytest.importorskip("flax.linen")

        class MLP(nn.Module):  # type: ignore[misc,name-defined]
            @nn.compact
            def __call__(self, x: jax.Array) -> jax.Array:
                for _ in range(2):
                    kernel_init = nn.with_logical_partitioning(
                        nn.initializers.lecun_normal(), ("embed", "hidden")
                    )
                    x = nn.Dense(8, kernel_init=kernel_init)(x)
                return x

        params = MLP().init(jax.random.key(0), jnp.ones((1, 8)))["params"]
        directory = self.save(params if boxed else nn.unbox(params), tmp_path)
        dense = self.Dense(jnp.ones((8, 8)), jnp.ones(8))
        restored = self.restore(directory, jax.eval_shape(lambda: self.MLP(dense, dense)))
        assert type(restored) is self.MLP
        np.testing.assert_array_equal(
            restored.Dense_1.kernel, nn.unbox(params)["Dense_1"]["kernel"]
        )
        assert restored.Dense_0.kernel.sharding.spec == P(None, "model")

    def test_nnx_state(self, tmp_path: Path) -> None:
        nnx = pytest.importorskip("flax.nnx")

        class Model(nnx.Module):  # type: ignore[misc,name-defined]
            def __init__(self, rngs: Any) -> None:
                self.Dense_0 = nnx.Linear(8, 8, rngs=rngs)
                self.Dense_1 = nnx.Linear(8, 8, rngs=rngs)

        state = nnx.state(Model(nnx.Rngs(0)))
        directory = self.save(state, tmp_path)
        dense = self.Dense(jnp.ones((8, 8)), jnp.ones(8))
        restored = self.restore(directory, jax.eval_shape(lambda: self.MLP(dense, dense)))
        np.testing.assert_array_equal(restored.Dense_0.bias, value(state["Dense_0"]["bias"]))
        np.testing.assert_array_equal(restored.Dense_1.kernel, value(state["Dense_1"]["kernel"]))
