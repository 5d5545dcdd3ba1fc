"""Class hierarchies as real users build them: several levels and several pytree bases.

Each hierarchy is built twice by one function, once with `jdc.pytree_dataclass` and once with
the standard library's frozen dataclass, and the two must agree (fields, `__init__`, values).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import jax_dataclasses as jdc

Decorator = Callable[[type], type]
FROZEN: Decorator = dataclasses.dataclass(frozen=True)
DECORATORS = {"jdc": jdc.pytree_dataclass, "stdlib": FROZEN}


def chain(decorate: Decorator, depth: int, undecorated: frozenset[int] = frozenset()) -> type:
    """`L0 <- L1 <- ...`: level i adds field `f{i}` with default i (the levels in `undecorated`
    add nothing and stay undecorated)."""
    cls: type = object
    for level in range(depth):
        namespace: dict[str, Any] = {}
        if level not in undecorated:
            namespace = {"__annotations__": {f"f{level}": int}, f"f{level}": level}
        cls = type(f"L{level}", (cls,), namespace)
        if level not in undecorated:
            cls = decorate(cls)
    return cls


def signature(cls: type) -> list[tuple[str, Any, Any]]:
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
    ][1:]


def values(obj: object) -> dict[str, object]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}  # type: ignore[arg-type]


@pytest.mark.parametrize("depth", [3, 4, 6])
@pytest.mark.parametrize("undecorated", [frozenset(), frozenset({1}), frozenset({0, 2})])
def test_levels_of_decorated_classes_construct_like_frozen_dataclasses(
    depth: int, undecorated: frozenset[int]
) -> None:
    ours, theirs = (chain(DECORATORS[name], depth, undecorated) for name in ("jdc", "stdlib"))
    assert signature(ours) == signature(theirs)
    args = [10 * i for i, _ in enumerate(signature(ours))]
    obj, reference = ours(*args), theirs(*args)
    assert values(obj) == values(reference)
    keyed, treedef = jax.tree_util.tree_flatten_with_path(obj)
    assert [(jax.tree_util.keystr(path), leaf) for path, leaf in keyed] == [
        (f".{name}", value) for name, value in values(reference).items()
    ]
    assert jax.tree_util.tree_unflatten(treedef, [x + 1 for _, x in keyed]) == ours(
        *(a + 1 for a in args)
    )


def test_an_undecorated_subclass_at_the_fourth_level_is_adopted_or_refused() -> None:
    top = chain(jdc.pytree_dataclass, 3)

    class Adopted(top):  # type: ignore[misc, valid-type]
        pass

    assert jax.tree_util.tree_leaves(Adopted(1, 2, 3)) == [1, 2, 3]

    class Extended(top):  # type: ignore[misc, valid-type]
        extra: int = 0

    with pytest.raises(
        TypeError, match="Extended subclasses a pytree dataclass and declares fields 'extra'"
    ):
        Extended(1, 2, 3)
    assert jax.tree_util.tree_leaves(jdc.pytree_dataclass(Extended)(1, 2, 3, 4)) == [1, 2, 3, 4]


def two_bases(decorate: Decorator) -> type:
    """`C(A, M)`: two decorated bases, as a factor-graph library declares its variables."""

    @decorate
    class M:
        m: int

    @decorate
    class A:
        a: int

    @decorate
    class C(A, M):
        c: int = 3

    return C


def test_two_pytree_bases_construct_like_frozen_dataclasses() -> None:
    ours, theirs = two_bases(jdc.pytree_dataclass), two_bases(FROZEN)
    assert signature(ours) == signature(theirs)
    obj = ours(m=2, a=1)
    assert values(obj) == values(theirs(m=2, a=1)) == {"m": 2, "a": 1, "c": 3}
    assert jax.tree_util.tree_leaves(obj) == [2, 1, 3]
    assert jax.tree_util.tree_map(lambda x: x * 10, obj) == ours(20, 10, 30)


def test_a_diamond_of_pytree_dataclasses() -> None:
    def diamond(decorate: Decorator) -> type:
        @decorate
        class Root:
            r: int = 0

        @decorate
        class Left(Root):
            left: int = 1

        @decorate
        class Right(Root):
            right: int = 2

        @decorate
        class Bottom(Left, Right):
            bottom: int = 3

        return Bottom

    ours, theirs = diamond(jdc.pytree_dataclass), diamond(FROZEN)
    assert signature(ours) == signature(theirs)
    assert values(ours()) == values(theirs())
    assert jax.tree_util.tree_leaves(ours()) == [0, 2, 1, 3]


def test_own_init_subclass_in_a_middle_level_runs_once_per_subclass() -> None:
    seen: list[str] = []

    @jdc.pytree_dataclass
    class Base:
        x: int = 0

    @jdc.pytree_dataclass
    class Middle(Base):
        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            seen.append(cls.__name__)

    @jdc.pytree_dataclass
    class Leaf(Middle):
        y: int = 1

    class Undecorated(Leaf):
        pass

    assert seen == ["Leaf", "Undecorated"]
    assert jax.tree_util.tree_leaves(Undecorated(5, 6)) == [5, 6]


def test_deep_hierarchy_with_own_inits_at_several_levels() -> None:
    @jdc.pytree_dataclass
    class Base:
        x: int

        def __init__(self, x: int) -> None:
            self.x = x * 2

    @jdc.pytree_dataclass
    class Middle(Base):
        y: int = 0

    @jdc.pytree_dataclass
    class Top(Middle):
        z: int = 0

        def __init__(self, x: int, z: int) -> None:
            super().__init__(x)
            self.y, self.z = x + 1, z

    top = Top(1, 5)  # Middle's generated __init__ replaces Base's, as in the standard library
    assert (top.x, top.y, top.z) == (1, 2, 5)
    assert Base(1).x == 2
    assert jax.tree_util.tree_map(lambda v: v, top) == top


def initvar_classes(decorate: Decorator, where: str) -> type:
    """A class whose keyword-only InitVar is declared before a positional one."""
    calls: list[tuple[object, ...]] = []

    if where == "kw_only base":
        base = dataclasses.dataclass(frozen=True, kw_only=True)(
            type("Base", (), {"__annotations__": {"a": dataclasses.InitVar[int]}})
        )
    elif where == "KW_ONLY in base":
        base = decorate(
            type(
                "Base",
                (),
                {"__annotations__": {"_": dataclasses.KW_ONLY, "a": dataclasses.InitVar[int]}},
            )
        )
    else:  # field(kw_only=True)
        base = decorate(
            type(
                "Base",
                (),
                {
                    "__annotations__": {"a": dataclasses.InitVar[int]},
                    "a": dataclasses.field(kw_only=True),
                },
            )
        )

    def __post_init__(self: object, a: int, b: int) -> None:
        calls.append((a, b))

    cls = decorate(
        type(
            "Derived",
            (base,),
            {
                "__annotations__": {"b": dataclasses.InitVar[int], "x": int},
                "x": 0,
                "__post_init__": __post_init__,
                "calls": calls,
            },
        )
    )
    return cls


@pytest.mark.parametrize("where", ["kw_only base", "KW_ONLY in base", "field(kw_only=True)"])
def test_initvars_reach_post_init_in_field_order(where: str) -> None:
    ours, theirs = initvar_classes(jdc.pytree_dataclass, where), initvar_classes(FROZEN, where)
    assert signature(ours) == signature(theirs)
    for cls in (ours, theirs):
        obj = cls(2, a=1)
        jdc.replace(obj, a=3, b=4)
    assert ours.calls == theirs.calls == [(1, 2), (3, 4)]  # type: ignore[attr-defined]


def body_class() -> type:
    @jdc.pytree_dataclass
    class Body:
        mass: float
        inv_mass: float = jdc.field(init=False)
        steps: int = jdc.field(init=False, default=0)

        def __post_init__(self) -> None:
            self.inv_mass = 1 / self.mass

    return Body


def test_post_init_setting_an_init_false_field_warns_once_naming_it() -> None:
    body = body_class()
    with pytest.warns(jdc.DerivedFieldWarning) as caught:
        body(2.0)
        body(4.0)
    assert len(caught) == 1  # once per class and field; `steps` is not set by __post_init__
    message = str(caught[0].message)
    assert "field 'inv_mass' of body_class.<locals>.Body has init=False" in message
    assert "1.6 left init=False fields out of the tree and ran __post_init__ again" in message
    assert "make it a @property" in message
    assert caught[0].filename == __file__
    updated = jax.tree_util.tree_map(lambda x: x * 2, body(2.0))
    assert (updated.mass, updated.inv_mass) == (4.0, 1.0)  # what the warning is about


def test_the_derived_field_warning_can_be_silenced_for_one_field() -> None:
    body = body_class()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", "field 'inv_mass' of", jdc.DerivedFieldWarning)
        assert body(2.0).inv_mass == 0.5


def test_the_generated_docstring_is_the_standard_librarys() -> None:
    def classes(decorate: Decorator) -> list[type]:
        @decorate
        class Plain:
            w: int
            name: str = "x"

        @decorate
        class Documented:
            """Mine."""

            w: int

        @decorate
        class OwnInit:
            w: int

            def __init__(self, w: int) -> None:
                object.__setattr__(self, "w", w)

        return [Plain, Documented, OwnInit]

    ours, theirs = classes(jdc.pytree_dataclass), classes(FROZEN)
    assert [cls.__doc__ for cls in ours] == [cls.__doc__ for cls in theirs]


@jdc.pytree_dataclass
class Base:
    a: int = 0


def test_an_undecorated_class_with_fields_refuses_its_undecorated_subclasses_too() -> None:
    class Extended(Base):
        b: int = 1

    class Further(Extended):
        pass

    refused = (
        r"Further subclasses a pytree dataclass and declares fields 'b' \(declared by \S*Extended\)"
    )
    with pytest.raises(TypeError, match=refused):
        Further()


def test_a_decorated_subclass_constructs_through_an_undecorated_class_with_fields() -> None:
    def hierarchy(decorate: Decorator) -> type:
        base = decorate(type("Base", (), {"__annotations__": {"a": int}, "a": 0}))
        extended = type("Extended", (base,), {"__annotations__": {"b": int}, "b": 1})

        def __init__(self: Any, d: int) -> None:
            super(top, self).__init__(5)
            object.__setattr__(self, "d", d)

        namespace = {"__annotations__": {"d": int}, "d": 0, "__init__": __init__}
        top = decorate(type("Top", (extended,), namespace))
        return top

    ours, theirs = hierarchy(jdc.pytree_dataclass), hierarchy(FROZEN)
    assert values(ours(4)) == values(theirs(4)) == {"a": 5, "d": 4}


def test_a_plain_dataclass_listed_before_the_pytree_base_is_refused_when_undecorated() -> None:
    @dataclasses.dataclass(frozen=True)
    class Empty:
        pass

    class Mixed(Empty, Base):
        pass

    with pytest.raises(
        TypeError,
        match=r"Mixed .*'a' \(of Base, which dataclasses does not see: it reads the fields of \S*Empty",
    ):
        Mixed()
    assert jax.tree_util.tree_leaves(jdc.pytree_dataclass(Mixed)(a=2)) == [2]


def test_a_subclass_with_repr_false_prints_as_its_base_like_the_standard_library() -> None:
    def classes(decorate: Decorator, repr_false: Decorator) -> type:
        base = decorate(type("Base", (), {"__annotations__": {"a": int}, "a": 0}))
        return repr_false(type("Quiet", (base,), {"__annotations__": {"h": int}, "h": 2}))

    ours = classes(jdc.pytree_dataclass, jdc.pytree_dataclass(repr=False))
    theirs = classes(FROZEN, dataclasses.dataclass(frozen=True, repr=False))
    assert repr(ours()) == repr(theirs()) == "Quiet(a=0)"
    assert jdc.pformat([ours()]) == "[Quiet(a=0)]"


def test_an_inherited_jax_array_default_is_a_default_of_a_redeclared_field() -> None:
    @jdc.pytree_dataclass
    class Parent:
        x: jax.Array = jnp.zeros(2)

    @jdc.pytree_dataclass
    class Child(Parent):
        x: jax.Array  # no default of its own: the inherited class attribute is one

    assert Child().x is Parent().x


def test_an_initvar_with_init_false_is_refused_naming_it() -> None:
    class Base:
        c = dataclasses.field(default=1, init=False)  # read as the default of `c` below

    with pytest.raises(TypeError, match=r"InitVar 'c' of \S*Derived has init=False"):

        @jdc.pytree_dataclass
        class Derived(Base):
            c: dataclasses.InitVar[int]

            def __post_init__(self, c: int) -> None:
                pass


@pytest.mark.parametrize("slots", [True, False])
def test_a_base_field_redeclared_as_initvar_may_still_be_set_by_the_bases_init(
    slots: bool,
) -> None:
    """The base's own `__init__` assigns a field that the subclass made an `InitVar`: the
    standard library's frozen dataclass accepts it (through `object.__setattr__`), so do we;
    it is not a field of the subclass, so not part of its pytree."""

    def build(decorate: Callable[..., Any], assign: Callable[[object, str, object], None]) -> Any:
        @decorate(slots=slots)
        class Base:
            a: int = 100
            b: int = 101

            def __init__(self, a: int = 102, b: int = 103) -> None:
                assign(self, "a", a)
                assign(self, "b", b)

        @decorate
        class Sub(Base):
            a: dataclasses.InitVar[int]  # type: ignore[assignment]

            def __init__(self, **kwargs: int) -> None:
                super().__init__(**kwargs)

        return Sub(a=1, b=2)

    ours = build(jdc.pytree_dataclass, setattr)
    std = build(lambda *a, **k: dataclasses.dataclass(*a, frozen=True, **k), object.__setattr__)
    assert (ours.a, ours.b) == (std.a, std.b) == (1, 2)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(std)]
    assert jax.tree.leaves(ours) == [2]


def test_numpy_values_on_classvars_and_initvars_are_accepted_like_the_standard_library() -> None:
    """Only fields get the mutable-default check (ours names the field; see the next test)."""
    import numpy as np

    def build(decorate: Callable[..., Any]) -> Any:
        @decorate
        class Weighted:
            WEIGHTS: typing.ClassVar[np.ndarray] = np.array([1.0, 2.0])
            x: jax.Array
            scale: dataclasses.InitVar[np.ndarray] = np.array(3.0)  # type: ignore[assignment]

            def __post_init__(self, scale: np.ndarray) -> None:
                object.__setattr__(self, "x", self.x * scale)

        return Weighted

    ours = build(jdc.pytree_dataclass)
    std = build(functools.partial(dataclasses.dataclass, frozen=True))
    assert ours(jnp.ones(2)).x.tolist() == std(jnp.ones(2)).x.tolist() == [3.0, 3.0]
    assert ours.WEIGHTS.tolist() == [1.0, 2.0]
    assert jax.tree.leaves(ours(jnp.ones(1)))[0].tolist() == [3.0]


def test_a_numpy_field_default_is_still_refused_naming_the_field() -> None:
    import numpy as np

    with pytest.raises(ValueError, match=r"field 'w' of \S*Model has a NumPy array"):

        @jdc.pytree_dataclass
        class Model:
            w: np.ndarray = np.zeros(2)


def test_the_derived_field_warning_for_a_static_field_says_it_is_static() -> None:
    @jdc.pytree_dataclass
    class Derived:
        n: int
        double: jdc.Static[int] = jdc.field(init=False)

        def __post_init__(self) -> None:
            self.double = 2 * self.n

    with pytest.warns(jdc.DerivedFieldWarning) as caught:
        Derived(1)
    message = str(caught[0].message)
    assert "field 'double' of" in message and "Derived" in message
    assert "it is static" in message and "a leaf" not in message
