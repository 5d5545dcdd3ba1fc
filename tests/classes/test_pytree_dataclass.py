"""The decorator: dataclass options, frozen instances, registration, subclasses, defaults."""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import inspect
import pickle
import sys
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import Layer, Model, Slotted, leaves_equal_fields, make_model

import jax_dataclasses as jdc

# -- dataclass options ------------------------------------------------------------------------


def test_bare_and_called_forms_give_dataclasses() -> None:
    assert dataclasses.is_dataclass(Layer) and jdc.is_dataclass(Model)
    assert [f.name for f in jdc.fields(Layer)] == ["w", "b", "activation"]
    assert str(inspect.signature(Layer)) == (
        "(w: 'jax.Array', b: 'jax.Array', activation: 'jdc.Static[str]' = 'tanh') -> None"
    )


def test_all_dataclass_options_are_accepted() -> None:
    @jdc.pytree_dataclass(
        init=True,
        repr=False,
        eq=True,
        order=True,
        unsafe_hash=False,
        frozen=True,
        match_args=True,
        kw_only=True,
        slots=True,
        weakref_slot=True,
    )
    class Options:
        a: int
        b: jdc.Static[int] = 0

    first, second = Options(a=1), Options(a=2)
    assert first < second
    assert "Options(" not in repr(first)
    assert Options.__match_args__ == ()  # kw_only fields are not positional patterns
    assert hasattr(Options, "__weakref__")
    with pytest.raises(TypeError):
        Options(1)  # type: ignore[misc]


def test_the_options_are_those_of_dataclasses_on_this_python() -> None:
    """Every keyword of `dataclasses.dataclass`, with its default (but frozen), and nothing else:
    a keyword a new Python adds shows up here (and in help(), from the same table)."""
    standard = inspect.signature(dataclasses.dataclass).parameters
    ours = inspect.signature(jdc.pytree_dataclass).parameters
    expected = {n: p.default for n, p in standard.items()} | {"frozen": True}
    assert {n: p.default for n, p in ours.items()} == expected
    with pytest.raises(TypeError, match="unexpected keyword argument 'slot'"):
        jdc.pytree_dataclass(slot=True)  # type: ignore[call-overload]


def test_eq_hash_and_match_follow_a_frozen_dataclass() -> None:
    @jdc.pytree_dataclass
    class Config:
        depth: jdc.Static[int]
        width: int

    assert Config(1, 2) == Config(1, 2)
    assert hash(Config(1, 2)) == hash(Config(1, 2))  # usable as a jit static argument
    match Config(3, 4):
        case Config(depth, width):
            assert (depth, width) == (3, 4)

    @jdc.pytree_dataclass(eq=False)
    class Identity:
        x: int

    one = Identity(1)
    assert one != Identity(1) and hash(one) == object.__hash__(one)


def test_frozen_false_is_refused() -> None:
    with pytest.raises(TypeError, match=r"frozen=False.*always frozen"):
        jdc.pytree_dataclass(frozen=False)  # type: ignore[call-overload]


@pytest.mark.parametrize("target", [lambda: 1, 3, "Layer"])
def test_decorating_a_non_class_is_refused(target: object) -> None:
    with pytest.raises(TypeError, match=r"decorates classes, got"):
        jdc.pytree_dataclass(target)  # type: ignore[call-overload]


def test_own_setattr_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Own defines __setattr__"):

        @jdc.pytree_dataclass
        class Own:
            x: int

            def __setattr__(self, name: str, value: object) -> None: ...


# -- frozen instances -------------------------------------------------------------------------


@pytest.mark.parametrize("obj", [Layer(jnp.ones(1), jnp.ones(1)), Slotted(1.0)])
def test_assignment_and_deletion_are_refused(obj: Any) -> None:
    cls = type(obj).__qualname__
    field = jdc.fields(obj)[0].name
    with pytest.raises(
        dataclasses.FrozenInstanceError, match=rf"assign to field '{field}' of {cls}"
    ):
        setattr(obj, field, 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError, match=rf"delete field '{field}' of {cls}"):
        delattr(obj, field)


def test_custom_init_may_assign_and_keeps_fields_consistent() -> None:
    @jdc.pytree_dataclass
    class Derived:
        a: jax.Array
        b: jax.Array
        scale: jdc.Static[float]

        def __init__(self, x: jax.Array, scale: float = 2.0) -> None:
            self.a = x * scale
            object.__setattr__(self, "b", x + 1)  # the jax_dataclasses 1.6 spelling
            self.scale = scale

    derived = Derived(jnp.ones(2))
    assert jax.tree_util.tree_leaves(derived) == [derived.a, derived.b]
    with pytest.raises(dataclasses.FrozenInstanceError):
        derived.a = jnp.zeros(2)  # type: ignore[misc]
    doubled = jax.jit(lambda d: jax.tree.map(lambda v: v * 2, d))(derived)
    assert isinstance(doubled, Derived) and doubled.scale == 2.0
    assert jnp.array_equal(doubled.a, jnp.full(2, 4.0))
    grads = jax.grad(lambda d: jnp.sum(d.a * d.b))(derived)
    assert jnp.array_equal(grads.a, derived.b) and jnp.array_equal(grads.b, derived.a)
    batched = jax.vmap(lambda d: d.a + d.b)(Derived(jnp.ones((3, 2))))
    assert batched.shape == (3, 2)


def test_custom_init_that_misses_a_field_is_reported() -> None:
    @jdc.pytree_dataclass
    class Forgetful:
        a: int
        b: int

        def __init__(self) -> None:
            self.a = 1

    with pytest.raises(TypeError, match=r"Forgetful.__init__ did not set field 'b'"):
        Forgetful()


def test_init_false_without_default_must_be_set() -> None:
    @jdc.pytree_dataclass
    class Unset:  # Definable: a subclass's __post_init__ may set it.
        n: int = dataclasses.field(init=False)

    with pytest.raises(TypeError, match=r"field 'n' of \S*Unset has init=False and no default"):
        Unset()

    @jdc.pytree_dataclass
    class Completed(Unset):
        def __post_init__(self) -> None:
            object.__setattr__(self, "n", 1)

    assert Completed().n == 1

    @jdc.pytree_dataclass
    class SetInPostInit:
        x: jax.Array
        n: jdc.Static[int] = dataclasses.field(init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "n", int(self.x.shape[0]))

    obj = SetInPostInit(jnp.ones(4))
    assert obj.n == 4
    assert jax.tree_util.tree_structure(obj) == jax.tree_util.tree_structure(SetInPostInit(obj.x))


# -- registration and the unflatten rule ------------------------------------------------------


def test_key_paths_name_the_fields() -> None:
    paths = [
        jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(make_model())[0]
    ]
    assert paths == [".layers[0].w", ".layers[0].b", ".layers[1].w", ".layers[1].b"]
    mapped = jax.tree_util.tree_map_with_path(lambda p, _: jax.tree_util.keystr(p), make_model())
    assert mapped.layers[1].b == ".layers[1].b"


def test_unflatten_never_runs_init_or_post_init() -> None:
    calls: list[str] = []

    @jdc.pytree_dataclass
    class Strict:
        x: Any

        def __post_init__(self) -> None:
            calls.append("post_init")
            if not isinstance(self.x, jax.Array):
                raise TypeError("x must be an array")

    strict = Strict(jnp.ones(2))
    calls.clear()
    treedef = jax.tree_util.tree_structure(strict)
    placeholder = object()
    rebuilt = jax.tree_util.tree_unflatten(treedef, [placeholder])
    assert rebuilt.x is placeholder and type(rebuilt) is Strict
    jax.vmap(lambda s: s)(jax.tree.map(lambda v: jnp.stack([v, v]), strict))
    jax.jacfwd(lambda s: s.x)(strict)
    assert calls == []


def test_flatten_sees_fields_of_objects_built_without_init() -> None:
    layer = object.__new__(Layer)
    for name, value in (("w", jnp.ones(1)), ("b", jnp.zeros(1)), ("activation", "relu")):
        object.__setattr__(layer, name, value)
    leaves, treedef = jax.tree_util.tree_flatten(layer)
    assert [float(v[0]) for v in leaves] == [1.0, 0.0]
    assert jax.tree_util.tree_unflatten(treedef, leaves).activation == "relu"


def test_slots_class_flattens_and_unflattens() -> None:
    obj = Slotted(jnp.ones(2), tag=3)
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    rebuilt = jax.tree_util.tree_unflatten(treedef, [leaves[0] * 2])
    assert type(rebuilt) is Slotted and rebuilt.tag == 3
    assert jnp.array_equal(rebuilt.x, jnp.full(2, 2.0))


def test_pickle_and_copy_round_trip() -> None:
    for obj in (Layer(np.ones(2), np.zeros(2), "relu"), Slotted(np.ones(1), tag=2)):
        for clone in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
            assert type(clone) is type(obj)
            assert jax.tree_util.tree_structure(clone) == jax.tree_util.tree_structure(obj)
            for a, b in zip(
                jax.tree_util.tree_leaves(clone), jax.tree_util.tree_leaves(obj), strict=True
            ):
                np.testing.assert_array_equal(a, b)
    deep = copy.deepcopy(make_model())
    assert jax.tree_util.tree_leaves(deep)[0] is deep.layers[0].w


# -- subclasses -------------------------------------------------------------------------------


def test_undecorated_subclass_without_new_fields_is_still_a_pytree() -> None:
    class Named(Layer):
        def describe(self) -> str:
            return f"{self.activation} layer"

    named = Named(jnp.ones(1), jnp.zeros(1))
    leaves, treedef = jax.tree_util.tree_flatten(named)
    assert len(leaves) == 2
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert type(rebuilt) is Named and rebuilt.describe() == "tanh layer"


def test_undecorated_subclass_with_new_fields_is_refused() -> None:
    class Extended(Layer):
        extra: int = 0

    with pytest.raises(
        TypeError, match=r"Extended subclasses a pytree dataclass and declares fields 'extra'"
    ):
        Extended(jnp.ones(1), jnp.zeros(1))


def test_decorated_subclass_adds_fields_and_keeps_its_own_init() -> None:
    @jdc.pytree_dataclass
    class Child(Layer):
        gain: jax.Array = dataclasses.field(default_factory=lambda: jnp.ones(()))

    @jdc.pytree_dataclass
    class Same(Layer):
        def __init__(self, w: jax.Array) -> None:
            super().__init__(w, -w)

    child = Child(jnp.ones(1), jnp.zeros(1))
    assert len(jax.tree_util.tree_leaves(child)) == 3
    same = Same(jnp.ones(1))
    assert jnp.array_equal(jax.tree_util.tree_leaves(same)[1], -jnp.ones(1))


def test_undecorated_subclass_that_narrows_an_inherited_field_is_adopted() -> None:
    class Narrowed(Layer):
        w: jax.Array  # re-annotated, not a new field

    narrowed = Narrowed(jnp.ones(1), jnp.zeros(1))
    assert jax.tree_util.tree_structure(narrowed).num_leaves == 2
    assert type(jax.tree_util.tree_map(lambda x: x, narrowed)) is Narrowed


@pytest.mark.parametrize("assign", ["self", "object.__setattr__"])
def test_undecorated_subclass_with_new_fields_and_its_own_init_is_refused(assign: str) -> None:
    class Extended(Layer):
        extra: int = 0

        def __init__(self, w: jax.Array, extra: int) -> None:
            if assign == "self":
                self.extra = extra
            else:
                object.__setattr__(self, "extra", extra)
            super().__init__(w, w)

    with pytest.raises(TypeError, match=r"Extended .*declares fields 'extra' but is not decorated"):
        Extended(jnp.ones(1), 1)

    decorated = jdc.pytree_dataclass(Extended)  # decorating it later keeps its own __init__
    assert jax.tree_util.tree_leaves(decorated(jnp.ones(1), 3))[-1] == 3


def test_decorated_subclass_may_redeclare_inherited_fields() -> None:
    @jdc.pytree_dataclass
    class Base:
        x: int
        y: int = 0
        z: int = 0

    @jdc.pytree_dataclass
    class Computed(Base):  # adopted by Base's __init_subclass__ first, then decorated
        y: int = dataclasses.field(init=False, default=5)

    @jdc.pytree_dataclass
    class MadeStatic(Base):
        y: jdc.Static[int] = 0

    @jdc.pytree_dataclass
    class TakesInitVar(Base):
        z: dataclasses.InitVar[int] = 0  # type: ignore[assignment]

        def __post_init__(self, z: int) -> None:
            self.y = z * 2

    for obj, leaves in [
        (Computed(1), [1, 5, 0]),
        (MadeStatic(1, 2), [1, 0]),
        (TakesInitVar(1, z=4), [1, 8]),
    ]:
        flat, treedef = jax.tree_util.tree_flatten(obj)
        assert flat == leaves, type(obj)
        rebuilt = jax.tree_util.tree_unflatten(treedef, flat)
        assert type(rebuilt) is type(obj) and jdc.astuple(rebuilt) == jdc.astuple(obj)
        assert jax.jit(lambda o: o)(obj) == obj
    assert jax.tree_util.tree_structure(MadeStatic(1, 2)) != jax.tree_util.tree_structure(
        MadeStatic(1, 3)
    )


def test_unflatten_runs_no_init_a_metaclass_or_later_decorator_added() -> None:
    calls: list[str] = []

    class Meta(type):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            calls.append("metaclass")
            return super().__call__(*args, **kwargs)

    class Mixin(metaclass=Meta):
        pass

    @jdc.pytree_dataclass
    class WithMeta(Mixin):
        x: Any

    @jdc.pytree_dataclass
    class Replaced:
        x: Any

    generated = Replaced.__init__

    def checked(self: Replaced, x: Any) -> None:
        calls.append("replaced")
        generated(self, x)

    Replaced.__init__ = checked  # type: ignore[method-assign]  # as a class decorator would

    objects = [WithMeta(1.0), Replaced(1.0)]
    calls.clear()
    treedef = jax.tree_util.tree_structure(objects)
    rebuilt = jax.tree_util.tree_unflatten(treedef, [object(), object()])
    assert calls == [] and [type(o) for o in rebuilt] == [WithMeta, Replaced]
    jax.vmap(lambda objs: objs)(jax.tree_util.tree_map(lambda _: jnp.ones(3), objects))
    assert calls == []


def test_a_field_named_self_that_init_does_not_take() -> None:
    @jdc.pytree_dataclass
    class Odd:
        x: int
        self: int = dataclasses.field(init=False, default=0)

    odd = Odd(1)
    assert (odd.x, odd.self) == (1, 0)
    assert jax.tree_util.tree_leaves(odd) == [1, 0]


def test_slots_subclass_of_a_mutable_plain_dataclass_pickles_and_copies() -> None:
    @dataclasses.dataclass
    class PlainMutable:
        a: int

    @jdc.pytree_dataclass(slots=True)
    class Slots(PlainMutable):
        b: int

    obj = Slots(1, 2)
    for duplicate in (copy.copy, copy.deepcopy):
        assert (duplicate(obj).a, duplicate(obj).b) == (1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.b = 3  # type: ignore[misc]


def test_non_slots_subclass_of_a_slots_class_keeps_init_false_defaults() -> None:
    @jdc.pytree_dataclass(slots=True)
    class Base:
        x: float
        k: float = dataclasses.field(init=False, default=1.0)

    @jdc.pytree_dataclass
    class Sub(Base):
        y: float = 0.0

    assert jax.tree_util.tree_leaves(Sub(2.0)) == [2.0, 1.0, 0.0]


def test_plain_slots_dataclass_subclass_is_still_a_pytree() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Plain(Layer):
        pass

    plain = Plain(jnp.ones(1), jnp.zeros(1))
    assert jax.tree_util.tree_structure(plain).num_leaves == 2
    assert type(jax.tree_util.tree_map(lambda x: x, plain)) is Plain


def test_module_level_names_do_not_reach_generated_code() -> None:
    module = types.ModuleType("shadowing")
    sys.modules[module.__name__] = module
    try:
        exec(
            "import jax_dataclasses as jdc\n"
            "def zip(*args): raise AssertionError('module zip')\n"
            "def tuple(*args): raise AssertionError('module tuple')\n"
            "type = None\n"
            "object = None\n"
            "@jdc.pytree_dataclass\n"
            "class P:\n"
            "    a: float\n"
            "    b: float = 2.0\n",
            module.__dict__,
        )
        obj = module.P(1.0)
        keyed, treedef = jax.tree_util.tree_flatten_with_path(obj)
        assert [(path[0].name, leaf) for path, leaf in keyed] == [("a", 1.0), ("b", 2.0)]
        assert jax.tree_util.tree_unflatten(treedef, [3.0, 4.0]).b == 4.0
    finally:
        del sys.modules[module.__name__]


def test_decorated_subclass_of_a_mixin_with_init_gets_the_generated_init() -> None:
    class Mixin:
        def __init__(self, *args: Any) -> None:
            raise AssertionError("dataclasses would generate __init__ over the mixin's")

    @jdc.pytree_dataclass
    class Both(Mixin, Layer):  # adopted first (no new fields), then decorated
        pass

    assert list(inspect.signature(Both).parameters) == ["w", "b", "activation"]
    assert jax.tree_util.tree_leaves(Both(jnp.ones(1), jnp.zeros(1)))[0] == 1.0


def test_subclass_keeps_a_user_init_subclass_hook() -> None:
    seen: list[str] = []

    @jdc.pytree_dataclass
    class Base:
        x: int

        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            seen.append(cls.__name__)

    class Sub(Base):
        pass

    assert seen == ["Sub"]
    assert jax.tree_util.tree_leaves(Sub(1)) == [1]


# -- defaults and aliases ---------------------------------------------------------------------


def test_jax_array_defaults_are_shared_and_numpy_defaults_refused() -> None:
    default = jnp.zeros(3)

    @jdc.pytree_dataclass
    class WithDefault:
        x: jax.Array = default
        y: jax.Array = dataclasses.field(default=jnp.ones(2))

    assert WithDefault().x is default and WithDefault().x is WithDefault().x
    assert jdc.fields(WithDefault)[0].default is default
    with pytest.raises(
        ValueError, match=r"field 'z' of \S*NumpyDefault has a NumPy array as its default"
    ):

        @jdc.pytree_dataclass
        class NumpyDefault:
            z: np.ndarray = np.zeros(2)


def test_aliases_are_the_standard_library_functions() -> None:
    assert jdc.field is dataclasses.field and jdc.fields is dataclasses.fields
    assert jdc.replace is dataclasses.replace and jdc.asdict is dataclasses.asdict
    assert jdc.astuple is dataclasses.astuple and jdc.is_dataclass is dataclasses.is_dataclass
    layer = Layer(1.0, 2.0)  # type: ignore[arg-type]
    replaced = jdc.replace(layer, activation="relu")
    assert replaced.activation == "relu" and layer.activation == "tanh"
    assert jdc.asdict(layer) == {"w": 1.0, "b": 2.0, "activation": "tanh"}
    assert jdc.astuple(layer) == (1.0, 2.0, "tanh")


# -- construction through inheritance chains --------------------------------------------------


def test_undecorated_subclass_with_its_own_init() -> None:
    class Scaled(Layer):
        def __init__(self, w: jax.Array) -> None:
            super().__init__(w, jnp.zeros(1))
            object.__setattr__(self, "w", w * 10)  # after the parent's __init__ ran

    class Assigning(Layer):
        def __init__(self, w: jax.Array) -> None:
            self.w, self.b, self.activation = w, -w, "relu"

    scaled = Scaled(jnp.ones(1))
    leaves_equal_fields(scaled)
    assert float(jax.tree_util.tree_leaves(scaled)[0][0]) == 10.0
    assigning = Assigning(jnp.ones(1))
    leaves_equal_fields(assigning)
    assert jax.tree_util.tree_structure(assigning) == jax.tree_util.tree_structure(
        Assigning(jnp.zeros(1))
    )


def test_init_false_subclass_inherits_the_parent_init() -> None:
    @jdc.pytree_dataclass
    class Parent:
        x: jax.Array

    @jdc.pytree_dataclass(init=False)
    class Child(Parent):
        y: jax.Array = jnp.zeros(2)

    child = Child(jnp.ones(2))  # type: ignore[call-arg]
    leaves_equal_fields(child)
    grads = jax.grad(lambda c: jnp.sum(c.y))(child)
    assert isinstance(grads, Child) and jnp.array_equal(grads.y, jnp.ones(2))


@pytest.mark.parametrize("parent_has_post_init", [False, True])
@pytest.mark.parametrize("child_sets_first", [False, True])
def test_custom_init_chains_through_super(
    parent_has_post_init: bool, child_sets_first: bool
) -> None:
    post_inits: list[str] = []

    @jdc.pytree_dataclass
    class Base:
        a: jax.Array

        if parent_has_post_init:

            def __post_init__(self) -> None:
                post_inits.append("base")

    @jdc.pytree_dataclass
    class Child(Base):
        b: jax.Array
        tag: jdc.Static[str] = "t"

        def __init__(self, n: int) -> None:
            if child_sets_first:
                self.b = jnp.ones(n)
                super().__init__(jnp.zeros(n))
            else:
                super().__init__(jnp.zeros(n))
                self.b = jnp.ones(n)
            self.tag = "child"

    child = Child(2)
    assert child.tag == "child" and jnp.array_equal(child.b, jnp.ones(2))
    leaves_equal_fields(child)
    assert post_inits == (["base"] if parent_has_post_init else [])


def test_custom_init_chain_of_two_custom_inits() -> None:
    @jdc.pytree_dataclass
    class Base:
        w: jax.Array

        def __init__(self, n: int) -> None:
            self.w = jnp.zeros(n)

    @jdc.pytree_dataclass
    class Child(Base):
        b: jax.Array

        def __init__(self, n: int) -> None:
            super().__init__(n)
            self.b = jnp.ones(n)

    child = Child(3)
    leaves_equal_fields(child)
    assert len(jax.tree_util.tree_leaves(jax.jit(lambda c: c)(child))) == 2


def test_custom_init_may_not_set_non_fields() -> None:
    @jdc.pytree_dataclass
    class Cached:
        w: jax.Array

        def __init__(self, n: int) -> None:
            self.w = jnp.zeros(n)
            self.n_cached = n

    with pytest.raises(
        dataclasses.FrozenInstanceError, match=r"'n_cached' of \S*Cached: it is not a field"
    ):
        Cached(3)


def test_post_init_may_assign_fields_as_init_may() -> None:
    @jdc.pytree_dataclass
    class Normalised:
        w: jax.Array
        scale: jdc.Static[float] = 1.0
        norm: jax.Array = dataclasses.field(init=False)

        def __post_init__(self) -> None:
            self.norm = jnp.linalg.norm(self.w)
            self.w = self.w / self.norm
            self.scale = float(self.scale) * 2

    obj = Normalised(jnp.array([3.0, 4.0]))
    assert obj.norm == 5.0 and obj.scale == 2.0
    np.testing.assert_allclose(obj.w, [0.6, 0.8])
    leaves_equal_fields(obj)
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"field 'w' of \S*Normalised"):
        obj.w = jnp.zeros(2)  # type: ignore[misc]  # construction is over
    # JAX rebuilds it without running __post_init__ again.
    np.testing.assert_allclose(jax.tree_util.tree_map(lambda x: x, obj).w, [0.6, 0.8])


def test_post_init_may_not_set_non_fields() -> None:
    @jdc.pytree_dataclass
    class Cached:
        w: jax.Array

        def __post_init__(self) -> None:
            self.cache = 1

    with pytest.raises(
        dataclasses.FrozenInstanceError, match=r"'cache' of \S*Cached: it is not a field"
    ) as caught:
        Cached(jnp.ones(1))
    assert "replace" not in str(caught.value)


def test_post_init_static_values_are_checked() -> None:
    @jdc.pytree_dataclass
    class Shaped:
        shape: jdc.Static[tuple[int, ...]]

        def __post_init__(self) -> None:
            self.shape = jnp.asarray(self.shape)  # type: ignore[assignment]

    with pytest.warns(jdc.StaticFieldWarning, match=r"static field 'shape' of \S*Shaped: .*array"):
        Shaped((1, 2))
    with pytest.raises(TypeError, match=r"static field 'shape' of \S*Shaped holds a traced array"):
        jax.jit(lambda n: Shaped((n,)).shape)(2)


def test_field_names_that_shadow_builtins() -> None:
    @jdc.pytree_dataclass
    class Shadowing:
        type: jdc.Static[str] = "relu"
        object: jax.Array | None = None
        len: int = 0

    obj = Shadowing()
    assert obj.type == "relu"
    assert jax.tree_util.tree_leaves(jax.tree.map(lambda v: v + 1, obj)) == [1]


def test_frozen_plain_dataclasses_as_base_and_subclass() -> None:
    @dataclasses.dataclass(frozen=True)
    class FrozenBase:
        x: int

    @jdc.pytree_dataclass
    class Mixed(FrozenBase):
        y: jdc.Static[int] = 0

    mixed = Mixed(1, 2)
    assert jax.tree_util.tree_leaves(mixed) == [1]
    assert Mixed.__dataclass_params__.frozen  # type: ignore[attr-defined]

    @dataclasses.dataclass(frozen=True)
    class PlainChild(Mixed):
        z: int = 3

    with pytest.raises(
        TypeError,
        match=r"PlainChild subclasses the pytree dataclass \S*Mixed and is decorated "
        r"with @dataclasses\.dataclass.*fields 'z'",
    ):
        PlainChild(1)


def test_static_inherited_from_a_plain_base_in_the_same_function() -> None:
    namespace: dict[str, object] = {}
    exec(
        "from __future__ import annotations\n"
        "import dataclasses\n"
        "def build():\n"
        "    import jax_dataclasses as J\n"
        "    @dataclasses.dataclass\n"
        "    class Base:\n"
        "        n: J.Static[int]\n"
        "    @J.pytree_dataclass\n"
        "    class C(Base):\n"
        "        x: int = 0\n"
        "    return C\n",
        namespace,
    )
    built = namespace["build"]()  # type: ignore[operator]
    assert jax.tree_util.tree_leaves(built(3, 1)) == [1]


def test_undecorated_subclass_with_a_plain_mixin_init() -> None:
    class Scaling:
        def __init__(self, *args: Any, scale: float = 1.0, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            object.__setattr__(self, "w", self.w * scale)  # type: ignore[attr-defined]

    class Scaled(Scaling, Layer):
        pass

    scaled = Scaled(jnp.ones(1), jnp.zeros(1), scale=3.0)
    leaves_equal_fields(scaled)
    assert float(jax.tree_util.tree_leaves(scaled)[0][0]) == 3.0


def test_plain_dataclass_base_next_to_a_pytree_base() -> None:
    @dataclasses.dataclass(frozen=True)
    class Plain:
        y: float = 0.0

    @jdc.pytree_dataclass
    class Both(Plain, Layer):
        pass

    both = Both(jnp.ones(1), jnp.zeros(1), "relu", 2.0)
    assert jax.tree_util.tree_leaves(both)[-1] == 2.0
    leaves_equal_fields(both)

    class Undecorated(Plain, Layer):
        pass

    with pytest.raises(
        TypeError, match=r"Undecorated subclasses a pytree dataclass and declares fields 'y'"
    ):
        Undecorated(jnp.ones(1), jnp.zeros(1))


def test_a_base_that_skips_init_subclass_super_gives_a_clear_error() -> None:
    class Plugin:
        def __init_subclass__(cls, **kwargs: Any) -> None:  # no super(): adoption never runs
            pass

    class Unregistered(Plugin, Layer):
        pass

    with pytest.raises(
        TypeError, match=r"Unregistered subclasses a pytree dataclass but was never registered"
    ):
        Unregistered(jnp.ones(1), jnp.zeros(1))


def test_construction_permission_ends_with_construction() -> None:
    contexts: list[contextvars.Context] = []

    @jdc.pytree_dataclass
    class Scheduling:
        x: float

        def __init__(self, x: float) -> None:
            self.x = x
            contexts.append(contextvars.copy_context())  # as a task or callback would

    obj = Scheduling(1.0)

    def later() -> None:
        obj.x = 2.0

    with pytest.raises(dataclasses.FrozenInstanceError, match=r"field 'x' of \S*Scheduling"):
        contexts[0].run(later)
    assert obj.x == 1.0 and jax.tree_util.tree_leaves(obj) == [1.0]


def test_own_pickle_hooks_are_kept() -> None:
    @jdc.pytree_dataclass
    class Versioned:
        x: float
        version: jdc.Static[int] = 1

        def __setstate__(self, state: dict[str, Any]) -> None:  # a migration hook
            object.__setattr__(self, "x", state["x"] * 100)
            object.__setattr__(self, "version", 2)

    @jdc.pytree_dataclass
    class Child(Versioned):
        y: float = 0.0

    for cls in (Versioned, Child):
        restored = copy.deepcopy(cls(1.0))  # through __reduce_ex__, as pickle
        assert restored.version == 2 and restored.x == 100.0
        leaves_equal_fields(restored)
        assert jax.tree_util.tree_structure(restored) == jax.tree_util.tree_structure(cls(0.0, 2))


def test_decorating_twice_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Layer is already a pytree dataclass"):
        jdc.pytree_dataclass(Layer)


def test_field_names_like_the_generated_code_internals() -> None:
    # Only reachable through dynamic class creation: a class body would mangle `__type`.
    annotations = {"__type": float, "__set_dict": float, "__cls": jdc.Static[int], "__ok": float}
    namespace = {"__annotations__": annotations, "__cls": 3, "__ok": 0.5}
    dynamic = jdc.pytree_dataclass(type("Dynamic", (), namespace))
    obj = dynamic(1.0, 2.0)
    assert jax.tree_util.tree_leaves(obj) == [1.0, 2.0, 0.5]
    assert jax.tree_util.tree_structure(obj) != jax.tree_util.tree_structure(dynamic(1.0, 2.0, 4))


def test_a_class_dataclasses_refuses_is_left_as_it_was() -> None:
    array = jnp.zeros(2)
    field = dataclasses.field(default=array)

    class Refused:
        a: jax.Array = array
        b: jax.Array = field
        c: list[int] = []  # noqa: RUF012  # dataclasses refuses a mutable default

    with pytest.raises(ValueError, match="mutable default"):
        jdc.pytree_dataclass(Refused)
    assert Refused.__dict__["a"] is array and field.default is array
    assert Refused.__doc__ is None
