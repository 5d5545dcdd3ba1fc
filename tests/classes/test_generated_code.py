"""Generated methods behave like hand-written ones, and instances hold their fields and nothing
else: string annotations, runtime type checkers, cloudpickle, tracebacks, `vars`, writes that
bypass `__setattr__`, and copies keep working."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import pickle
import subprocess
import sys
import textwrap
import traceback
import typing
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from beartype import beartype
from beartype.roar import BeartypeCallHintParamViolation
from helpers import Layer, Slotted, define, leaves_equal_fields, run_python
from jaxtyping import Array, Float, TypeCheckError, jaxtyped

import jax_dataclasses as jdc

ROOT = Path(__file__).resolve().parents[2]


@jdc.pytree_dataclass
class Pair:
    x: Float[Array, "n"]  # noqa: F821, UP037  # a jaxtyping dimension, not a name
    y: Float[Array, "n"]  # noqa: F821, UP037
    label: jdc.Static[str] = "pair"


@jaxtyped(typechecker=beartype)
@jdc.pytree_dataclass
class CheckedPair:
    x: Float[Array, "n"]  # noqa: F821, UP037
    y: Float[Array, "n"]  # noqa: F821, UP037


@beartype
@jdc.pytree_dataclass
class BeartypedPoint:
    x: float
    name: jdc.Static[str] = "p"


@jdc.pytree_dataclass
class Derived:
    x: jax.Array

    def __post_init__(self) -> None:
        object.__setattr__(self, "norm", float(jnp.sum(self.x)))  # the stdlib idiom


# -- string annotations resolve against the class's module ---------------------------------


def test_init_annotations_resolve_like_a_hand_written_method() -> None:
    hints = typing.get_type_hints(Pair.__init__)
    assert str(hints["x"]) == str(Float[Array, "n"])
    assert hints["label"] is str and hints["return"] is type(None)
    signature = inspect.signature(Pair, eval_str=True)
    assert list(signature.parameters) == ["x", "y", "label"]
    assert signature.parameters["label"].default == "pair"
    assert Pair.__init__.__module__ == __name__
    assert Pair.__init__.__qualname__ == "Pair.__init__"


def test_jaxtyped_beartype_checks_the_fields() -> None:
    CheckedPair(jnp.ones(3), jnp.ones(3))
    with pytest.raises(TypeCheckError):
        CheckedPair(jnp.ones(3), jnp.ones(4))
    with pytest.raises(TypeCheckError):
        CheckedPair(jnp.ones(3), "not an array")  # type: ignore[arg-type]


def test_checked_init_does_not_run_when_jax_rebuilds_instances() -> None:
    # The checks belong to construction; JAX rebuilds with batched, abstract or placeholder
    # leaves that would fail them.
    batched = jax.vmap(lambda v: CheckedPair(v, v))(jnp.ones((4, 3)))
    assert batched.x.shape == (4, 3)
    assert jax.tree_util.tree_map(lambda a: a.sum(), CheckedPair(jnp.ones(3), jnp.ones(3))).x == 3
    treedef = jax.tree_util.tree_structure(CheckedPair(jnp.ones(3), jnp.ones(3)))
    assert type(jax.tree_util.tree_unflatten(treedef, [object(), object()])) is CheckedPair
    point = jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(BeartypedPoint(1.0)), ["not a float"]
    )
    assert point.x == "not a float"


def test_beartype_on_the_class_checks_init() -> None:
    assert BeartypedPoint(1.0).x == 1.0
    with pytest.raises(BeartypeCallHintParamViolation):
        BeartypedPoint("one")  # type: ignore[arg-type]


# -- tracebacks and messages ---------------------------------------------------------------


def test_tracebacks_through_generated_init_show_its_source() -> None:
    with pytest.raises(TypeError) as caught:
        jax.jit(lambda a: Layer(a, a, activation=a))(jnp.ones(2))  # a traced static value
    frames = traceback.extract_tb(caught.value.__traceback__)
    init = next(frame for frame in frames if frame.name == "__init__")
    assert "Layer" in init.filename
    assert init.line and "activation" in init.line
    assert "__jdc" not in str(caught.value)
    assert "def __init__(self, w, b, activation=" in inspect.getsource(Layer.__init__)


def test_argument_errors_name_only_the_fields() -> None:
    with pytest.raises(TypeError) as caught:
        Layer(jnp.ones(2), jnp.ones(2), activaton="relu")  # type: ignore[call-arg]
    message = str(caught.value)
    assert "activaton" in message and "__jdc" not in message and "__dataclass" not in message
    assert list(inspect.signature(Layer.__init__).parameters) == ["self", "w", "b", "activation"]


def test_a_field_named_self() -> None:
    @jdc.pytree_dataclass
    class Odd:
        self: float  # legal for dataclasses, so legal here

    assert Odd(self=2.0).self == 2.0
    assert jax.tree_util.tree_leaves(Odd(1.0)) == [1.0]


def test_field_names_reserved_for_generated_code_are_refused() -> None:
    namespace = {"__annotations__": {"__jdc_setattr": float}}
    with pytest.raises(TypeError, match=r"Reserved may not have a field named '__jdc_setattr'"):
        jdc.pytree_dataclass(type("Reserved", (), namespace))


# -- instances hold their fields, and flatten reads them --------------------------------------


def test_vars_shows_the_fields_only() -> None:
    layer = Layer(jnp.ones(2), jnp.zeros(2), "relu")
    assert vars(layer) == {"w": layer.w, "b": layer.b, "activation": "relu"}
    rebuilt = Layer(**vars(layer))
    assert jax.tree_util.tree_structure(rebuilt) == jax.tree_util.tree_structure(layer)
    assert rebuilt.w is layer.w and rebuilt.b is layer.b


def test_rebuilding_from_dict_works_like_a_frozen_dataclass() -> None:
    @jdc.pytree_dataclass(kw_only=True)
    class Config:
        lr: float
        depth: jdc.Static[int] = 2

    @jdc.pytree_dataclass
    class Mixed:
        x: jax.Array
        scale: jdc.Static[float] = dataclasses.field(default=1.0, kw_only=True)

    for obj in (Config(lr=0.1), Mixed(jnp.ones(2), scale=2.0)):
        rebuilt = obj.__class__(**obj.__dict__)
        assert vars(rebuilt) == vars(obj)
        assert jax.tree_util.tree_structure(rebuilt) == jax.tree_util.tree_structure(obj)

    # As in `dataclasses`: an init=False field with a plain default is read from the class,
    # one with a default factory is set on the instance (and is no __init__ argument).
    @jdc.pytree_dataclass
    class Counted:
        x: float
        count: int = dataclasses.field(default=0, init=False)
        log: list[int] = dataclasses.field(default_factory=list, init=False)

    @dataclasses.dataclass(frozen=True)
    class PlainCounted:
        x: float
        count: int = dataclasses.field(default=0, init=False)
        log: list[int] = dataclasses.field(default_factory=list, init=False)

    for cls in (Counted, PlainCounted):
        assert set(vars(cls(1.0))) == {"x", "log"}
        with pytest.raises(TypeError, match="unexpected keyword argument 'log'"):
            cls(**vars(cls(1.0)))
    assert jax.tree_util.tree_leaves(Counted(1.0)) == [1.0, 0]


def test_a_subclass_that_moves_its_only_field_between_children_and_statics() -> None:
    """Adopted with its base's layout, then decorated: the functions JAX was first given take
    the code of a layout with no children (or with one, where the base had none)."""

    @jdc.pytree_dataclass
    class Child:
        n: int

    @jdc.pytree_dataclass
    class MadeStatic(Child):
        n: jdc.Static[int]

    @jdc.pytree_dataclass
    class Static:
        n: jdc.Static[int]

    @jdc.pytree_dataclass
    class MadeChild(Static):
        n: int

    made_static, made_child = MadeStatic(3), MadeChild(3)
    assert jax.tree_util.tree_flatten_with_path(made_static)[0] == []
    assert jax.tree_util.tree_flatten_with_path(made_child)[0] == [
        ((jax.tree_util.GetAttrKey("n"),), 3)
    ]
    assert jax.tree.map(lambda x: x + 1, made_static) == MadeStatic(3)
    assert jax.tree.map(lambda x: x + 1, made_child) == MadeChild(4)
    assert jax.tree.structure(made_static) != jax.tree.structure(MadeStatic(4))


def test_object_setattr_after_construction_is_what_jax_sees() -> None:
    # The frozen-dataclass idiom for a lazily filled field.
    layer = Layer(jnp.ones(2), jnp.zeros(2))
    object.__setattr__(layer, "w", jnp.full(2, 7.0))
    object.__setattr__(layer, "activation", "relu")
    leaves_equal_fields(layer)
    assert jax.tree_util.tree_structure(layer) == jax.tree_util.tree_structure(
        Layer(jnp.ones(2), jnp.ones(2), "relu")
    )
    traces = []

    @jax.jit
    def first(obj: Layer) -> jax.Array:
        traces.append(obj.activation)
        return obj.w[0]

    assert first(layer) == 7.0 and traces == ["relu"]


def test_object_setattr_on_a_copy_is_what_jax_sees() -> None:
    for original in (Layer(jnp.ones(2), jnp.zeros(2)), Slotted(jnp.ones(2), 1)):
        duplicate = copy.copy(original)
        field = dataclasses.fields(original)[0].name
        object.__setattr__(duplicate, field, jnp.full(2, 3.0))
        leaves_equal_fields(duplicate)
        assert jax.tree_util.tree_leaves(duplicate)[0] is getattr(duplicate, field)
        leaves_equal_fields(original)


def test_setstate_is_what_jax_sees() -> None:
    # A slots class restores through the `__setstate__` that `dataclasses` gives frozen ones.
    restored = object.__new__(Slotted)
    restored.__setstate__((jnp.full(2, 5.0), 3))  # type: ignore[attr-defined]
    leaves_equal_fields(restored)
    assert restored.tag == 3
    assert jax.tree_util.tree_structure(restored) == jax.tree_util.tree_structure(Slotted(0, 3))
    # Any other class through pickle's default state restore (no `__setattr__` involved).
    layer = Layer(jnp.ones(2), jnp.zeros(2))
    object.__setattr__(layer, "activation", "relu")
    loaded = pickle.loads(pickle.dumps(layer))
    leaves_equal_fields(loaded)
    assert jax.tree_util.tree_structure(loaded) == jax.tree_util.tree_structure(
        Layer(jnp.ones(2), jnp.ones(2), "relu")
    )


@pytest.mark.parametrize(
    "duplicate",
    [copy.copy, copy.deepcopy, lambda obj: pickle.loads(pickle.dumps(obj))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_non_field_attributes_set_in_post_init_survive_copies(duplicate: typing.Any) -> None:
    derived = Derived(jnp.ones(3))
    copied = duplicate(derived)
    assert copied.norm == 3.0  # type: ignore[attr-defined]
    assert jax.tree_util.tree_leaves(copied)[0].shape == (3,)
    leaves_equal_fields(copied)


# -- cloudpickle: classes pickled by value (notebooks, __main__, functions) ------------------

_CLOUDPICKLE_DUMP = """
import sys
import cloudpickle
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Params:
    w: jax.Array
    scale: jdc.Static[float] = 2.0

    def __post_init__(self):
        object.__setattr__(self, "derived", 1)

@jdc.pytree_dataclass
class Plain:
    x: jdc.Frozen[jax.Array]
    tag: jdc.Static[str] = "t"
    __jdc_evolution__ = jdc.Evolution(renamed={"x": "old_x"})

with open(sys.argv[1], "wb") as file:
    cloudpickle.dump((Params(jnp.ones(2)), Plain(jnp.zeros(3))), file)
"""

_CLOUDPICKLE_LOAD = """
import pickle
import sys
import jax

with open(sys.argv[1], "rb") as file:
    params, plain = pickle.load(file)
assert params.scale == 2.0 and params.derived == 1 and plain.tag == "t"
print(jax.tree_util.tree_leaves(params)[0].shape, jax.tree_util.tree_leaves(plain)[0].shape)
print(jax.jit(lambda p, q: p.w.sum() * p.scale + q.x.sum())(params, plain))
import jax_dataclasses as jdc
print(jdc.trainable(plain))  # its declarations came with it
print(jdc.from_saved_layout(plain, {"old_x": jax.numpy.ones(3)}).x.sum())
"""


_CLOUDPICKLE_SUBCLASSES_DUMP = """
import sys
import cloudpickle
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc
from helpers import Layer  # importable: pickled by reference

@jdc.pytree_dataclass
class Gated(Layer):
    gate: jax.Array = None

class Logged(Layer):
    def __init__(self, w):
        print("init ran")
        super().__init__(w, w)

@jdc.pytree_dataclass(slots=True)
class Checked(Layer):
    def __post_init__(self):
        print("post_init ran")

with open(sys.argv[1], "wb") as file:
    cloudpickle.dump(
        (Gated(jnp.ones(1), jnp.ones(1), "relu", jnp.zeros(2)), Logged(jnp.ones(3)),
         Checked(jnp.ones(4), jnp.ones(4))),
        file,
    )
"""

_CLOUDPICKLE_SUBCLASSES_LOAD = """
import pickle
import sys
import jax

with open(sys.argv[1], "rb") as file:
    gated, logged, checked = pickle.load(file)
print([leaf.shape for leaf in jax.tree_util.tree_leaves(gated)])
for obj in (gated, logged, checked):
    rebuilt = jax.jit(lambda o: o)(obj)
    print(type(rebuilt).__name__, len(jax.tree_util.tree_leaves(rebuilt)))
"""


@pytest.mark.subprocess
def test_cloudpickle_subclasses_defined_in_main(tmp_path: Path) -> None:
    pytest.importorskip("cloudpickle")
    target = tmp_path / "objects.pkl"
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    outputs = []
    for source in (_CLOUDPICKLE_SUBCLASSES_DUMP, _CLOUDPICKLE_SUBCLASSES_LOAD):
        result = subprocess.run(
            [sys.executable, "-c", source, str(target)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=environment,
        )
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[1].splitlines() == [
        "[(1,), (1,), (2,)]",  # the subclass's own field survives the rebuild
        "Gated 3",
        "Logged 2",  # and neither __init__ nor __post_init__ ran in the loading process
        "Checked 2",
    ]


@pytest.mark.subprocess
def test_cloudpickle_instances_of_main_classes_load_in_a_fresh_process(tmp_path: Path) -> None:
    pytest.importorskip("cloudpickle")
    target = tmp_path / "objects.pkl"
    for source in (_CLOUDPICKLE_DUMP, _CLOUDPICKLE_LOAD):
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(source), str(target)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:4] == [
        "(2,) (3,)",
        "4.0",
        "Plain(x=Frozen(False), tag='t')",
        "3.0",
    ]


@pytest.mark.subprocess
def test_a_class_pickled_by_value_carries_none_of_the_types_this_process_met(
    tmp_path: Path,
) -> None:
    """The generated `__init__` reads the static-value checks' cache of good types; pickled
    with the class, an enum this process had met as a static value (from a module the
    loading process lacks) made the class fail to load there (`No module named ...`)."""
    cloudpickle = pytest.importorskip("cloudpickle")
    modes = define("import enum\nclass Mode(enum.Enum):\n    A = 1\n", "evaluated")
    user = define(
        """
        import jax_dataclasses as jdc

        @jdc.pytree_dataclass
        class Holder:
            mode: jdc.Static[object]

        @jdc.pytree_dataclass
        class Solver:
            x: float
            iters: jdc.Static[int] = 3
        """,
        "evaluated",
    )
    user.Holder(modes.Mode.A)  # This process now knows Mode as a good static type.
    cloudpickle.register_pickle_by_value(user)
    try:
        (tmp_path / "solver.pkl").write_bytes(cloudpickle.dumps(user.Solver))
    finally:
        cloudpickle.unregister_pickle_by_value(user)
    load = "import pickle, sys\nprint(pickle.loads(open(sys.argv[1], 'rb').read())(1.0, 4))"
    assert (
        run_python(["-c", load, str(tmp_path / "solver.pkl")]).strip() == "Solver(x=1.0, iters=4)"
    )


# -- the design note is in the repository ------------------------------------------------


def test_design_references_point_into_the_repository() -> None:
    assert (ROOT / "docs" / "design.md").is_file()
    for path in [
        *ROOT.glob("jax_dataclasses/**/*.py"),
        *ROOT.glob("benchmarks/*"),
        ROOT / "README.md",
    ]:
        assert "DESIGN.md" not in path.read_text(), path


def test_wrappers_we_install_lead_to_what_they_wrap() -> None:
    """`inspect.unwrap` (and Python 3.14's `dataclasses`, mending `super()` in `slots=True`
    copies) reaches the user's own `__init__` and the generated hash through our wrappers."""

    @jdc.pytree_dataclass
    class Base:
        x: jax.Array

    class Undecorated(Base):
        y: int

        def __init__(self, x: jax.Array, y: int) -> None:
            super().__init__(x)

    own = Undecorated.__dict__["__init__"]
    assert inspect.unwrap(own).__qualname__.endswith("Undecorated.__init__")
    assert inspect.unwrap(own) is not own

    @jdc.pytree_dataclass(unsafe_hash=True)
    class Hashed:
        n: int

    assert hasattr(Hashed.__hash__, "__wrapped__")
    assert hash(Hashed(1)) == hash(Hashed(1))
