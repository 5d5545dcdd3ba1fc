"""The deprecated 1.x surface: `static_field()` and `EnforcedAnnotationsMixin`."""

from __future__ import annotations

import dataclasses
import re
import sys
import warnings
from typing import TYPE_CHECKING, Annotated, Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import define

import jax_dataclasses as jdc
from jax_dataclasses._compat.enforced_annotations import AnnotationMismatchError

if TYPE_CHECKING:  # Names that exist only for type checkers: the mixin must not need them.
    from collections import OrderedDict

    from numpy.typing import NDArray

# -- static_field ---------------------------------------------------------------------------


def test_static_field_warns_at_the_call_site_and_points_to_static() -> None:
    with pytest.warns(DeprecationWarning, match=r"jdc\.Static\[T\]") as record:

        @jdc.pytree_dataclass
        class Config:
            x: jax.Array
            n: int = jdc.static_field(default=3)

    assert record[0].filename == __file__
    config = Config(jnp.ones(2))
    assert jax.tree.leaves(config) == [config.x]
    assert jax.tree.unflatten(jax.tree.structure(config), [jnp.zeros(1)]).n == 3


def test_static_field_takes_the_arguments_of_dataclasses_field() -> None:
    with pytest.warns(DeprecationWarning):

        @jdc.pytree_dataclass
        class Options:
            x: Any
            sizes: tuple[int, ...] = jdc.static_field(default_factory=tuple, repr=False)
            mode: str = jdc.static_field(default="a", metadata={"doc": "the mode"}, kw_only=True)
            hidden: str = jdc.static_field(default="h", init=False, compare=False)

    fields = {f.name: f for f in dataclasses.fields(Options)}
    assert fields["sizes"].repr is False and fields["mode"].kw_only is True
    assert dict(fields["mode"].metadata) == {
        "doc": "the mode",
        "static": True,
        "__jax_dataclasses_static_field__": True,  # 1.6's marker: 1.6 did not save the field
    }
    assert fields["hidden"].init is False and fields["hidden"].compare is False
    options = Options(1.0, (2,), mode="b")
    assert (options.sizes, options.mode, options.hidden) == ((2,), "b", "h")
    assert jax.tree.leaves(options) == [1.0]
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="unexpected"):
        jdc.static_field(nonsense=1)


# -- EnforcedAnnotationsMixin: classes --------------------------------------------------------

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    @jdc.pytree_dataclass
    class Points(jdc.EnforcedAnnotationsMixin):
        xy: Annotated[jax.Array, (2,), jnp.floating]
        mask: Annotated[jax.Array, jnp.bool_, ()]  # dtype first; shape () is a scalar.
        label: jdc.Static[str] = ""

    @jdc.pytree_dataclass
    class Image(jdc.EnforcedAnnotationsMixin):
        pixels: Annotated[jax.Array, (3, ..., 4), jnp.float32]  # Batch axes in the middle.

    @jdc.pytree_dataclass
    class Cloud(jdc.EnforcedAnnotationsMixin):
        points: Points
        weight: Annotated[Any, ()]
        note: Any = None

    @jdc.pytree_dataclass
    class Counts(jdc.EnforcedAnnotationsMixin):
        counts: Annotated[jax.Array, jnp.integer]  # dtype only: no batch axes.

    @jdc.pytree_dataclass
    class Checked(jdc.EnforcedAnnotationsMixin):
        value: Annotated[jax.Array, (2,)]
        post_init_ran: bool = dataclasses.field(default=False, init=False)

        def __post_init__(self) -> None:
            super().__post_init__()
            object.__setattr__(self, "post_init_ran", True)

    @jdc.pytree_dataclass
    class Position(jdc.EnforcedAnnotationsMixin):
        x: Annotated[jax.Array, (3,), jnp.floating]

    @jdc.pytree_dataclass
    class Features(jdc.EnforcedAnnotationsMixin):
        y: Annotated[jax.Array, (2,), jnp.floating]

    @jdc.pytree_dataclass
    class TypeCheckingOnly(jdc.EnforcedAnnotationsMixin):
        x: Annotated[jax.Array, (3,)]
        table: OrderedDict[str, int] | None = None  # Unresolvable at run time: never checked.
        # The array type exists only for checkers; the shape and dtype still resolve.
        host: Annotated[NDArray[Any], (2,), LATER_DTYPE] = None  # type: ignore[assignment]

    @jdc.pytree_dataclass
    class Key(jdc.EnforcedAnnotationsMixin):
        key: Annotated[jax.Array, (), jax.dtypes.prng_key]
        noise: Annotated[jax.Array, (), jnp.floating] = 0.0  # type: ignore[assignment]


LATER_DTYPE = jnp.floating  # Defined after the class that uses it: resolved at construction.


def points(*batch: int) -> Points:
    return Points(jnp.zeros((*batch, 2)), jnp.ones(batch, dtype=bool))


def raises_mismatch(*fragments: str) -> Any:
    """pytest.raises for our AssertionError subclass, with a message containing `fragments`."""
    return pytest.raises(AnnotationMismatchError, match=".*".join(map(re.escape, fragments)))


# -- EnforcedAnnotationsMixin: definition -----------------------------------------------------


def test_defining_a_subclass_warns_once_pointing_to_jaxtyping() -> None:
    with pytest.warns(DeprecationWarning, match="jaxtyping") as record:

        @jdc.pytree_dataclass(slots=True)
        class Slotted(jdc.EnforcedAnnotationsMixin):
            v: Annotated[jax.Array, (1,)]

    assert len([w for w in record if issubclass(w.category, DeprecationWarning)]) == 1
    assert record[0].filename == __file__
    assert Slotted(jnp.ones((4, 1))).get_batch_axes() == (4,)


def test_a_decorated_subclass_warns_at_its_class_statement() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        @jdc.pytree_dataclass
        class Base(jdc.EnforcedAnnotationsMixin):
            x: Annotated[jax.Array, (2,)]

        line = sys._getframe().f_lineno + 3  # pyright: ignore[reportPrivateUsage]

        @jdc.pytree_dataclass
        class Sub(Base):
            y: Annotated[jax.Array, (3,)]

    warned = [(w.filename, w.lineno) for w in record if "Sub:" in str(w.message)]
    assert warned == [(__file__, line)]
    assert Sub(jnp.zeros((4, 2)), jnp.zeros((4, 3))).get_batch_axes() == (4,)


def test_errors_are_assertion_errors_of_a_dedicated_class() -> None:
    assert issubclass(AnnotationMismatchError, AssertionError)
    with pytest.raises(AssertionError) as caught:
        Points(jnp.zeros(3), jnp.array(True))
    assert type(caught.value) is AnnotationMismatchError


# -- EnforcedAnnotationsMixin: the validation matrix --------------------------------------------


@pytest.mark.parametrize("batch", [(), (5,), (4, 5)])
def test_valid_instances_report_their_batch_axes(batch: tuple[int, ...]) -> None:
    assert points(*batch).get_batch_axes() == batch


def test_shape_mismatch_names_class_field_expected_and_actual() -> None:
    with raises_mismatch("field 'xy' of Points", "shape (2,)", "has shape (5, 3)"):
        Points(jnp.zeros((5, 3)), jnp.ones(5, dtype=bool))
    with raises_mismatch("field 'xy' of Points", "shape (2,)", "has shape ()"):
        Points(jnp.float32(1.0), jnp.array(True))


def test_dtype_mismatch_names_class_field_expected_and_actual() -> None:
    with raises_mismatch("field 'xy' of Points", "dtype floating", "has dtype int32"):
        Points(jnp.zeros(2, dtype=jnp.int32), jnp.array(True))
    with raises_mismatch("field 'mask' of Points", "dtype bool", "has dtype float32"):
        Points(jnp.zeros(2), jnp.zeros(()))
    with raises_mismatch("field 'counts' of Counts", "dtype integer", "has dtype float32"):
        Counts(jnp.zeros(3))
    with raises_mismatch("field 'counts' of Counts", "dtype integer", "has dtype float64"):
        Counts(np.float64(1.0))  # type: ignore[arg-type]  # A NumPy scalar is checked.
    assert Counts(np.arange(3, dtype=np.uint8)).counts.dtype == np.uint8


def test_batch_axis_mismatch_names_both_fields() -> None:
    with raises_mismatch("field 'mask' of Points has batch axes (4,)", "field 'xy'", "(5,)"):
        Points(jnp.zeros((5, 2)), jnp.ones(4, dtype=bool))


def test_middle_batch_axes() -> None:
    assert Image(jnp.zeros((3, 7, 8, 4))).get_batch_axes() == (7, 8)
    assert Image(jnp.zeros((3, 4))).get_batch_axes() == ()
    with raises_mismatch("field 'pixels' of Image", "shape (3, ..., 4)", "has shape (4, 3)"):
        Image(jnp.zeros((4, 3)))
    with raises_mismatch("field 'pixels' of Image", "has shape (3,)"):
        Image(jnp.zeros(3))


def test_python_scalars_have_shape_unit_and_no_dtype_check() -> None:
    assert Cloud(points(), 1.5).get_batch_axes() == ()
    assert Cloud(points(), 2).get_batch_axes() == ()
    with raises_mismatch("field 'xy' of Points", "shape (2,)", "has shape ()"):
        Points(1.0, True)  # type: ignore[arg-type]


def test_nested_instances_must_extend_the_parent_batch_axes() -> None:
    assert Cloud(points(5), jnp.zeros(5)).get_batch_axes() == (5,)
    assert Cloud(points(5, 7), jnp.zeros(5)).get_batch_axes() == (5,)
    with raises_mismatch(
        "field 'points' of Cloud holds a Points with batch axes (4,)", "batch axes (5,) of Cloud"
    ):
        Cloud(points(4), jnp.zeros(5))


def test_non_arrays_are_not_checked_and_give_no_batch_axes() -> None:
    counts = Counts(jnp.arange(3))
    with raises_mismatch("Counts has no batch axes"):
        counts.get_batch_axes()
    cloud = Cloud(points(), None)  # type: ignore[arg-type]
    with raises_mismatch("Cloud has no batch axes"):
        cloud.get_batch_axes()


def test_a_post_init_calling_super_runs_the_checks() -> None:
    assert Checked(jnp.zeros((6, 2))).post_init_ran
    with raises_mismatch("field 'value' of Checked"):
        Checked(jnp.zeros(3))


_SHAPE_EVALUATIONS: list[int] = []


def _counted_shape() -> tuple[int, ...]:
    _SHAPE_EVALUATIONS.append(1)
    return (2,)


def test_annotations_are_parsed_once_per_class() -> None:
    # The annotation is a string (this module has `from __future__ import annotations`): each
    # parse evaluates it, and so calls `_counted_shape`.
    _SHAPE_EVALUATIONS.clear()
    with pytest.warns(DeprecationWarning):

        @jdc.pytree_dataclass
        class Fresh(jdc.EnforcedAnnotationsMixin):
            v: Annotated[jax.Array, _counted_shape()]

    for _ in range(3):
        Fresh(jnp.zeros(2)).get_batch_axes()
    assert len(_SHAPE_EVALUATIONS) == 1
    with raises_mismatch("field 'v' of", "Fresh"):
        Fresh(jnp.zeros(3))


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        ("Annotated[jax.Array, (2,), (3,)]", "at most one shape and one dtype"),
        ("Annotated[jax.Array, jnp.float32, jnp.int32]", "at most one shape and one dtype"),
        ("Annotated[jax.Array, (..., 2, ...)]", "more than one `...`"),
        ("Annotated[jax.Array, ('n', 2)]", "may only contain sizes"),
        ("Annotated[jax.Array, (-1,)]", "may only contain sizes"),
    ],
)
def test_malformed_annotations_raise_type_error(annotation: str, problem: str) -> None:
    namespace = {"__annotations__": {"v": annotation}, "__module__": __name__}
    with pytest.warns(DeprecationWarning):
        bad = jdc.pytree_dataclass(type("Bad", (jdc.EnforcedAnnotationsMixin,), namespace))
    with pytest.raises(TypeError, match=r"field 'v' of Bad: .*" + re.escape(problem)):
        bad(jnp.zeros(2))


# -- EnforcedAnnotationsMixin: what 1.x accepted ------------------------------------------------


def test_unresolvable_annotations_of_unchecked_fields_are_skipped() -> None:
    instance = TypeCheckingOnly(jnp.zeros((4, 3)))
    assert instance.get_batch_axes() == (4,)
    with raises_mismatch("field 'x' of TypeCheckingOnly", "has shape (2,)"):
        TypeCheckingOnly(jnp.zeros(2))


def test_unresolvable_array_type_with_resolvable_metadata_is_still_checked() -> None:
    assert TypeCheckingOnly(jnp.zeros((4, 3)), host=np.zeros((4, 2))).get_batch_axes() == (4,)
    with raises_mismatch("field 'host' of TypeCheckingOnly", "has shape (4, 3)"):
        TypeCheckingOnly(jnp.zeros((4, 3)), host=np.zeros((4, 3)))
    with raises_mismatch("field 'host' of TypeCheckingOnly", "dtype floating", "has dtype int"):
        TypeCheckingOnly(jnp.zeros((4, 3)), host=np.zeros((4, 2), dtype=int))


def test_classes_local_to_a_function_may_refer_to_each_other() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)

        @jdc.pytree_dataclass
        class Child(jdc.EnforcedAnnotationsMixin):
            y: Annotated[jax.Array, (2,)]

        @jdc.pytree_dataclass
        class Parent(jdc.EnforcedAnnotationsMixin):
            x: Annotated[jax.Array, (3,)]
            child: Child  # A string naming a local class: not resolvable, not needed.
            later: Later | None = None

        @jdc.pytree_dataclass
        class Later:
            z: Any

    assert Parent(jnp.zeros((4, 3)), Child(jnp.zeros((4, 2)))).get_batch_axes() == (4,)
    with raises_mismatch("field 'child' of ", "Parent holds a ", "Child with batch axes (5,)"):
        Parent(jnp.zeros((4, 3)), Child(jnp.zeros((5, 2))))


def test_metadata_resolves_where_the_class_is_defined() -> None:
    """Read as every annotation is, in the scope that defines the class: a local name too
    (1.x evaluated it in the module, where `size` is not defined)."""
    size = 3
    with pytest.warns(DeprecationWarning):

        @jdc.pytree_dataclass
        class Local(jdc.EnforcedAnnotationsMixin):
            x: Annotated[jax.Array, (size,)]

    assert Local(jnp.zeros((2, size))).get_batch_axes() == (2,)
    with raises_mismatch("field 'x' of", "Local", "has shape (2,)"):
        Local(jnp.zeros(2))


def test_a_plain_dataclass_reads_its_annotations_in_its_module_as_1x_did() -> None:
    """1.x allowed the mixin on a plain dataclass; its annotations are read at the first
    construction, in the class and its module (a local of the defining function is not
    read: that function may be running again, for another class)."""
    with pytest.warns(DeprecationWarning):
        module = define(
            """
import dataclasses
from typing import Annotated
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

Vec = Annotated[jax.Array, (3,), jnp.floating]

@dataclasses.dataclass(frozen=True)
class Point(jdc.EnforcedAnnotationsMixin):
    x: Vec
""",
            "future import",
        )
    assert module.Point(jnp.zeros((2, 3))).get_batch_axes() == (2,)
    with raises_mismatch("field 'x' of Point", "has shape (2,)"):
        module.Point(jnp.zeros(2))


def test_unresolvable_metadata_of_an_annotated_field_is_a_type_error() -> None:
    with pytest.warns(DeprecationWarning):

        @jdc.pytree_dataclass
        class Unknown(jdc.EnforcedAnnotationsMixin):
            x: Annotated[jax.Array, (undefined_size,)]  # noqa: F821  # type: ignore[name-defined]

    with pytest.raises(TypeError, match=r"field 'x' of .*Unknown: .*name 'undefined_size' is not"):
        Unknown(jnp.zeros(3))


@pytest.mark.parametrize(
    ("dtype", "accepted", "rejected", "shown"),
    [
        ("float32", np.float32, np.int32, "float32"),
        (np.dtype("int8"), np.int8, np.int16, "int8"),
        (bool, np.bool_, np.float32, "bool"),
        (float, np.float64, np.float32, "float64"),  # As in NumPy (and 1.x): float is float64.
        (jnp.float32, np.float32, np.float16, "float32"),
        (jnp.bfloat16, jnp.bfloat16, np.float32, "bfloat16"),
        (np.signedinteger, np.int8, np.uint8, "signedinteger"),
        (jnp.inexact, np.complex64, np.int32, "inexact"),
    ],
)
def test_dtype_forms_of_1x(dtype: object, accepted: Any, rejected: Any, shown: str) -> None:
    namespace = {"__annotations__": {"v": Annotated[jax.Array, (2,), dtype]}}
    with pytest.warns(DeprecationWarning):
        cls = jdc.pytree_dataclass(type("Typed", (jdc.EnforcedAnnotationsMixin,), namespace))
    assert cls(np.zeros((5, 2), dtype=accepted)).get_batch_axes() == (5,)
    with raises_mismatch("field 'v' of Typed", f"dtype {shown} but", f"dtype {np.dtype(rejected)}"):
        cls(np.zeros(2, dtype=rejected))


@pytest.mark.parametrize("extra", ["A docstring.", "doc", 7, None, object(), Any, jax.Array])
def test_metadata_that_is_neither_shape_nor_dtype_is_ignored(extra: object) -> None:
    namespace = {"__annotations__": {"v": Annotated[jax.Array, extra, (2,), jnp.floating]}}
    with pytest.warns(DeprecationWarning):
        cls = jdc.pytree_dataclass(type("Documented", (jdc.EnforcedAnnotationsMixin,), namespace))
    assert cls(jnp.zeros((3, 2))).get_batch_axes() == (3,)
    with raises_mismatch("field 'v' of Documented", "dtype floating", "has dtype int32"):
        cls(jnp.zeros(2, dtype=int))
    with raises_mismatch("field 'v' of Documented", "shape (2,)", "has shape (3,)"):
        cls(jnp.zeros(3))


def test_prng_key_arrays() -> None:
    key = jax.random.key(0)
    assert Key(key).get_batch_axes() == ()
    assert Key(jax.random.split(key, 4), jnp.zeros(4)).get_batch_axes() == (4,)
    with raises_mismatch("field 'noise' of Key", "dtype floating", "has dtype key<fry>"):
        Key(key, key)
    with raises_mismatch("field 'key' of Key", "dtype prng_key", "has dtype uint32"):
        Key(jax.random.PRNGKey(0))  # A legacy uint32 key is not a typed key array.


# -- EnforcedAnnotationsMixin: JAX transforms rebuild without checks ----------------------------


def test_jacobian_between_annotated_classes() -> None:
    matrix = jnp.arange(6.0).reshape(2, 3)

    def f(position: Position) -> Features:
        return Features(matrix @ position.x)

    jacobian = jax.jacfwd(f)(Position(jnp.ones(3)))
    # Features.y holds a Position of shape (2, 3): built by unflatten, so nothing checks it.
    assert isinstance(jacobian, Features) and isinstance(jacobian.y, Position)
    np.testing.assert_array_equal(jacobian.y.x, matrix)
    reverse = jax.jacrev(f)(Position(jnp.ones(3)))
    np.testing.assert_array_equal(reverse.y.x, matrix)


def test_vmap_over_batched_instances_and_construction_inside() -> None:
    batch = points(5)
    doubled = jax.vmap(lambda p: Points(p.xy * 2, p.mask, p.label))(batch)
    assert doubled.get_batch_axes() == (5,)
    assert jax.vmap(lambda p: p.get_batch_axes() == ())(batch).all()


def test_get_batch_axes_is_recomputed_for_unflattened_instances() -> None:
    jitted = jax.jit(lambda p: p)(points(4, 5))
    assert jitted.get_batch_axes() == (4, 5)
    first = jax.tree.map(lambda leaf: leaf[0], points(4, 5))
    assert first.get_batch_axes() == (5,)
    leaves, treedef = jax.tree.flatten(points(5))
    broken = jax.tree.unflatten(treedef, [leaves[0], jnp.ones(4, dtype=bool)])
    with raises_mismatch("field 'mask' of Points has batch axes (4,)"):
        broken.get_batch_axes()
