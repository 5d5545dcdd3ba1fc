"""equinox's `__check_init__` (issue 39, item 4): a class migrated from `eqx.Module`, or a user's
subclass of a library base, keeps validating. As equinox runs them: after `__init__` (and
`__post_init__`), every `__check_init__` that the instance's class and its bases define, the
class's own first, on the frozen instance; when an instance is constructed inside `jit`,
`vmap` or `grad` (on tracers), and never when JAX rebuilds one (unflatten), nor in
`copy_and_mutate` (as `eqx.tree_at`). The oracle builds the same generated hierarchies with
equinox and compares what each check saw, in order, and what was raised."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typing_extensions import dataclass_transform

import jax_dataclasses as jdc

Log = list[tuple[str, tuple[tuple[int, ...], ...]]]


@dataclass_transform(field_specifiers=(jdc.field,))
@jdc.pytree_dataclass
class Library:
    """A library's base: its users' subclasses are pytree dataclasses without a decorator."""


def checking(name: str, log: Log, fields: tuple[str, ...], vector: str | None) -> Any:
    """A `__check_init__` that logs its class and the shapes it sees, and refuses a `vector`
    field that is not a vector."""

    def __check_init__(self: Any) -> None:
        log.append((name, tuple(jnp.shape(getattr(self, f)) for f in fields)))
        if vector is not None and jnp.ndim(getattr(self, vector)) != 1:
            raise ValueError(f"{name}: {vector} must be a vector")

    return __check_init__


class TestWhenChecksRun:
    def test_a_decorated_class_checks_after_init_and_post_init(self) -> None:
        log: Log = []

        @jdc.pytree_dataclass
        class Dense:
            w: jax.Array
            b: jax.Array

            def __post_init__(self) -> None:
                log.append(("post_init", ()))

            __check_init__ = checking("Dense", log, ("w", "b"), "b")

        Dense(jnp.ones((3, 2)), jnp.ones(2))
        assert log == [("post_init", ()), ("Dense", ((3, 2), (2,)))]
        with pytest.raises(ValueError, match="Dense: b must be a vector"):
            Dense(jnp.ones((3, 2)), jnp.ones(()))

    def test_subclasses_three_levels_below_a_library_base_run_every_check_own_first(
        self,
    ) -> None:
        log: Log = []

        class Kernel(Library):
            scale: jax.Array
            __check_init__ = checking("Kernel", log, ("scale",), None)

        class Stationary(Kernel):
            lengthscale: jax.Array
            __check_init__ = checking("Stationary", log, ("lengthscale",), "lengthscale")

        class RBF(Stationary):  # Adopted: no new field, its own check.
            __check_init__ = checking("RBF", log, (), None)

        class Scaled(RBF):  # Its own `__init__`, calling the generated one.
            gain: jax.Array

            def __init__(self, gain: jax.Array) -> None:
                super().__init__(jnp.ones(()), jnp.ones(2))
                self.gain = gain

            __check_init__ = checking("Scaled", log, ("gain",), "gain")

        Scaled(jnp.ones(3))
        assert [name for name, _ in log] == ["Scaled", "RBF", "Stationary", "Kernel"]
        log.clear()
        RBF(jnp.ones(()), jnp.ones(2))
        assert [name for name, _ in log] == ["RBF", "Stationary", "Kernel"]
        with pytest.raises(ValueError, match="Stationary: lengthscale must be a vector"):
            RBF(jnp.ones(()), jnp.ones(()))  # The base's check, with no `super()` call.
        with pytest.raises(ValueError, match="Scaled: gain must be a vector"):
            Scaled(jnp.ones(()))

    def test_an_undecorated_subclass_checks_below_a_base_without_checks(self) -> None:
        """It runs its base's generated `__init__`, which the base built without checks."""
        log: Log = []

        @jdc.pytree_dataclass
        class Plain:
            b: jax.Array

        class Checked(Plain):  # Adopted: no new field.
            __check_init__ = checking("Checked", log, ("b",), "b")

        Plain(jnp.ones(()))
        assert log == []
        with pytest.raises(ValueError, match="Checked: b must be a vector"):
            Checked(jnp.ones(()))

    def test_an_undecorated_subclass_of_a_checked_base_runs_every_check_once(self) -> None:
        log: Log = []

        @jdc.pytree_dataclass
        class Checked:
            b: jax.Array
            __check_init__ = checking("Checked", log, ("b",), None)

        class Also(Checked):  # Adopted: no new field; the base's `__init__` runs both.
            __check_init__ = checking("Also", log, ("b",), "b")

        with pytest.raises(ValueError, match="Also: b must be a vector"):
            Also(jnp.ones(()))
        Also(jnp.ones(2))
        assert log == [("Also", ((),)), ("Also", ((2,),)), ("Checked", ((2,),))]

    def test_a_check_added_above_the_decorator_of_a_pending_class_runs(self) -> None:
        """A class whose annotations wait for a name is compiled again at its first use,
        with the check a decorator above ours added by then."""
        namespace: dict[str, Any] = {"jdc": jdc, "jax": jax, "checked": None}
        log: Log = []

        def checked(cls: Any) -> Any:
            cls.__check_init__ = checking(cls.__name__, log, ("b",), "b")
            return cls

        namespace["checked"] = checked
        exec(
            "from __future__ import annotations\n"
            "@checked\n@jdc.pytree_dataclass\nclass Waiting:\n"
            "    b: jax.Array\n    later: Later = None\n"
            "class Later:\n    pass\n",
            namespace,
        )
        with pytest.raises(ValueError, match="Waiting: b must be a vector"):
            namespace["Waiting"](jnp.ones(()))

    def test_constructing_inside_transformations_checks_tracers_rebuilding_does_not(
        self,
    ) -> None:
        log: Log = []

        class Affine(Library):
            w: jax.Array
            b: jax.Array
            __check_init__ = checking("Affine", log, ("w", "b"), "b")

        def build(w: jax.Array, b: jax.Array) -> Affine:
            return Affine(w, b)

        affine = jax.jit(build)(jnp.ones(()), jnp.ones(2))  # Traced once; the output rebuilt.
        assert log == [("Affine", ((), (2,)))]
        log.clear()
        jax.vmap(build)(jnp.ones(4), jnp.ones((4, 2)))  # Each example's shapes.
        jax.grad(lambda w: build(w, jnp.ones(2)).b.sum() * w)(1.0)
        assert log == [("Affine", ((), (2,)))] * 2
        log.clear()
        doubled = jax.tree.map(lambda x: 2 * x, affine)  # Unflatten runs no check...
        jax.jit(lambda a: a)(affine)
        with jdc.copy_and_mutate(doubled) as copy:  # ...nor does copy_and_mutate.
            copy.b = jnp.zeros(2)
        assert log == []
        jdc.replace(affine, b=jnp.zeros(2))  # `replace` constructs: it checks.
        assert log == [("Affine", ((), (2,)))]
        with pytest.raises(ValueError, match="Affine: b must be a vector"):
            jax.jit(build)(jnp.ones(()), jnp.ones(()))

    def test_a_check_sees_a_frozen_instance(self) -> None:
        class Fixing(Library):
            b: jax.Array

            def __check_init__(self) -> None:
                self.b = jnp.atleast_1d(self.b)

        with pytest.raises(dataclasses.FrozenInstanceError, match=r"field 'b' of .*Fixing"):
            Fixing(jnp.ones(()))


# -- the oracle: equinox runs the same hierarchies ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class Level:
    fields: int  # How many fields it adds (0: an adopted class where that can be).
    checks: bool  # Whether it defines `__check_init__`.
    vector: int | None  # The field (of all so far) its check wants a vector; None: any.
    own_init: str | None  # "sets" every field; "super" calls its base's for the base's fields.
    decorated: bool  # Explicitly decorated (else built below `Library`, or adopted).


@st.composite
def hierarchies(draw: st.DrawFn) -> list[Level]:
    levels: list[Level] = []
    total, own_above = 0, False
    for _ in range(draw(st.integers(1, 3))):
        fields = draw(st.integers(0 if levels else 1, 2))
        total += fields
        # Below an own `__init__`, equinox gives a class with new fields no `__init__` of its
        # own (the standard library, and we, generate one): give it its own then.
        kinds = ["sets", "super"] if levels else ["sets"]
        if not (own_above and fields > 0):
            kinds.append(None)
        own_init = draw(st.sampled_from(kinds))
        own_above = own_above or own_init is not None
        checks = draw(st.booleans())
        vector = draw(st.one_of(st.none(), st.integers(0, total - 1))) if checks else None
        levels.append(Level(fields, checks, vector, own_init, draw(st.booleans())))
    return levels


def own_init(names: tuple[str, ...], base: type | None, inherited: int) -> Callable[..., None]:
    """Sets the fields `names`; with `base`, first calls its `__init__` for the `inherited`
    first ones."""

    def __init__(self: Any, *values: Any) -> None:
        if base is not None:
            base.__init__(self, *values[:inherited])
        for name, value in zip(names, values, strict=True):
            if base is None or name not in names[:inherited]:
                setattr(self, name, value)

    return __init__


def build(levels: list[Level], base: type, decorate: Callable[[type], type], log: Log) -> type:
    """The hierarchy: level i adds fields `f{i}_{j}`, each a child."""
    cls, names = base, ()
    for i, level in enumerate(levels):
        new = tuple(f"f{i}_{j}" for j in range(level.fields))
        inherited, names = len(names), (*names, *new)
        namespace: dict[str, Any] = {"__annotations__": dict.fromkeys(new, "jax.Array")}
        if level.checks:
            vector = None if level.vector is None else names[level.vector]
            namespace["__check_init__"] = checking(f"L{i}", log, names, vector)
        if level.own_init is not None:
            parent = cls if level.own_init == "super" else None
            namespace["__init__"] = own_init(names, parent, inherited)
        cls = type(f"L{i}", (cls,), namespace)
        if level.decorated:
            cls = decorate(cls)
    return cls


CONTEXTS: dict[str, Callable[[type, list[jax.Array]], object]] = {
    "plain": lambda cls, values: cls(*values),
    "jit": lambda cls, values: jax.jit(lambda *v: cls(*v))(*values),
    "vmap": lambda cls, values: jax.vmap(lambda *v: cls(*v))(*[jnp.stack([v, v]) for v in values]),
    "grad": lambda cls, values: jax.grad(
        lambda *v: sum(jnp.sum(leaf) for leaf in jax.tree.leaves(cls(*v)))
    )(*values),
    "unflatten": lambda cls, values: jax.tree.map(lambda v: v + 1, cls(*values)),
}


def outcome(cls: type, context: str, values: list[jax.Array], log: Log) -> tuple[Log, str]:
    log.clear()
    try:
        CONTEXTS[context](cls, values)
    except ValueError as error:
        return list(log), str(error)
    return list(log), ""


ADOPTED_CHECKS = [Level(1, False, None, None, True), Level(0, True, 0, None, False)]


@pytest.mark.skipif(
    importlib.util.find_spec("equinox") is None, reason="the oracle needs equinox (dev extra)"
)
@settings(max_examples=100, deadline=None)
@example(levels=ADOPTED_CHECKS, vectors=[False] * 6, context="plain", automatic=False)
@given(
    levels=hierarchies(),
    vectors=st.lists(st.booleans(), min_size=6, max_size=6),
    context=st.sampled_from(sorted(CONTEXTS)),
    automatic=st.booleans(),
)
def test_checks_run_as_equinox_runs_them(
    levels: list[Level], vectors: list[bool], context: str, automatic: bool
) -> None:
    import equinox as eqx

    ours: Log = []
    theirs: Log = []
    if not automatic:  # Every class decorated, or adopted where it adds no field.
        levels = [dataclasses.replace(lv, decorated=lv.decorated or lv.fields > 0) for lv in levels]
    base = Library if automatic else object
    jdc_cls = build(levels, base, jdc.pytree_dataclass, ours)
    eqx_cls = build(levels, eqx.Module, lambda cls: cls, theirs)
    count = sum(level.fields for level in levels)
    values = [jnp.ones(2) if vector else jnp.ones(()) for vector in vectors[:count]]
    assert outcome(jdc_cls, context, values, ours) == outcome(eqx_cls, context, values, theirs)
