"""Checkpoints restored into classes that changed since they were written, as each class
declares (`__jdc_evolution__ = jdc.Evolution(...)`): flax state dicts and bytes, orbax
checkpoints (through `jdc.saved_layout` and `jdc.from_saved_layout`), and 1.6's layout.

The checkpoints are written by `tests/checkpoints/_evolution_writer.py` in a process of its own, with the
classes as they were (`Dense(w, b, dropout_mask)` in `Policy(layers, log_std)`); each test here
restores them into the classes as they are now, one kind of change at a time, and every
undeclared change is refused, each difference listed by path.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import define, run_python

import jax_dataclasses as jdc

ROOT = Path(__file__).resolve().parents[2]


# -- the classes as they are now -------------------------------------------------------------


@jdc.pytree_dataclass
class Dense:
    """Unchanged."""

    w: jax.Array
    b: jax.Array
    dropout_mask: jax.Array
    activation: jdc.Static[str] = "tanh"


@jdc.pytree_dataclass
class PolicyAdded:
    layers: list[Any]  # Of `Dense`, or of the layers below.
    log_std: jax.Array
    obs_mean: jax.Array = jnp.full(3, 7.0)
    name: jdc.Static[str] = "policy"
    __jdc_evolution__ = jdc.Evolution(added=["obs_mean"], v1_6_order=["layers", "log_std"])


@jdc.pytree_dataclass
class DenseRenamed:
    kernel: jax.Array
    b: jax.Array
    dropout_mask: jax.Array
    activation: jdc.Static[str] = "tanh"
    __jdc_evolution__ = jdc.Evolution(
        renamed={"kernel": "w"}, v1_6_order=["kernel", "b", "dropout_mask"]
    )


@jdc.pytree_dataclass
class DenseRemoved:
    w: jax.Array
    b: jax.Array
    activation: jdc.Static[str] = "tanh"
    __jdc_evolution__ = jdc.Evolution(removed=["dropout_mask"])


@jdc.pytree_dataclass
class DenseEvolved:
    """Every kind of change at once."""

    kernel: jax.Array
    bias: jax.Array
    scale: jax.Array = jnp.ones(())
    activation: jdc.Static[str] = "tanh"
    __jdc_evolution__ = jdc.Evolution(
        added=["scale"], renamed={"kernel": "w", "bias": ("b_v2", "b")}, removed=["dropout_mask"]
    )


@jdc.pytree_dataclass
class DenseUndeclared:
    """The same changes, undeclared."""

    kernel: jax.Array
    bias: jax.Array
    scale: jax.Array = jnp.ones(())
    activation: jdc.Static[str] = "tanh"


@jdc.pytree_dataclass
class PolicyUndeclared:
    layers: list[DenseUndeclared]
    log_std: jax.Array
    obs_mean: jax.Array = jnp.full(3, 7.0)
    name: jdc.Static[str] = "policy"


@jdc.pytree_dataclass
class PolicyOf:
    """A policy of any of the layers above, unchanged itself."""

    layers: list[Any]
    log_std: jax.Array
    name: jdc.Static[str] = "policy"


def layer(kind: type, activation: str) -> Any:
    """A target layer of `kind` (zeros, in the shapes the checkpoint has)."""
    arrays = {
        "w": jnp.zeros((2, 3)),
        "kernel": jnp.zeros((2, 3)),
        "b": jnp.zeros(3),
        "bias": jnp.zeros(3),
        "dropout_mask": jnp.zeros(3, jnp.bool_),
    }
    fields = [f.name for f in jdc.fields(kind) if f.name in arrays]
    return kind(**{name: arrays[name] for name in fields}, activation=activation)


def target(policy: type, dense: type) -> Any:
    return policy([layer(dense, "relu"), layer(dense, "tanh")], jnp.zeros(2), name="target")


SAVED_W = [np.arange(6.0).reshape(2, 3), np.arange(100, 106.0).reshape(2, 3)]
SAVED_B = [np.arange(10, 13.0), np.arange(110, 113.0)]
SAVED_LOG_STD = np.arange(-2.0, 0.0)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkpoints `tests/checkpoints/_evolution_writer.py` writes with the classes as they were."""
    pytest.importorskip("flax.serialization")
    pytest.importorskip("orbax.checkpoint")
    directory = tmp_path_factory.mktemp("written")
    run_python([str(ROOT / "tests" / "checkpoints" / "_evolution_writer.py"), str(directory)])
    return directory


def from_flax(path: Path, into: Any) -> Any:
    from flax import serialization

    return serialization.from_bytes(into, (path / "policy.msgpack").read_bytes())


def from_orbax(path: Path, into: Any) -> Any:
    import orbax.checkpoint as ocp

    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, into)
    with ocp.StandardCheckpointer() as checkpointer:
        metadata = checkpointer.metadata((path / "orbax").absolute())
        restored = checkpointer.restore(
            (path / "orbax").absolute(), jdc.saved_layout(abstract, metadata)
        )
    return jdc.from_saved_layout(abstract, restored)


def from_orbax_1_6(path: Path, into: Any) -> Any:
    import orbax.checkpoint as ocp

    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, into)
    with ocp.StandardCheckpointer() as checkpointer:
        restored = checkpointer.restore((path / "orbax-1.6").absolute(), jdc.v1_6_layout(abstract))
    return jdc.from_v1_6_layout(abstract, restored)


RESTORES = {"flax": from_flax, "orbax": from_orbax, "orbax 1.6 layout": from_orbax_1_6}


def assert_saved_values(policy: Any, w: str = "w", b: str = "b") -> None:
    assert [layer.activation for layer in policy.layers] == ["relu", "tanh"]  # the target's
    assert policy.name == "target"
    for index, saved in enumerate(policy.layers):
        np.testing.assert_array_equal(getattr(saved, w), SAVED_W[index])
        np.testing.assert_array_equal(getattr(saved, b), SAVED_B[index])
    np.testing.assert_array_equal(policy.log_std, SAVED_LOG_STD)


# -- each kind of change, declared -----------------------------------------------------------


@pytest.mark.subprocess
@pytest.mark.parametrize("restore", RESTORES.values(), ids=RESTORES.keys())
def test_an_added_field_takes_the_targets_value_or_its_default(written: Path, restore: Any) -> None:
    """What the checkpoint lacks, the target supplies: its value where it holds one (flax
    restores into `into`), the class default where it is abstract (the orbax restores here
    take `ShapeDtypeStruct`s)."""
    into = target(PolicyAdded, Dense)
    into = jdc.replace(into, obs_mean=jnp.full(3, 5.0))
    restored = restore(written, into)
    assert type(restored) is PolicyAdded
    assert_saved_values(restored)
    expected = 5.0 if restore is from_flax else 7.0
    np.testing.assert_array_equal(restored.obs_mean, [expected] * 3)


@pytest.mark.subprocess
@pytest.mark.parametrize("restore", RESTORES.values(), ids=RESTORES.keys())
def test_a_renamed_field_is_found_under_its_earlier_name(written: Path, restore: Any) -> None:
    restored = restore(written, target(PolicyOf, DenseRenamed))
    assert {type(layer) for layer in restored.layers} == {DenseRenamed}
    assert_saved_values(restored, w="kernel")


@pytest.mark.subprocess
@pytest.mark.parametrize("restore", [from_flax, from_orbax], ids=["flax", "orbax"])
def test_a_removed_field_is_dropped(written: Path, restore: Any) -> None:
    restored = restore(written, target(PolicyOf, DenseRemoved))
    assert {type(layer) for layer in restored.layers} == {DenseRemoved}
    assert_saved_values(restored)
    assert all(set(vars(layer)) == {"w", "b", "activation"} for layer in restored.layers)


@pytest.mark.subprocess
@pytest.mark.parametrize("restore", [from_flax, from_orbax], ids=["flax", "orbax"])
def test_nested_classes_and_lists_of_them_evolve_independently(written: Path, restore: Any) -> None:
    restored = restore(written, target(PolicyAdded, DenseEvolved))
    assert type(restored) is PolicyAdded
    assert_saved_values(restored, w="kernel", b="bias")
    np.testing.assert_array_equal(restored.obs_mean, [7.0, 7.0, 7.0])
    assert [float(layer.scale) for layer in restored.layers] == [1.0, 1.0]


PLACED_DEFAULT = """
import jax, jax.numpy as jnp
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Dense:
    kernel: jax.Array
    scale: jax.Array = jnp.ones(3)
    __jdc_evolution__ = jdc.Evolution(added=["scale"])

second = jax.sharding.SingleDeviceSharding(jax.devices()[1])
to_second = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=second)
abstract = jax.tree.map(to_second, jax.eval_shape(lambda: Dense(jnp.zeros(3))))
dense = jdc.from_saved_layout(abstract, {"kernel": jax.device_put(jnp.zeros(3), second)})
print(dense.scale.sharding == second, dense.scale.tolist())
"""


@pytest.mark.subprocess
def test_an_added_default_takes_the_targets_sharding() -> None:
    """On the second of two devices, where the default (made on the first) is not."""
    output = run_python(["-c", PLACED_DEFAULT], 2)
    assert output.split("\n")[0] == "True [1.0, 1.0, 1.0]"


# -- undeclared changes: one error, every difference ----------------------------------------


@pytest.mark.subprocess
def test_flax_refuses_undeclared_changes_listing_every_class(written: Path) -> None:
    with pytest.raises(ValueError) as caught:
        from_flax(written, target(PolicyUndeclared, DenseUndeclared))
    message = str(caught.value)
    assert message.startswith(
        "the state dict does not fit the PolicyUndeclared at path '.': 3 problems:"
    )
    assert "PolicyUndeclared at path '.' has missing field(s) 'obs_mean';" in message
    for index in (0, 1):
        assert (
            f"the state dict for DenseUndeclared at path './layers/{index}' has missing field(s) "
            "'kernel', 'bias', 'scale' and unknown field(s) 'w', 'b', 'dropout_mask';"
        ) in message
    assert "jdc.Evolution" in message


@pytest.mark.subprocess
def test_orbax_refuses_undeclared_changes_listing_every_difference(written: Path) -> None:
    with pytest.raises(ValueError) as caught:
        from_orbax(written, target(PolicyUndeclared, DenseUndeclared))
    lines = str(caught.value).splitlines()
    assert lines[0].startswith(
        "the checkpoint does not fit the target: 13 differences that no class"
    )
    expected = {"- .obs_mean: field 'obs_mean' of PolicyUndeclared is not in the checkpoint"}
    for index in (0, 1):
        for name in ("kernel", "bias", "scale"):
            expected.add(f"- .layers[{index}].{name}: field {name!r} of DenseUndeclared is not in")
        for name in ("w", "b", "dropout_mask"):
            expected.add(
                f"- .layers[{index}].{name}: the checkpoint's entry {name!r} is not a field"
            )
    assert len(lines) == 14
    for start in expected:
        assert any(line.startswith(start) for line in lines[1:]), start


@pytest.mark.subprocess
def test_orbax_refuses_changed_shapes_and_dtypes(written: Path) -> None:
    into = target(PolicyOf, Dense)
    into = jdc.replace(into, log_std=jnp.zeros(3, jnp.bfloat16))
    with jdc.copy_and_mutate(into, validate=False) as into:
        into.layers[1].b = jnp.zeros(3, jnp.int32)
    with pytest.raises(ValueError) as caught:
        from_orbax(written, into)
    assert str(caught.value).splitlines()[1:] == [
        "- .layers[1].b: dtype float32 in the checkpoint, int32 in the target",
        "- .log_std: shape (2,) in the checkpoint, (3,) in the target",
        "- .log_std: dtype float32 in the checkpoint, bfloat16 in the target",
    ]


@pytest.mark.subprocess
def test_the_1_6_layout_refuses_a_removed_field(written: Path) -> None:
    with pytest.raises(
        ValueError, match="DenseRemoved declares the field\\(s\\) 'dropout_mask' removed"
    ):
        from_orbax_1_6(written, target(PolicyOf, DenseRemoved))


@pytest.mark.subprocess
def test_a_1_6_checkpoint_missing_an_undeclared_field_is_refused_by_orbax(written: Path) -> None:
    with pytest.raises(ValueError):  # orbax's own message: the trees differ
        from_orbax_1_6(written, target(PolicyUndeclared, DenseUndeclared))


@pytest.mark.subprocess
def test_a_positional_checkpoint_given_to_saved_layout_says_which_function_reads_it(
    written: Path,
) -> None:
    import orbax.checkpoint as ocp

    into = jax.tree.map(ocp.utils.to_shape_dtype_struct, target(PolicyOf, Dense))
    with ocp.StandardCheckpointer() as checkpointer:
        metadata = checkpointer.metadata((written / "orbax-1.6").absolute())
    with pytest.raises(ValueError, match=r"1\.6; restore it with jdc\.v1_6_layout"):
        jdc.saved_layout(into, metadata)


@pytest.mark.subprocess
def test_an_optax_state_in_an_orbax_checkpoint(tmp_path: Path) -> None:
    """Named tuples (optax's states) are stored by field name, and found there again."""
    ocp = pytest.importorskip("orbax.checkpoint")
    optax = pytest.importorskip("optax")
    layers = [layer(DenseRenamed, "tanh")]
    state = {"params": layers, "opt": optax.adam(1e-3).init(layers)}
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "state", state)
        checkpointer.wait_until_finished()
        metadata = checkpointer.metadata(tmp_path / "state")
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
        restored = checkpointer.restore(tmp_path / "state", jdc.saved_layout(abstract, metadata))
    back = jdc.from_saved_layout(state, restored)
    assert jax.tree.structure(back) == jax.tree.structure(state)
    assert back["opt"][0].mu[0].kernel.shape == (2, 3)


@pytest.mark.parametrize(
    ("restored", "problem"),
    [
        ({"layers": [{"w": np.ones((2, 3)), "b": np.ones(3), "dropout_mask": np.ones(3)}]},
         "at key path .layers: restored holds the entries '0' where the target has the entries "
         "'0', '1'"),
        ({"layers": np.ones(2)},
         "at key path .layers: restored holds an array float64[2] where the target has the "
         "entries '0', '1'"),
        ({"layers": [{"w": {"x": np.ones(1)}, "b": np.ones(3), "dropout_mask": np.ones(3)}] * 2},
         "at key path .layers[0].w: restored holds a dict where the target has an array "
         "float32[2, 3]"),
    ],
    ids=["a list one item short", "an array for a list", "a dict for an array"],
)  # fmt: skip
def test_from_saved_layout_refuses_what_saved_layout_does_not_give(
    restored: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError) as caught:
        jdc.from_saved_layout(target(PolicyOf, Dense), {**restored, "log_std": np.ones(2)})
    assert problem in str(caught.value)


# -- without files ------------------------------------------------------------------------------


def test_a_field_under_two_of_its_names_is_refused() -> None:
    serialization = pytest.importorskip("flax.serialization")
    state = {"kernel": np.ones(1), "w": np.ones(1), "b": np.ones(1), "dropout_mask": np.ones(1)}
    with pytest.raises(
        ValueError,
        match=r"DenseRenamed at path '\.' has field 'kernel' under "
        r"several names \('kernel', 'w'\)",
    ):
        serialization.from_state_dict(layer(DenseRenamed, "tanh"), state)
    with pytest.raises(
        ValueError,
        match=r"field 'kernel' of DenseRenamed is in the checkpoint "
        r"under several names \('kernel', 'w'\)",
    ):
        jdc.saved_layout(layer(DenseRenamed, "tanh"), state)


def test_each_earlier_name_of_a_field_is_looked_for() -> None:
    into = layer(DenseEvolved, "tanh")
    for earlier in ("b_v2", "b"):
        state = {"kernel": np.ones((2, 3)), earlier: np.full(3, 2.0), "dropout_mask": np.ones(3)}
        assert set(jdc.saved_layout(into, state)) == {"kernel", earlier, "dropout_mask"}
        np.testing.assert_array_equal(jdc.from_saved_layout(into, state).bias, [2.0, 2.0, 2.0])


def test_strict_by_default() -> None:
    serialization = pytest.importorskip("flax.serialization")
    state = serialization.to_state_dict(layer(Dense, "tanh"))
    del state["dropout_mask"]
    with pytest.raises(ValueError, match="has missing field\\(s\\) 'dropout_mask'"):
        serialization.from_state_dict(layer(Dense, "tanh"), state)
    with pytest.raises(ValueError, match="field 'dropout_mask' of Dense is not in the checkpoint"):
        jdc.saved_layout(layer(Dense, "tanh"), state)


def test_an_added_field_with_a_default_factory_takes_a_new_value_each_time() -> None:
    serialization = pytest.importorskip("flax.serialization")

    @jdc.pytree_dataclass
    class Counted:
        w: jax.Array
        seen: list[int] = jdc.field(default_factory=list)
        __jdc_evolution__ = jdc.Evolution(added=["seen"])

    saved = {"w": np.ones(2)}
    abstract = jax.eval_shape(lambda: Counted(jnp.zeros(2)))
    first = serialization.from_state_dict(abstract, saved)
    second = jdc.from_saved_layout(abstract, saved)
    assert first.seen == [] and second.seen == [] and first.seen is not second.seen
    assert first.seen is not abstract.seen and second.seen is not abstract.seen
    assert jdc.from_saved_layout(Counted(jnp.zeros(2), [1]), saved).seen == [1]  # the target's


# -- the declaration ---------------------------------------------------------------------------


def test_a_subclass_inherits_its_bases_declarations() -> None:
    @jdc.pytree_dataclass
    class Scaled(DenseEvolved):
        gain: jax.Array = jnp.ones(())
        __jdc_evolution__ = jdc.Evolution(added=["gain"])

    state = {"w": np.ones((2, 3)), "b": np.full(3, 2.0), "dropout_mask": np.ones(3)}
    restored = jdc.from_saved_layout(Scaled(jnp.zeros((2, 3)), jnp.zeros(3)), state)
    assert float(restored.gain) == 1.0 and float(restored.scale) == 1.0
    np.testing.assert_array_equal(restored.kernel, np.ones((2, 3)))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "x: jax.Array\n__jdc_evolution__ = jdc.Evolution(added=['y'])",
            "'y' is declared added or renamed, but is not a field of C",
        ),
        (
            "x: jax.Array\n__jdc_evolution__ = jdc.Evolution(added=['x'])",
            "field 'x' of C is declared added, but has no default",
        ),
        (
            "x: jdc.Static[int] = 0\n__jdc_evolution__ = jdc.Evolution(added=['x'])",
            "field 'x' of C is static",
        ),
        (
            "x: jax.Array\ny: jax.Array\n__jdc_evolution__ = jdc.Evolution(renamed={'x': 'y'})",
            "'y' is declared an earlier name, but is a field of C",
        ),
        (
            "x: jax.Array\n__jdc_evolution__ = jdc.Evolution(removed=['x'])",
            "'x' is declared removed, but is a field of C",
        ),
        (
            "x: jax.Array\n__jdc_evolution__ = jdc.Evolution(renamed={'x': 'w'}, removed=['w'])",
            "'w' is declared more than once for C",
        ),
        (
            "x: jax.Array\n__jdc_evolution__ = {'added': ['x']}",
            "__jdc_evolution__ of C is {'added': ['x']}, not a jdc.Evolution",
        ),
    ],
)
def test_a_declaration_that_cannot_hold_is_refused_naming_class_and_field(
    body: str, message: str
) -> None:
    source = "@jdc.pytree_dataclass\nclass C:\n" + "".join(
        f"    {line}\n" for line in body.splitlines()
    )
    with pytest.raises(TypeError) as caught:
        exec(source, {"jdc": jdc, "jax": jax})
    assert message in str(caught.value)


def test_a_declaration_is_checked_again_once_pending_names_are_decided() -> None:
    """A field an alias defined later makes static cannot be `added` (static values are not
    stored): refused at the class's first use, as when the class was decorated."""
    module = define(
        """
import jax
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class C:
    x: jax.Array
    n: Count = 3
    __jdc_evolution__ = jdc.Evolution(added=["n"])

Count = jdc.Static[int]
""",
        "future import",
    )
    with pytest.raises(TypeError, match="field 'n' of C"):
        module.C(jnp.ones(2))


@pytest.mark.parametrize(
    "arguments",
    [{"added": 3}, {"added": ["not a name"]}, {"renamed": {"x": 3}}, {"removed": [None]}],
)
def test_evolution_takes_field_names(arguments: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="takes field names"):
        jdc.Evolution(**arguments)


def test_evolution_is_a_value() -> None:
    evolution = jdc.Evolution(added="scale", renamed={"kernel": "w"}, removed=("dropout",))
    assert evolution == jdc.Evolution(
        added=["scale"], renamed={"kernel": ["w"]}, removed=["dropout"]
    )
    assert pickle.loads(pickle.dumps(evolution)) == evolution
    assert hash(evolution) == hash(pickle.loads(pickle.dumps(evolution)))
    assert repr(evolution) == (
        "Evolution(added=('scale',), renamed={'kernel': ('w',)}, removed=('dropout',))"
    )
    with pytest.raises(AttributeError):
        evolution.added = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        evolution.renamed["bias"] = ("b",)  # type: ignore[index]
