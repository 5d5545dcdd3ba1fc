"""`jax.export` of functions that take and return pytree dataclasses (`jdc.register_export`).

Exported functions are serialized, deserialized and called; the results must be what the
function returns, static values exactly (type and value), with the same treedefs and key
paths. Classes defined in test functions are registered under names of their own: JAX keeps
every name for the life of the process.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import pickle
import subprocess
import sys
import types
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import child_environment

import jax_dataclasses as jdc

pytest.importorskip("flatbuffers", reason="jax.export's serialization needs flatbuffers")

import _export_models as models  # Registers its classes; needs flatbuffers.

TESTS = Path(__file__).resolve().parent
DEADLINE_SECONDS = 300


def roundtrip(f: Callable[..., Any], *args: Any) -> tuple[Any, jax.export.Exported]:
    """`f(*args)` through an export that was serialized and deserialized, and that export."""
    exported = jax.export.export(jax.jit(f))(*args)
    loaded = jax.export.deserialize(exported.serialize())
    assert loaded.in_tree == exported.in_tree == jax.tree_util.tree_structure((args, {}))
    assert loaded.out_tree == exported.out_tree
    return loaded.call(*args), loaded


def assert_same_tree(got: Any, expected: Any) -> None:
    """Equal treedefs (JAX compares static values with `==`), equal key paths and leaves, and
    every static value of the same type as expected, item by item."""
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    got_leaves, _ = jax.tree_util.tree_flatten_with_path(got)
    expected_leaves, _ = jax.tree_util.tree_flatten_with_path(expected)
    assert [path for path, _ in got_leaves] == [path for path, _ in expected_leaves]
    for (_, a), (_, b) in zip(got_leaves, expected_leaves, strict=True):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64))
    assert static_types(got) == static_types(expected)


def static_types(tree: Any) -> list[tuple[str, Any]]:
    """(field, type of each nested part) of every static value in a tree of our classes."""
    found: list[tuple[str, Any]] = []

    def types_of(value: Any) -> Any:
        return tuple(map(types_of, value)) if type(value) is tuple else (type(value), value)

    def visit(node: Any) -> None:
        if jdc.is_dataclass(node) and not isinstance(node, type):
            for field in jdc.fields(node):
                value = getattr(node, field.name)
                if field.name in statics_of(type(node)):
                    found.append((field.name, types_of(value)))
                else:
                    visit(value)
        elif isinstance(node, dict | list | tuple):
            for item in node.values() if isinstance(node, dict) else node:
                visit(item)

    visit(tree)
    return found


def statics_of(cls: type) -> set[str]:
    blank = object.__new__(cls)
    names = [field.name for field in jdc.fields(cls)]
    for name in names:
        object.__setattr__(blank, name, 0)
    keyed, _ = jax.tree_util.tree_flatten_with_path(blank)
    return set(names) - {path[0].name for path, _ in keyed}


# -- round trips in this process ---------------------------------------------------------------


def test_every_supported_static_value_comes_back_exactly() -> None:
    args = models.inputs()
    got, _ = roundtrip(models.step, *args)
    expected = models.step(*args)
    assert_same_tree(got, expected)
    model = got[0]
    assert model.shape == ((2, (3, 4.0), None, True, "s", ()), -0.0, 10**30)
    assert type(model.shape[0][1]) is tuple and type(model.shape[0][1][1]) is float
    assert model.layers[0].dtype is jnp.bfloat16
    assert model.numpy_type is np.float16 and model.numpy_dtype == np.dtype("bfloat16")
    assert model.numpy_kind is np.integer
    assert type(model.numpy_scalar) is np.float32 and model.level is models.Level.HIGH


def test_a_class_without_static_fields_and_containers_around_it() -> None:
    tree = {"a": [models.Plain(jnp.ones(2))], "b": (models.Plain(jnp.zeros(1)), None)}
    got, _ = roundtrip(lambda t: t, tree)
    assert_same_tree(got, tree)


def test_a_generic_class_and_an_adopted_subclass() -> None:
    box: models.Box[jax.Array] = models.Box(jnp.ones(3), label="generic")
    model = models.inputs()[0]
    big = models.Big(model.layers, model.extras, count=3)
    got, _ = roundtrip(lambda b, m: (b, m), box, big)
    assert_same_tree(got, (box, big))
    assert type(got[1]) is models.Big


def test_a_generic_alias_registers_its_class() -> None:
    alias = models.Box[jax.Array]
    assert jdc.register_export(alias) is alias  # Box's own registration, made again.
    got, _ = roundtrip(lambda b: b, alias(jnp.ones(1)))
    assert type(got) is models.Box


def test_deserializing_never_runs_init() -> None:
    calls: list[str] = []

    @jdc.pytree_dataclass
    class Checked:
        x: jax.Array
        tag: jdc.Static[str] = "t"

        def __post_init__(self) -> None:
            calls.append("post_init")
            if not isinstance(self.x, jax.Array):
                raise TypeError("x must be an array")

    jdc.register_export(Checked, "test_export.Checked")
    value = Checked(jnp.ones(2))
    calls.clear()
    got, loaded = roundtrip(lambda c: jdc.replace(c, tag="u"), value)
    assert calls == ["post_init"]  # Only the traced `replace` in the function itself.
    assert got.tag == "u" and loaded.out_tree == jax.tree_util.tree_structure(got)


def test_codecs_store_what_json_cannot() -> None:
    @jdc.pytree_dataclass
    class Activated:
        x: jax.Array
        activation: jdc.Static[Callable[[jax.Array], jax.Array]] = jax.nn.relu

    jdc.register_export(
        Activated,
        "test_export.Activated",
        static_codecs={"activation": (lambda f: f.__name__, lambda name: getattr(jax.nn, name))},
    )
    got, _ = roundtrip(lambda a: jdc.replace(a, activation=jax.nn.gelu), Activated(jnp.ones(2)))
    assert got.activation is jax.nn.gelu


def test_registering_again_replaces_the_codecs() -> None:
    @jdc.pytree_dataclass
    class Again:
        x: jax.Array
        ratio: jdc.Static[Fraction] = Fraction(1, 3)

    jdc.register_export(Again, "test_export.Again")
    with pytest.raises(TypeError, match=r"Again\.ratio: its static value is Fraction\(1, 3\)"):
        roundtrip(lambda a: a, Again(jnp.ones(1)))
    codec = (lambda f: (f.numerator, f.denominator), lambda pair: Fraction(*pair))
    jdc.register_export(Again, "test_export.Again", static_codecs={"ratio": codec})
    got, _ = roundtrip(lambda a: a, Again(jnp.ones(1)))
    assert type(got.ratio) is Fraction and got.ratio == Fraction(1, 3)


def test_a_class_defined_again_takes_its_name_over() -> None:
    """A notebook cell run again: the newest class is the one deserialized, never the stale
    one; an export of the old definition that no longer fits is an error naming the fields."""

    def define(*names: str) -> type:
        namespace: dict[str, Any] = {"__annotations__": dict.fromkeys(names, jax.Array)}
        namespace["__annotations__"]["tag"] = jdc.Static[str]
        namespace["tag"] = "t"
        namespace["__qualname__"], namespace["__module__"] = "Cell", __name__
        return jdc.pytree_dataclass(type("Cell", (), namespace))

    first = define("x")
    jdc.register_export(first, "test_export.Cell")
    exported = jax.export.export(jax.jit(lambda c: c))(first(jnp.ones(1)))
    data = exported.serialize()
    second = define("x")
    jdc.register_export(second, "test_export.Cell")
    assert type(jax.export.deserialize(data).call(second(jnp.ones(1)))) is second
    third = define("x", "y")
    jdc.register_export(third, "test_export.Cell")
    with pytest.raises(ValueError, match=r"Cell \(exported as 'test_export.Cell'\) has changed"):
        jax.export.deserialize(data)
    try:
        jax.export.deserialize(data)
    except ValueError as error:
        message = str(error)
    assert "children ('x',)" in message and "children ('x', 'y')" in message
    assert "export the function again" in message


def test_a_class_keeps_one_name_and_a_displaced_definition_is_told_why() -> None:
    def define() -> type:
        namespace: dict[str, Any] = {"__annotations__": {"x": jax.Array}}
        namespace["__qualname__"], namespace["__module__"] = "Named", __name__
        return jdc.pytree_dataclass(type("Named", (), namespace))

    old, new = define(), define()
    jdc.register_export(old, "test_export.Named")
    jdc.register_export(new, "test_export.Named2")
    with pytest.raises(ValueError, match=r"already registered for export as 'test_export.Named2'"):
        jdc.register_export(new, "test_export.Named")  # A second name, by taking one over.
    jdc.register_export(new, "test_export.Named2")  # Its own name again: fine.
    other = define()
    jdc.register_export(other, "test_export.Named")  # Takes the name `old` had.
    with pytest.raises(ValueError, match=r"a newer definition of Named .* took its export name"):
        jdc.register_export(old, "test_export.Named3")


# -- errors --------------------------------------------------------------------------------------


def test_an_unsupported_static_value_names_the_class_field_and_codec() -> None:
    @jdc.pytree_dataclass
    class Holder:
        x: jax.Array
        extra: jdc.Static[Any] = ("ok", frozenset({1}))

    jdc.register_export(Holder, "test_export.Holder")
    exported = jax.export.export(jax.jit(lambda h: h))(Holder(jnp.ones(1)))
    with pytest.raises(TypeError) as caught:
        exported.serialize()
    message = str(caught.value)
    assert "<locals>.Holder.extra: its static value is ('ok', frozenset({1})), which holds " in (
        message
    )
    assert "frozenset({1}) (builtins.frozenset), which a serialized export cannot store" in message
    assert "static_codecs={'extra': (encode, decode)})." in message and "tuples of these" in message


Point = collections.namedtuple("Point", "x y")
ALIAS = np.longlong  # On Linux, a type of its own whose dtype's name ("int64") gives np.int64.


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (Point(1, 2), r"Point\(x=1, y=2\) \(test_export\.Point\), which a serialized"),
        (1 + 2j, r"\(1\+2j\) \(builtins\.complex\), which a serialized"),
        (np.dtype([("a", "<f4")]), r"dtype\(\[\('a', '<f4'\)\]\) \(numpy\.\S+\), which a"),
        (np.dtype(("f4", (2,))), r"dtype\(\('<f4', \(2,\)\)\) \(numpy\.\S+\), which a"),
        (ALIAS, r"would come back from a serialized export as <class 'numpy\.int64'>"),
        # 80 bits on Linux x86: JSON has no number for it. Where it is a double, it would come
        # back as np.float64.
        # NumPy 1.24 (the oldest corner) names it by its size: numpy.float128.
        (np.longdouble(1.5), r"\(numpy\.(longdouble|float128)\), which a serialized|would come"),
    ],
    ids=["namedtuple", "complex", "structured dtype", "subarray dtype", "type alias", "longdouble"],
)
def test_values_that_cannot_come_back_are_refused(value: object, why: str) -> None:
    if value is ALIAS and np.dtype(np.dtype(ALIAS).name).type is ALIAS:
        pytest.skip("np.longlong is the type its dtype's name gives, on this platform")

    @jdc.pytree_dataclass
    class Odd:
        x: jax.Array
        odd: jdc.Static[Any] = None

    jdc.register_export(Odd, "test_export.Odd")
    exported = jax.export.export(jax.jit(lambda o: o))(Odd(jnp.ones(1), value))
    with pytest.raises(TypeError, match=r"Odd\.odd: .*" + why) as caught:
        exported.serialize()
    assert "static_codecs={'odd': (encode, decode)})." in str(caught.value)


def test_a_long_double_comes_back_through_the_codec_its_refusal_shows() -> None:
    @jdc.pytree_dataclass
    class Precise:
        x: jax.Array
        eps: jdc.Static[Any] = np.longdouble("1.000000000000000000001")

    jdc.register_export(Precise, "test_export.Precise", static_codecs={"eps": (str, np.longdouble)})
    precise = Precise(jnp.ones(1))
    got, _ = roundtrip(lambda p: p, precise)
    assert type(got.eps) is np.longdouble and got.eps == precise.eps


@pytest.mark.parametrize(
    "kind", [jnp.floating, jnp.integer, jnp.number, jnp.inexact, jnp.complexfloating, np.generic]
)
def test_abstract_scalar_types_come_back_as_themselves(kind: type) -> None:
    @jdc.pytree_dataclass
    class Kind:
        x: jax.Array
        kind: jdc.Static[type] = np.float32

    jdc.register_export(Kind, "test_export.Kind")
    got, _ = roundtrip(lambda k: k, Kind(jnp.ones(1), kind))
    assert got.kind is kind


@dataclasses.dataclass(frozen=True)
class Tolerance:
    rtol: float


@pytest.mark.parametrize(
    ("value", "codec"),
    [
        (float("nan"), None),
        (np.float32("nan"), None),
        ((1, (2.0, float("nan"))), None),
        (Tolerance(float("nan")), (dataclasses.astuple, lambda fields: Tolerance(*fields))),
    ],
    ids=["float", "numpy scalar", "in a tuple", "through a codec"],
)
def test_a_nan_static_value_is_refused_when_serialized(
    value: object, codec: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None
) -> None:
    """A loaded function compares its arguments' static values with `==`: with NaN, every call
    would fail, so the artifact is never written."""

    @jdc.pytree_dataclass
    class Filled:
        x: jax.Array
        fill: jdc.Static[Any] = None

    jdc.register_export(
        Filled, "test_export.Filled", static_codecs={"fill": codec} if codec else None
    )
    exported = jax.export.export(jax.jit(lambda f: f))(Filled(jnp.ones(1), value))
    with pytest.raises(ValueError) as caught:
        exported.serialize()
    message = str(caught.value)
    assert "<locals>.Filled.fill: its static value " in message
    assert "is not equal to a copy of itself that prints the same" in message
    assert "NaN is the usual cause (NaN != NaN): keep it out of static values" in message


def test_an_enum_defined_in_a_function_is_refused_when_serialized() -> None:
    class Local(enum.Enum):
        A = 1

    @jdc.pytree_dataclass
    class UsesLocal:
        x: jax.Array
        kind: jdc.Static[Local] = Local.A

    jdc.register_export(UsesLocal, "test_export.UsesLocal")
    exported = jax.export.export(jax.jit(lambda u: u))(UsesLocal(jnp.ones(1)))
    with pytest.raises(TypeError, match=r"UsesLocal\.kind: its static value is <Local\.A: 1>"):
        exported.serialize()


def test_a_combination_of_flags_is_refused_when_serialized() -> None:
    @jdc.pytree_dataclass
    class Flagged:
        x: jax.Array
        flags: jdc.Static[Any] = models.Access.READ | models.Access.WRITE

    jdc.register_export(Flagged, "test_export.Flagged")
    exported = jax.export.export(jax.jit(lambda f: f))(Flagged(jnp.ones(1)))
    with pytest.raises(TypeError, match=r"Flagged\.flags: its static value is"):
        exported.serialize()


def test_a_codec_that_does_not_invert_is_refused_when_serialized() -> None:
    @jdc.pytree_dataclass
    class Lossy:
        x: jax.Array
        scale: jdc.Static[float] = 1.5

    jdc.register_export(Lossy, "test_export.Lossy", static_codecs={"scale": (int, float)})
    exported = jax.export.export(jax.jit(lambda v: v))(Lossy(jnp.ones(1)))
    with pytest.raises(
        TypeError, match=r"Lossy\.scale: its static value 1\.5 \(float\) would"
    ) as e:
        exported.serialize()
    assert "come back from a serialized export as 1.0 (float)" in str(e.value)
    assert "decode(encode(value)) equal the value" in str(e.value)


def test_an_enum_whose_module_is_gone_is_an_error_when_deserialized() -> None:
    module = types.ModuleType("test_export_vanishing")
    exec("import enum\nclass Color(enum.Enum):\n    RED = 1\n", module.__dict__)
    sys.modules[module.__name__] = module

    @jdc.pytree_dataclass
    class Painted:
        x: jax.Array
        color: jdc.Static[Any] = module.Color.RED

    jdc.register_export(Painted, "test_export.Painted")
    data = jax.export.export(jax.jit(lambda p: p))(Painted(jnp.ones(1))).serialize()
    del sys.modules[module.__name__]
    with pytest.raises(ValueError, match=r"Painted\.color: .* enum test_export_vanishing\.Color"):
        jax.export.deserialize(data)


def test_data_from_a_newer_version_is_refused() -> None:
    data = jax.export.export(jax.jit(lambda p: p))(models.Plain(jnp.ones(1))).serialize()
    newer = bytes(data).replace(b'{"format":1,', b'{"format":9,')
    assert newer != data
    with pytest.raises(ValueError, match=r"Plain \(exported as '_export_models\.Plain'\) was "):
        jax.export.deserialize(newer)


def test_an_unregistered_class_in_the_tree_is_named_by_jax() -> None:
    @jdc.pytree_dataclass
    class Unregistered:
        x: jax.Array

    exported = jax.export.export(jax.jit(lambda u: u))(models.Box(Unregistered(jnp.ones(1))))
    with pytest.raises(ValueError, match=r"unregistered type .*Unregistered"):
        exported.serialize()


def test_not_a_pytree_dataclass() -> None:
    class Plain:
        pass

    with pytest.raises(TypeError, match=r"Plain.*not a pytree dataclass\. Decorate the class"):
        jdc.register_export(Plain, "test_export.NotOurs")


def test_a_class_defined_in_a_function_needs_a_name() -> None:
    @jdc.pytree_dataclass
    class Local:
        x: jax.Array

    with pytest.raises(ValueError) as caught:
        jdc.register_export(Local)
    message = str(caught.value)
    assert "register_export(test_a_class_defined_in_a_function_needs_a_name.<locals>.Local)" in (
        message
    )
    assert "defined inside a function" in message
    assert "jdc.register_export(Local, name='test_export.Local')" in message


def test_a_name_of_another_class_is_refused() -> None:
    @jdc.pytree_dataclass
    class Impostor:
        x: jax.Array

    with pytest.raises(ValueError, match=r"'_export_models\.Plain' is already registered for "
                       r"export by _export_models\.Plain\. Pass another name"):  # fmt: skip
        jdc.register_export(Impostor, "_export_models.Plain")


def test_a_class_has_one_name() -> None:
    with pytest.raises(ValueError, match=r"Plain is already registered for export as "
                       r"'_export_models\.Plain', and JAX keeps one name per class"):  # fmt: skip
        jdc.register_export(models.Plain, "test_export.Plain2")


def test_a_class_registered_with_jax_directly() -> None:
    @jdc.pytree_dataclass
    class Direct:
        x: jax.Array

    jax.export.register_pytree_node_serialization(
        Direct,
        serialized_name="test_export.Direct",
        serialize_auxdata=lambda aux: b"",
        deserialize_auxdata=lambda data: None,
    )
    with pytest.raises(ValueError, match=r"jax\.export\.register_pytree_node_serialization\. "
                       "Remove that call"):  # fmt: skip
        jdc.register_export(Direct, "test_export.Direct2")


def test_codecs_must_name_static_fields() -> None:
    with pytest.raises(ValueError) as caught:
        jdc.register_export(models.Dense, static_codecs={"w": (str, float)})
    message = str(caught.value)
    assert "static_codecs names 'w', which is not a static field of Dense" in message
    assert "(its static fields: dtype)" in message


def test_codecs_must_be_pairs_of_functions() -> None:
    with pytest.raises(TypeError, match=r"the codec of 'dtype' must be a pair of functions"):
        jdc.register_export(models.Dense, static_codecs={"dtype": str})  # type: ignore[dict-item]


# -- a fresh process -----------------------------------------------------------------------------

CHILD = """
import pickle, sys
import jax, numpy as np
sys.path.insert(0, sys.argv[1])
import _export_models as models

loaded = jax.export.deserialize(open(sys.argv[2], "rb").read())
args = models.inputs()
assert loaded.in_tree == jax.tree_util.tree_structure((args, {}))
out = loaded.call(*args)
assert loaded.out_tree == jax.tree_util.tree_structure(out)
with open(sys.argv[3], "wb") as file:
    pickle.dump(jax.tree_util.tree_map(np.asarray, out), file)
"""


@pytest.mark.subprocess
def test_deserialized_and_called_in_a_fresh_process(tmp_path: Path) -> None:
    args = models.inputs()
    exported = jax.export.export(jax.jit(models.step))(*args)
    (tmp_path / "step.bin").write_bytes(exported.serialize())
    command = [sys.executable, "-c", CHILD, str(TESTS), str(tmp_path / "step.bin")]
    result = subprocess.run(
        [*command, str(tmp_path / "out.pkl")],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        env=child_environment(1),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    got = pickle.loads((tmp_path / "out.pkl").read_bytes())
    assert_same_tree(got, models.step(*args))
