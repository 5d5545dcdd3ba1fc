"""flax.serialization of pytree dataclasses: state dicts, bytes, errors, import order."""

from __future__ import annotations

import dataclasses
import operator
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jax_dataclasses as jdc

serialization = pytest.importorskip("flax.serialization")

ROOT = Path(__file__).resolve().parents[2]


@jdc.pytree_dataclass
class Inner:
    w: Any
    tag: jdc.Static[str] = "inner"


@jdc.pytree_dataclass
class Outer:
    a: Inner
    items: list[Any]
    table: dict[str, Any]
    maybe: Any = None


@jdc.pytree_dataclass
class Strict:
    """Rejects anything but a positive jax.Array, as validation in __post_init__ might."""

    x: Any

    def __post_init__(self) -> None:
        if not isinstance(self.x, jax.Array) or not bool((self.x > 0).all()):
            raise ValueError("x must be a positive jax.Array")


@jdc.pytree_dataclass
class CustomInit:
    total: Any
    count: int = dataclasses.field(init=False, default=0)
    calls = 0

    def __init__(self, *parts: float) -> None:
        type(self).calls += 1
        self.total = jnp.asarray(sum(parts))


@jdc.pytree_dataclass
class WithInitFalse:
    x: Any
    derived: Any = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "derived", self.x * 2)


@jdc.pytree_dataclass(slots=True)
class Slotted:
    x: Any
    tag: jdc.Static[int] = 0


class Adopted(Inner):
    """An undecorated subclass without new fields: a pytree with Inner's fields."""


def make_outer() -> Outer:
    return Outer(
        a=Inner(jnp.arange(3.0)),
        items=[Inner(jnp.ones((2, 2)), "second"), 4.5, None],
        table={"k": np.int32(7), "nested": (Inner(1.0), jnp.zeros(1))},
    )


def assert_trees_equal(actual: object, expected: object) -> None:
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)


# -- round trips ----------------------------------------------------------------------------


def test_state_dict_holds_children_by_field_name_and_no_statics() -> None:
    state = serialization.to_state_dict(make_outer())
    assert set(state) == {"a", "items", "table", "maybe"}
    assert set(state["a"]) == {"w"}  # The static `tag` is not stored.
    assert set(state["items"]) == {"0", "1", "2"}
    assert set(state["items"]["0"]) == {"w"}
    assert state["maybe"] is None
    assert state["table"]["nested"]["0"] == {"w": 1.0}


def test_state_dict_round_trip_into_another_target() -> None:
    tree = make_outer()
    target = jax.tree.map(jnp.zeros_like, tree)
    restored = serialization.from_state_dict(target, serialization.to_state_dict(tree))
    assert jax.tree.structure(restored) == jax.tree.structure(tree)
    assert all(map(operator.is_, jax.tree.leaves(restored), jax.tree.leaves(tree)))
    assert restored.items[0].tag == "second"


def test_bytes_round_trip() -> None:
    tree = make_outer()
    restored = serialization.from_bytes(tree, serialization.to_bytes(tree))
    assert type(restored) is Outer
    assert_trees_equal(restored, tree)


def test_msgpack_round_trip_of_the_state_dict() -> None:
    tree = make_outer()
    encoded = serialization.msgpack_serialize(serialization.to_state_dict(tree))
    restored = serialization.from_state_dict(tree, serialization.msgpack_restore(encoded))
    assert_trees_equal(restored, tree)


def test_restore_takes_static_fields_from_the_target() -> None:
    state = serialization.to_state_dict(Inner(jnp.ones(2), tag="saved"))
    restored = serialization.from_state_dict(Inner(jnp.zeros(2), tag="target"), state)
    assert restored.tag == "target"
    np.testing.assert_array_equal(restored.w, jnp.ones(2))


def test_restored_instances_flatten_to_their_restored_fields() -> None:
    restored = serialization.from_state_dict(Inner(jnp.zeros(2)), {"w": np.full(2, 3.0)})
    leaves, treedef = jax.tree.flatten(restored)
    assert leaves[0] is restored.w
    assert jax.tree.unflatten(treedef, [5.0]) == Inner(5.0)


def test_restore_never_runs_init_or_post_init() -> None:
    target = Strict(jnp.ones(2))
    raw = {"x": np.array([-1.0, 0.0])}  # Strict.__post_init__ would reject this.
    restored = serialization.from_state_dict(target, raw)
    assert isinstance(restored, Strict)
    np.testing.assert_array_equal(restored.x, raw["x"])
    assert isinstance(serialization.from_bytes(target, serialization.to_bytes(restored)), Strict)


def test_custom_init_and_init_false_fields_round_trip() -> None:
    custom = CustomInit(1.0, 2.0)
    calls = CustomInit.calls
    restored = serialization.from_bytes(custom, serialization.to_bytes(custom))
    assert CustomInit.calls == calls
    assert (restored.total, restored.count) == (3.0, 0)
    assert serialization.to_state_dict(custom) == {"total": custom.total, "count": 0}

    with_derived = WithInitFalse(jnp.arange(2))
    state = serialization.to_state_dict(with_derived)
    assert set(state) == {"x", "derived"}
    state["derived"] = np.array([10, 20])
    restored_derived = serialization.from_state_dict(with_derived, state)
    np.testing.assert_array_equal(restored_derived.derived, [10, 20])


def test_slots_and_adopted_subclasses_round_trip() -> None:
    slotted = Slotted(jnp.arange(2), tag=5)
    restored = serialization.from_bytes(slotted, serialization.to_bytes(slotted))
    assert restored.tag == 5 and type(restored) is Slotted
    np.testing.assert_array_equal(restored.x, [0, 1])

    adopted = Adopted(jnp.ones(1), "adopted")
    assert serialization.to_state_dict(adopted) == {"w": adopted.w}
    restored_adopted = serialization.from_bytes(adopted, serialization.to_bytes(adopted))
    assert type(restored_adopted) is Adopted and restored_adopted.tag == "adopted"


def test_restoring_into_a_target_of_another_shape_is_allowed() -> None:
    restored = serialization.from_state_dict(Inner(jnp.zeros(3)), {"w": np.ones((2, 5))})
    assert restored.w.shape == (2, 5)
    filled = serialization.from_state_dict(Inner(None), {"w": np.ones(2)})
    np.testing.assert_array_equal(filled.w, [1.0, 1.0])
    emptied = serialization.from_state_dict(Inner(jnp.ones(2)), {"w": None})
    assert emptied.w is None


# -- errors ---------------------------------------------------------------------------------


def test_missing_field_names_class_field_and_path() -> None:
    state = serialization.to_state_dict(make_outer())
    del state["items"]["0"]["w"]
    with pytest.raises(ValueError, match=r"Inner at path './items/0' has missing field\(s\) 'w'"):
        serialization.from_state_dict(make_outer(), state)


def test_unknown_fields_are_named() -> None:
    state = serialization.to_state_dict(make_outer())
    state["extra"] = 1
    state["more"] = 2
    with pytest.raises(
        ValueError, match=r"Outer at path '\.' has unknown field\(s\) 'extra', 'more'"
    ):
        serialization.from_state_dict(make_outer(), state)


def test_missing_and_unknown_fields_are_reported_together() -> None:
    with pytest.raises(ValueError, match=r"missing field\(s\) 'w' and unknown field\(s\) 'v'"):
        serialization.from_state_dict(Inner(1.0), {"v": 1.0})


def test_a_stored_static_field_is_unknown_with_a_hint() -> None:
    with pytest.raises(ValueError, match=r"unknown field\(s\) 'tag'.*Static fields are not stored"):
        serialization.from_state_dict(Inner(1.0), {"w": 1.0, "tag": "x"})


def test_a_leaf_where_a_dataclass_is_expected() -> None:
    state = serialization.to_state_dict(make_outer())
    state["table"]["nested"]["0"] = np.ones(3)
    with pytest.raises(
        ValueError, match=r"cannot restore Inner at path './table/nested/0' from a ndarray"
    ):
        serialization.from_state_dict(make_outer(), state)


def test_a_leaf_where_an_empty_dataclass_is_expected() -> None:
    @jdc.pytree_dataclass
    class Config:
        depth: jdc.Static[int] = 3

    with pytest.raises(ValueError, match=r"Config .* expected a state dict with no fields"):
        serialization.from_state_dict(Config(), 1.0)


def test_a_subtree_where_a_leaf_is_expected() -> None:
    state = serialization.to_state_dict(make_outer())
    state["a"]["w"] = {"w": np.ones(3)}
    with pytest.raises(
        ValueError,
        match=r"field 'w' of Inner at path './a'.*holds an array but the state holds a dict",
    ):
        serialization.from_state_dict(make_outer(), state)


def test_a_list_state_with_wrong_keys_names_the_field() -> None:
    state = serialization.to_state_dict(make_outer())
    state["items"] = {"0": state["items"]["0"], "1": 4.5, "x": None}
    with pytest.raises(
        ValueError, match=r"field 'items' of Outer at path '\.'.*lacks the entry '2'"
    ):
        serialization.from_state_dict(make_outer(), state)


def test_truncated_bytes_raise_value_error_at_every_length() -> None:
    tree = make_outer()
    encoded = serialization.to_bytes(tree)
    for length in range(len(encoded)):
        with pytest.raises(ValueError):
            serialization.from_bytes(tree, encoded[:length])


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_corrupted_bytes_raise_or_restore_the_target_class(data: st.DataObject) -> None:
    tree = make_outer()
    encoded = bytearray(serialization.to_bytes(tree))
    for _ in range(data.draw(st.integers(1, 3))):
        encoded[data.draw(st.integers(0, len(encoded) - 1))] = data.draw(st.integers(0, 255))
    try:
        restored = serialization.from_bytes(tree, bytes(encoded))
    except (ValueError, TypeError, SyntaxError):  # Our checks, msgpack's, NumPy's dtype parser.
        return
    assert type(restored) is Outer  # Flipped bits inside array data are not detectable.


def record_call() -> None:
    """What a malicious pickle would run; the test checks that nothing calls it."""
    os.environ["JDC_TEST_PICKLE_RAN"] = "1"


class Exploit:
    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (record_call, ())


def test_crafted_payloads_never_unpickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("deserialization used pickle")

    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.delenv("JDC_TEST_PICKLE_RAN", raising=False)
    exploit = pickle.dumps(Exploit())
    object_array = msgpack.packb(((len(exploit),), "object", exploit), use_bin_type=True)
    payloads = {
        "raw pickle": exploit,
        "object-dtype array": msgpack.packb({"w": msgpack.ExtType(1, object_array)}),
        "unknown extension": msgpack.packb({"w": msgpack.ExtType(42, exploit)}),
    }
    for what, payload in payloads.items():
        with pytest.raises(ValueError) as caught:
            serialization.from_bytes(Inner(jnp.ones(2)), payload)
        if what == "unknown extension":
            assert "field 'w' of Inner" in str(caught.value)
    assert "JDC_TEST_PICKLE_RAN" not in os.environ


# -- property-based round trips -------------------------------------------------------------


@jdc.pytree_dataclass
class Node:
    left: Any
    right: Any
    label: jdc.Static[str] = ""


leaf_values = st.one_of(
    st.none(),
    st.integers(-(2**31), 2**31 - 1),
    st.floats(allow_nan=False, width=32),
    st.booleans(),
    st.builds(np.float32, st.floats(allow_nan=False, width=32)),
    st.lists(st.floats(allow_nan=False, width=32), max_size=4).map(
        lambda xs: jnp.asarray(xs, dtype=jnp.float32)
    ),
    st.lists(st.integers(-100, 100), min_size=1, max_size=6).map(
        lambda xs: np.asarray(xs, dtype=np.int32).reshape(len(xs), 1)
    ),
)
trees = st.recursive(
    leaf_values,
    lambda children: st.one_of(
        st.builds(Node, children, children, st.sampled_from(["", "a", "b"])),
        st.builds(Inner, children, st.sampled_from(["x", "y"])),
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["p", "q", "r"]), children, max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(trees)
def test_state_dict_round_trip_of_random_trees(tree: object) -> None:
    target = jax.tree.map(lambda leaf: None if leaf is None else np.zeros_like(leaf), tree)
    restored = serialization.from_state_dict(target, serialization.to_state_dict(tree))
    assert jax.tree.structure(restored) == jax.tree.structure(tree)
    assert all(map(operator.is_, jax.tree.leaves(restored), jax.tree.leaves(tree)))


@settings(max_examples=60, deadline=None)
@given(trees)
def test_bytes_round_trip_of_random_trees(tree: object) -> None:
    restored = serialization.from_bytes(tree, serialization.to_bytes(tree))
    assert_trees_equal(restored, tree)


# -- import order and optional flax (fresh interpreters) ------------------------------------


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


CLASSES = """
import jax.numpy as jnp
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Model:
    w: object
    name: jdc.Static[str] = "m"
"""

ROUND_TRIP = """
model = Model(jnp.arange(3.0))
restored = serialization.from_bytes(model, serialization.to_bytes(model))
assert serialization.to_state_dict(model) == {"w": model.w}
assert type(restored) is Model and restored.w.tolist() == [0.0, 1.0, 2.0]
"""


@pytest.mark.subprocess
def test_import_jax_dataclasses_does_not_import_flax() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import jax_dataclasses"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "jax_dataclasses" in imported
    heavy = sorted(m for m in imported if m.split(".")[0] in {"flax", "orbax", "msgpack"})
    assert heavy == []


@pytest.mark.subprocess
def test_sharding_and_export_are_imported_when_first_used() -> None:
    """They cost 1.3 ms at import (benchmarks/README.md), the recompilation reports 5.6 ms:
    bound on first use, by any spelling. (`Sharded` itself is a declaration, read with
    `Static`: bound at import.)"""
    run_python(
        """
import sys
import jax_dataclasses as jdc
sharding = ("_sharding_layouts.vocabulary", "_sharding_layouts.rules", "_sharding_layouts.trees", "_sharding_layouts.checks")
lazy = {"jax_dataclasses._checkpoints.export", "jax_dataclasses._diagnostics.explain", "jax_dataclasses._diagnostics.recompiles"}
lazy |= {f"jax_dataclasses.{name}" for name in sharding}
assert not lazy & set(sys.modules)
names = {"Sharded", "partition_specs", "sharding_rules", "register_export", "jit_diff"}
assert names | {"explain_recompiles", "check_shardings"} <= set(dir(jdc))  # Tab completion.
assert not lazy & set(sys.modules)  # Listed, not imported.
from jax_dataclasses import partition_specs
assert jdc.Sharded.__module__ == "jax_dataclasses._field_declarations.forms" and callable(jdc.register_export)
assert callable(jdc.jit_diff) and issubclass(jdc.RecompileWarning, UserWarning)
assert callable(jdc.check_shardings)
assert lazy <= set(sys.modules) and partition_specs is jdc.partition_specs
assert "jax_dataclasses._dataclasses" not in sys.modules
assert jdc._dataclasses.JDC_STATIC_MARKER == "__jax_dataclasses_static_field__"
"""
    )


@pytest.mark.subprocess
def test_flax_imported_before_jax_dataclasses() -> None:
    run_python("from flax import serialization\n" + CLASSES + ROUND_TRIP)


@pytest.mark.subprocess
def test_flax_imported_after_classes_are_defined() -> None:
    run_python(
        CLASSES
        + """
import inspect, sys
assert "flax" not in sys.modules
import flax  # Imports flax.serialization as a submodule.
from flax import serialization
assert "def from_bytes" in inspect.getsource(serialization)  # The loader still serves source.

@jdc.pytree_dataclass
class Later:
    v: object

assert serialization.to_state_dict(Later(1.0)) == {"v": 1.0}
"""
        + ROUND_TRIP
        + """
import importlib
serialization = importlib.reload(serialization)  # Its registry starts empty again.
"""
        + ROUND_TRIP
    )


@pytest.mark.subprocess
def test_everything_works_without_flax() -> None:
    output = run_python(
        """
import sys

class BlockFlax:
    def find_spec(self, name, path=None, target=None):
        if name == "flax" or name.startswith("flax."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, BlockFlax())
"""
        + CLASSES
        + """
import jax
model = jax.jit(lambda m: m)(Model(jnp.ones(2)))
assert model.name == "m"
try:
    import flax.serialization
except ModuleNotFoundError:
    print("flax unavailable")
"""
    )
    assert output.strip() == "flax unavailable"
