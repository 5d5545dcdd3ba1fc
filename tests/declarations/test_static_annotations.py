"""Which fields are static: `Static[...]` in every spelling, metadata, inheritance, errors."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle
import sys
import types
import typing
from typing import Annotated, ClassVar, Generic, Optional, TypeVar

import jax
import jax.numpy as jnp
import pytest
from helpers import children, statics  # tests/ is on sys.path under pytest.
from typing_extensions import TypeAliasType

import jax_dataclasses as jdc

T = TypeVar("T")


def test_future_annotations_strings_are_resolved() -> None:
    # This module uses `from __future__ import annotations`: every annotation is a string.
    @jdc.pytree_dataclass
    class Layer:
        w: jax.Array
        activation: jdc.Static[str] = "tanh"

    assert statics(Layer) == ("activation",)
    assert children(Layer) == ("w",)
    treedef = jax.tree_util.tree_structure(Layer(jnp.ones(2)))
    assert "tanh" in str(treedef)


def test_object_annotations_and_explicit_strings() -> None:
    namespace: dict[str, object] = {"jdc": jdc, "jax": jax}
    exec(
        "@jdc.pytree_dataclass\n"
        "class Obj:\n"
        "    a: jdc.Static[int]\n"
        "    b: 'jdc.Static[int]'\n"
        "    c: jax.Array\n",
        namespace,
    )
    assert statics(namespace["Obj"]) == ("a", "b")  # type: ignore[arg-type]


def test_aliases_and_locals_of_the_decorating_scope() -> None:
    import jax_dataclasses as local_jdc

    S = local_jdc.Static

    @local_jdc.pytree_dataclass
    class Aliased:
        a: S[int]
        b: local_jdc.Static[float]
        c: Annotated[S[int], "documented"]
        d: int

    assert statics(Aliased) == ("a", "b", "c")


def test_forward_reference_inside_static_to_a_later_local_class() -> None:
    @jdc.pytree_dataclass
    class Holder:
        config: jdc.Static[Container[bool]]
        x: jax.Array

    @dataclasses.dataclass(frozen=True)
    class Container(Generic[T]):
        value: T

    holder = Holder(Container(True), jnp.zeros(()))
    assert statics(Holder) == ("config",)
    assert jax.tree_util.tree_leaves(holder) == [holder.x]


def test_generic_class_with_static_type_variable() -> None:
    @jdc.pytree_dataclass
    class Box(Generic[T]):
        label: jdc.Static[T]
        value: jax.Array

    box: Box[str] = Box("a", jnp.ones(3))
    assert statics(Box) == ("label",)
    assert jax.tree_util.tree_structure(box) != jax.tree_util.tree_structure(Box("b", box.value))


def test_metadata_conventions_of_other_libraries() -> None:
    @jdc.pytree_dataclass
    class Migrated:
        a: int = dataclasses.field(default=1, metadata={"static": True})
        b: int = dataclasses.field(default=2, metadata={"pytree_node": False})
        c: float = dataclasses.field(default=3.0, metadata={"pytree_node": True})
        d: float = dataclasses.field(default=4.0, metadata={"static": False})

    assert statics(Migrated) == ("a", "b")
    assert children(Migrated) == ("c", "d")


def test_classvar_and_initvar_are_not_fields() -> None:
    @jdc.pytree_dataclass
    class WithPseudoFields:
        x: jax.Array
        scale: dataclasses.InitVar[float] = 1.0
        count: ClassVar[int] = 0
        tag: ClassVar[jdc.Static[str]] = "t"

        def __post_init__(self, scale: float) -> None:
            object.__setattr__(self, "x", self.x * scale)

    obj = WithPseudoFields(jnp.ones(2), scale=3.0)
    assert children(WithPseudoFields) == ("x",)
    assert statics(WithPseudoFields) == ()
    assert jnp.array_equal(jax.tree_util.tree_leaves(obj)[0], jnp.full(2, 3.0))


def test_inherited_fields_keep_their_decision() -> None:
    @dataclasses.dataclass
    class PlainBase:
        p: jdc.Static[int]
        q: float

    @jdc.pytree_dataclass
    class Middle(PlainBase):
        r: jdc.Static[str] = "r"

    @jdc.pytree_dataclass(kw_only=True)
    class Leaf(Middle):
        s: jax.Array
        t: jdc.Static[bool] = True

    assert statics(Middle) == ("p", "r")
    assert statics(Leaf) == ("p", "r", "t")
    assert children(Leaf) == ("q", "s")
    leaf = Leaf(1, 2.0, s=jnp.ones(1))
    assert jax.tree_util.tree_leaves(leaf) == [2.0, leaf.s]


def test_kw_only_and_init_false_fields_are_state() -> None:
    @jdc.pytree_dataclass
    class State:
        x: jax.Array
        _: dataclasses.KW_ONLY
        mode: jdc.Static[str] = "a"
        steps: jax.Array = dataclasses.field(init=False, default=jnp.zeros(()))
        label: jdc.Static[str] = dataclasses.field(init=False, default="fixed")

    state = State(jnp.ones(2), mode="b")
    assert statics(State) == ("mode", "label")
    assert children(State) == ("x", "steps")
    leaves, treedef = jax.tree_util.tree_flatten(state)
    rebuilt = jax.tree_util.tree_unflatten(treedef, [leaf + 1 for leaf in leaves])
    assert rebuilt.label == "fixed" and rebuilt.mode == "b"
    assert jnp.array_equal(rebuilt.steps, jnp.ones(()))


@pytest.mark.parametrize(
    ("annotation", "shown"),
    [
        ("Optional[jdc.Static[int]]", "Optional[jdc.Static[int]]"),
        ("list[jdc.Static[int]]", "list[jdc.Static[int]]"),
        ("'jdc.Static[int]' | None", "'jdc.Static[int]' | None"),
    ],
)
def test_nested_static_is_an_error_that_shows_the_fix(annotation: str, shown: str) -> None:
    namespace: dict[str, object] = {"jdc": jdc, "Optional": Optional}
    with pytest.raises(jdc.StaticAnnotationError) as info:
        exec(f"@jdc.pytree_dataclass\nclass Nested:\n    x: {annotation!r}\n", namespace)
    message = str(info.value)
    assert "field 'x' of Nested" in message
    assert shown in message
    assert "Static[Optional[int]]" in message
    assert isinstance(info.value, TypeError)


def test_nested_static_object_annotation_is_an_error() -> None:
    with pytest.raises(TypeError, match=r"outermost.*field 'y' of \S*Obj, got typing.Optional"):

        @jdc.pytree_dataclass
        class Obj:
            y: typing.Optional[jdc.Static[int]]  # noqa: UP045  # The spelling under test.

    namespace: dict[str, object] = {"jdc": jdc, "typing": typing}
    with pytest.raises(jdc.StaticAnnotationError, match="field 'z' of Obj2"):
        exec(
            "@jdc.pytree_dataclass\nclass Obj2:\n    z: typing.Optional[jdc.Static[int]]\n",
            namespace,
        )


def test_undecidable_outer_part_that_mentions_static_is_an_error() -> None:
    with pytest.raises(jdc.StaticAnnotationError) as info:

        @jdc.pytree_dataclass
        class Undecided:
            x: NotYetDefined[jdc.Static[int]]  # type: ignore[name-defined]  # noqa: F821

    assert "field 'x' of " in str(info.value)
    assert "Undecided" in str(info.value)
    assert "cannot tell" in str(info.value)


def test_undecidable_annotation_without_static_is_a_child() -> None:
    @jdc.pytree_dataclass
    class Later:
        x: DefinedLater  # type: ignore[name-defined]  # noqa: F821

    assert children(Later) == ("x",)


def test_markers_of_jax_dataclasses_1_6_are_honoured() -> None:
    @jdc.pytree_dataclass
    class Legacy:
        a: Annotated[int, "__jax_dataclasses_static_field__"]
        b: int = dataclasses.field(default=0, metadata={"__jax_dataclasses_static_field__": True})
        c: float = 0.0

    assert statics(Legacy) == ("a", "b")


def test_unresolvable_module_alias_spelling_static_is_an_error() -> None:
    with pytest.raises(
        jdc.StaticAnnotationError, match=r"cannot tell.*Unknown\.Static\[int\] of field 'n'"
    ):

        @jdc.pytree_dataclass
        class Typo:
            n: Unknown.Static[int]  # type: ignore[name-defined]  # noqa: F821


StaticAlias = TypeAliasType("StaticAlias", jdc.Static[int])
GenericStaticAlias = TypeAliasType("GenericStaticAlias", jdc.Static[T], type_params=(T,))


def test_type_alias_objects_resolve_to_what_they_name() -> None:
    @jdc.pytree_dataclass
    class Aliased:
        x: jax.Array
        n: StaticAlias = 3
        name: GenericStaticAlias[str] = "a"

    assert statics(Aliased) == ("n", "name")
    obj = Aliased(jnp.ones(2))
    assert jax.tree_util.tree_leaves(obj)[0].shape == (2,)
    assert jax.tree_util.tree_structure(obj) != jax.tree_util.tree_structure(Aliased(obj.x, 4))

    compiles: list[int] = []

    @jdc.jit
    def scale(x: jax.Array, factor: StaticAlias) -> jax.Array:
        compiles.append(factor)
        return x * factor

    assert scale(jnp.ones(1), 3).tolist() == [3.0] and scale(jnp.ones(1), 3).tolist() == [3.0]
    assert compiles == [3]


def test_a_type_alias_nested_inside_another_type_is_an_error() -> None:
    with pytest.raises(jdc.StaticAnnotationError, match=r"field 'n' of \S*Bad.*Optional"):

        @jdc.pytree_dataclass
        class Bad:
            n: Optional[StaticAlias] = None  # noqa: UP045  # the spelling under test


@pytest.mark.skipif(sys.version_info < (3, 12), reason="`type` statements need Python 3.12+")
def test_pep695_type_statements_resolve_to_what_they_name() -> None:
    aliases = importlib.import_module("_aliases_pep695")
    assert statics(aliases.Aliased) == ("n", "name", "depth")
    assert children(aliases.Aliased) == ("x",)
    assert aliases.scale(jnp.ones(1), 2).tolist() == [2.0]
    with pytest.raises((TypeError, ValueError)):  # static: a tracer cannot be passed
        jax.jit(lambda f: aliases.scale(jnp.ones(1), f))(2)


def test_annotated_around_a_static_alias_is_static() -> None:
    @jdc.pytree_dataclass
    class Documented:
        x: jax.Array
        n: Annotated[StaticAlias, "the width"] = 3

    assert statics(Documented) == ("n",)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="`type` statements need Python 3.12+")
def test_an_alias_that_cannot_be_evaluated_yet_is_an_error_not_a_child() -> None:
    source = """
import jax
import jax_dataclasses as jdc

type Later = jdc.Static[NotYetDefined]

@jdc.pytree_dataclass
class Config:
    x: jax.Array
    c: Later = None
"""
    module = types.ModuleType("unevaluated_aliases")
    sys.modules[module.__name__] = module
    try:
        with pytest.raises(jdc.StaticAnnotationError, match=r"field 'c' of Config .*type alias"):
            exec(compile(source, "<aliases>", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]


def my_dataclass(cls: type) -> type:
    """A user's own decorator around ours: a frame between us and the class's scope."""
    return jdc.pytree_dataclass(cls)


def test_annotations_resolve_in_the_defining_scope_through_a_wrapper() -> None:
    S = jdc.Static[int]

    @my_dataclass
    class Wrapped:
        n: S
        x: jax.Array

    assert statics(Wrapped) == ("n",)

    class Outer:
        Alias = jdc.Static[str]

        @my_dataclass
        class Inner:
            name: Alias  # type: ignore[name-defined]  # noqa: F821  # Outer's body, as 1.6 read it

    assert statics(Outer.Inner) == ("name",)


def test_jit_annotations_resolve_in_the_defining_scope_through_a_wrapper() -> None:
    S = jdc.Static[int]

    def my_jit(fn: typing.Callable[..., typing.Any]) -> typing.Any:
        return jdc.jit(fn)

    @my_jit
    def tile(x: jax.Array, times: S) -> jax.Array:
        return jnp.tile(x, times)

    assert tile(jnp.ones(2), 3).shape == (6,)


def make_undecorated() -> type:
    S = jdc.Static[int]

    class Made:
        n: S  # noqa: F821  # deleted below: only the string keeps it
        x: Later  # type: ignore[name-defined]  # noqa: F821

    del S  # Only the annotation's string keeps the name.
    return Made


def test_local_names_of_a_function_that_returned_are_an_error_naming_the_field() -> None:
    with pytest.raises(
        jdc.StaticAnnotationError, match=r"field 'n' of make_undecorated.<locals>.Made"
    ) as info:
        jdc.pytree_dataclass(make_undecorated())
    assert "function that defines it has returned" in str(info.value)


def test_static_marks_reach_the_messages_and_1_6_checkpoints_through_a_wrapper() -> None:
    S = jdc.Static[int]

    @my_dataclass
    class Marked:
        by_alias: S
        by_metadata: int = dataclasses.field(metadata={"pytree_node": False})
        x: float = 0.0

    assert statics(Marked) == ("by_alias", "by_metadata")
    # 1.6.3 saw neither (checked against it: leaves [1, 2, 3.0]): not the alias, local to this
    # function under the future import, nor pytree_node=False. Both were saved as children.
    saved = jdc.v1_6_layout(Marked(1, 2, 3.0))
    assert saved == [1, 2, 3.0]
    with pytest.raises(TypeError, match=r"remove pytree_node=False from its field metadata"):
        jax.jit(lambda v: Marked(1, v))(jnp.ones(2))


LITERAL_AND_METADATA = """
from typing import Annotated, Literal
import jax
import jax_dataclasses as jdc
from jax_dataclasses import Static

@jdc.pytree_dataclass
class Body:
    x: jax.Array
    kind: jdc.Static[Literal["Static", "Kinetic"]] = "Static"
    mode: Literal["Static", "Kinetic"] = "Kinetic"
    note: Annotated[int, "Static"] = 0

@jdc.jit
def step(
    x: jax.Array,
    kind: jdc.Static[Literal["Static", "Kinetic"]],
    flag: Literal["Static"] | None = None,
) -> jax.Array:
    return x + (1 if kind == "Static" else 2)
"""


@pytest.mark.parametrize("future", [True, False])
def test_literal_values_and_annotated_metadata_are_values_not_annotations(future: bool) -> None:
    """`Literal["Static"]` after `from jax_dataclasses import Static` names a string."""
    namespace: dict[str, object] = {}
    header = "from __future__ import annotations\n" if future else ""
    exec(compile(header + LITERAL_AND_METADATA, "<literal>", "exec"), namespace)
    body = namespace["Body"]
    assert statics(body) == ("kind",)  # type: ignore[arg-type]
    assert children(body) == ("x", "mode", "note")  # type: ignore[arg-type]
    step = namespace["step"]
    assert step(jnp.zeros(1), "Static").tolist() == [1.0]  # type: ignore[operator]
    assert step(jnp.zeros(1), "Kinetic").tolist() == [2.0]  # type: ignore[operator]


def test_a_static_alias_in_the_class_body_is_resolved_there() -> None:
    # The future import (this module's) makes `Int` a string: resolved in the class body
    # first, as `typing.get_type_hints` and jax_dataclasses 1.6.3 do (and Python without it).
    @jdc.pytree_dataclass
    class Solver:
        Int = jdc.Static[int]
        x: jax.Array
        iters: Int = 3

    assert statics(Solver) == ("iters",)
    assert len(jax.tree.leaves(Solver(jnp.zeros(2)))) == 1


def test_the_static_marker_is_one_object_through_copies_and_pickles() -> None:
    """A second, equal marker would replace ours in `typing`'s cache of `Annotated` aliases
    (`test_moved_modules.py` shows the field it made dynamic): copies and pickles give ours."""
    marker = jdc.Static[int].__metadata__[0]
    assert copy.deepcopy(marker) is marker and copy.copy(marker) is marker
    assert pickle.loads(pickle.dumps(marker)) is marker
    assert pickle.loads(pickle.dumps(jdc.Static[int])).__metadata__[0] is marker
