"""What a library moving from equinox (or flax.struct) keeps (issue 34): abstract bases that
refuse instances, users' subclasses that are pytree dataclasses without a decorator (or with
one), `__post_init__` chains as the standard library runs them, and `replace` on a class with
its own `__init__`."""

from __future__ import annotations

import abc
import copy
import dataclasses
import re
import types
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from helpers import children, define, statics
from hypothesis import given, settings
from hypothesis import strategies as st
from typing_extensions import dataclass_transform

import jax_dataclasses as jdc


def refusal(cls: type) -> str:
    with pytest.raises(TypeError) as caught:
        cls()
    return str(caught.value)


class TestAbstractBases:
    def test_an_abstract_method_refuses_instances_as_an_abc_does(self) -> None:
        @jdc.pytree_dataclass
        class Kernel:
            @abc.abstractmethod
            def evaluate(self, x: jax.Array) -> jax.Array: ...

        @jdc.pytree_dataclass
        class AsAbc(abc.ABC):
            @abc.abstractmethod
            def evaluate(self, x: jax.Array) -> jax.Array: ...

        assert refusal(Kernel) == refusal(AsAbc).replace("AsAbc", "Kernel")
        assert "abstract class Kernel" in refusal(Kernel) and "evaluate" in refusal(Kernel)

    def test_subclasses_are_concrete_once_they_implement_every_method(self) -> None:
        @jdc.pytree_dataclass
        class Kernel:
            scale: jax.Array = 1.0

            @abc.abstractmethod
            def evaluate(self, x: jax.Array) -> jax.Array: ...

            @property
            @abc.abstractmethod
            def name(self) -> str: ...

        class Half(Kernel):  # Adopted: no decorator, no new field.
            def evaluate(self, x: jax.Array) -> jax.Array:
                return self.scale * x

        @jdc.pytree_dataclass
        class RBF(Half):
            lengthscale: jax.Array = 2.0

            @property
            def name(self) -> str:
                return "rbf"

        assert re.search(r"abstract class Half .*abstract method '?name'?$", refusal(Half))
        rbf = RBF()
        assert rbf.evaluate(jnp.ones(1)).tolist() == [1.0]
        doubled = jax.tree.map(lambda v: v * 2, rbf)  # Unflatten: never blocked.
        assert (doubled.scale, doubled.lengthscale) == (2.0, 4.0)
        assert copy.deepcopy(rbf) == rbf


@dataclass_transform()
@jdc.pytree_dataclass
class Kernel(abc.ABC):
    """A library's base: its users' subclasses are pytree dataclasses."""

    scale: jax.Array = dataclasses.field(default_factory=lambda: jnp.ones(()))

    def __init_subclass__(cls, *, kw_only: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)

    @abc.abstractmethod
    def evaluate(self, x: jax.Array) -> jax.Array: ...


DECORATED_BELOW_OURS = """
import dataclasses
import functools
from typing_extensions import dataclass_transform
import jax_dataclasses as jdc

@dataclass_transform()
@jdc.pytree_dataclass
class Base:
    a: float = 1.0

def tagged(cls):
    cls.tag = "tagged"
    plain = cls.predict

    @functools.wraps(plain)
    def predict(self):
        return plain(self) * 2

    cls.predict = predict
    return cls

@jdc.pytree_dataclass(kw_only=True)
@tagged
class Sub(Base):
    b: float = dataclasses.field(default_factory=lambda: 2.0)

    def predict(self):
        return self.a
"""


class TestUsersSubclasses:
    def test_a_subclass_without_decorator_is_a_pytree_dataclass(self) -> None:
        class SpectralMixture(Kernel):
            weights: jax.Array = None
            components: jdc.Static[int] = 2

            def evaluate(self, x: jax.Array) -> jax.Array:
                return self.scale * self.weights * x

        mixture = SpectralMixture(weights=jnp.ones(2))
        assert children(SpectralMixture) == ("scale", "weights")
        assert statics(SpectralMixture) == ("components",)
        assert dataclasses.is_dataclass(mixture) and mixture.components == 2
        step = jax.jit(lambda k: k.evaluate(jnp.ones(2)))
        assert step(mixture).tolist() == [1.0, 1.0]
        with pytest.raises(
            dataclasses.FrozenInstanceError, match=r"field 'weights' of .*SpectralMixture"
        ):
            mixture.weights = jnp.zeros(2)  # type: ignore[misc]
        assert "evaluate" in refusal(type("Partial", (Kernel,), {}))

    def test_a_decorator_on_such_a_subclass_applies_its_options(self) -> None:
        @jdc.pytree_dataclass(kw_only=True, order=True)
        class Shifted(Kernel):
            shift: jax.Array

            def evaluate(self, x: jax.Array) -> jax.Array:
                return x + self.shift

        low, high = Shifted(shift=1.0), Shifted(shift=2.0)
        assert low < high and "shift=1.0" in repr(low)
        with pytest.raises(TypeError, match=r"Shifted.__init__\(\) takes from 1 to 2 positional"):
            Shifted(jnp.ones(()), 1.0)  # type: ignore[misc]  # kw_only: shift by name
        assert jax.tree.leaves(jax.tree.map(lambda v: v + 1, low)) == [2.0, 2.0]
        with pytest.raises(TypeError, match="Shifted is already a pytree dataclass: decorate it"):
            jdc.pytree_dataclass(Shifted)

    @pytest.mark.parametrize("spelling", ["future import", "evaluated"])
    def test_a_decorator_below_ours_keeps_its_work(self, spelling: str) -> None:
        """Issue 39: our decorator takes back only what the build as the class was created
        did, as the standard library keeps every decorator's work (it put back the whole
        namespace of the class statement: `tag` gone, `predict` unwrapped)."""
        module = define(DECORATED_BELOW_OURS, spelling)
        sub = module.Sub(3.0, b=4.0)
        assert (module.Sub.tag, sub.predict(), module.Sub().b) == ("tagged", 6.0, 2.0)
        assert repr(sub) == "Sub(a=3.0, b=4.0)" and jax.tree.leaves(sub) == [3.0, 4.0]
        with pytest.raises(TypeError, match="takes from 1 to 2 positional"):  # kw_only applied
            module.Sub(1.0, 2.0)

    def test_class_keywords_are_the_options(self) -> None:
        class Keyword(Kernel, kw_only=True):
            shift: jax.Array

            def evaluate(self, x: jax.Array) -> jax.Array:
                return x + self.shift

        assert Keyword(shift=jnp.zeros(1)).evaluate(jnp.ones(1)).tolist() == [1.0]

    def test_a_subclass_the_default_options_cannot_build_waits_for_a_decorator(self) -> None:
        class Unordered(Kernel):  # `shift` has no default after the base's `scale`.
            shift: jax.Array

            def evaluate(self, x: jax.Array) -> jax.Array:
                return x

        with pytest.raises(TypeError) as caught:
            Unordered(1.0)  # type: ignore[call-arg]
        message = str(caught.value)
        assert "Unordered could not be made a pytree dataclass" in message
        assert "non-default argument 'shift'" in message and "kw_only=True" in message
        rebuilt = jdc.pytree_dataclass(kw_only=True)(Unordered)
        assert rebuilt(shift=jnp.ones(1)).shift.tolist() == [1.0]

    def test_a_subclass_of_a_class_waiting_for_its_decorator_is_refused(self) -> None:
        """Its fields would silently not be fields of the subclass: `dataclasses` reads the
        fields of dataclasses only, and the class waiting is none."""

        class Waiting(Kernel):
            shift: jax.Array

        with pytest.raises(TypeError) as caught:

            class Below(Waiting, kw_only=True):
                gain: jax.Array

                def evaluate(self, x: jax.Array) -> jax.Array:
                    return x

        message = str(caught.value)
        assert "Below subclasses" in message and "Waiting, which could not be made" in message
        assert "non-default argument 'shift'" in message and "kw_only=True" in message

    @pytest.mark.parametrize(
        ("keywords", "body", "problem"),
        [
            ({"frozen": False}, "", "frozen=False"),
            ({}, "__jdc_evolution__ = jdc.Evolution(added=['missing'])", "missing"),
        ],
    )
    def test_other_errors_of_a_build_as_it_is_created_are_raised_then(
        self, keywords: dict[str, bool], body: str, problem: str
    ) -> None:
        namespace: dict[str, Any] = {"jdc": jdc}
        if body:
            exec(body, namespace)
        with pytest.raises(TypeError, match=problem):
            type("Sub", (Kernel,), {k: v for k, v in namespace.items() if k != "jdc"}, **keywords)

    def test_errors_no_option_can_mend_are_raised_when_the_class_is_created(self) -> None:
        from typing import Optional

        with pytest.raises(jdc.StaticAnnotationError, match="field 'depth' of"):

            class Nested(Kernel):
                depth: Optional[jdc.Static[int]] = None  # noqa: UP045

        with pytest.raises(TypeError, match="Slotted: the class keyword slots=True"):

            class Slotted(Kernel, slots=True):  # type: ignore[call-arg]
                pass


class TestPostInitChains:
    """As in the standard library (equinox runs every `__check_init__` up the hierarchy
    instead): a subclass's `__post_init__` replaces its base's unless it calls it."""

    @pytest.mark.parametrize("calls_super", [False, True])
    def test_a_subclass_post_init_replaces_the_bases_unless_it_calls_it(
        self, calls_super: bool
    ) -> None:
        runs: dict[str, list[str]] = {"ours": [], "std": []}

        def make(decorate: Any, key: str) -> type:
            @decorate
            class Base:
                x: float = 1.0

                def __post_init__(self) -> None:
                    runs[key].append("base")

            @decorate
            class Sub(Base):
                def __post_init__(self) -> None:
                    if calls_super:
                        super().__post_init__()
                    runs[key].append("sub")

            return Sub

        make(jdc.pytree_dataclass, "ours")()
        make(dataclasses.dataclass(frozen=True), "std")()
        assert runs["ours"] == runs["std"] == (["base", "sub"] if calls_super else ["sub"])


class TestReplaceWithOwnInit:
    def test_replace_runs_the_own_init_with_every_field_as_a_keyword(self) -> None:
        """A same-named parameter of another meaning misbinds, as with the standard
        library's `replace` (`jdc.replace` is `dataclasses.replace`); `copy_and_mutate` runs
        no `__init__`."""

        @jdc.pytree_dataclass
        class Normalised:
            total: jax.Array

            def __init__(self, total: jax.Array) -> None:
                self.total = total / 2  # `total` means the raw sum here.

        halved = Normalised(jnp.asarray(8.0))
        assert jdc.replace(halved).total == 2.0  # Divided again.
        with jdc.copy_and_mutate(halved) as copy:
            pass
        assert copy.total == 4.0
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert jdc.replace is dataclasses.replace


@dataclass_transform()
@jdc.pytree_dataclass
class _OracleBase:
    a: float = 1.0


@dataclasses.dataclass(frozen=True)
class _PlainBase:
    a: float = 1.0


_METHODS = ("predict", "score")


def _body(namespace: dict[str, Any]) -> None:
    namespace["__annotations__"] = {"b": "float"}
    namespace["b"] = dataclasses.field(default_factory=lambda: 2.0)
    namespace["predict"] = lambda self: self.a + self.b
    namespace["score"] = lambda self: self.a * self.b
    namespace["helper"] = lambda self: 0.0


@settings(max_examples=60, deadline=None)
@given(
    added=st.dictionaries(st.sampled_from(["tag", "kind", "level"]), st.integers(), max_size=3),
    wrapped=st.dictionaries(st.sampled_from(_METHODS), st.integers(2, 5), max_size=3),
    own_repr=st.booleans(),
    delete_helper=st.booleans(),
    kw_only=st.booleans(),
)
def test_oracle_a_decorator_between_keeps_its_work_as_with_the_standard_library(
    added: dict[str, int],
    wrapped: dict[str, int],
    own_repr: bool,
    delete_helper: bool,
    kw_only: bool,
) -> None:
    """Oracle (issue 39): a decorator between a subclass of a `dataclass_transform` base and
    `@jdc.pytree_dataclass(kw_only=...)` adds attributes, wraps methods, replaces the
    `__repr__` that the build as the class was created made, and deletes a method; the same
    decorator
    between a plain class and `dataclasses.dataclass(frozen=True, kw_only=...)` is the
    reference for what the class then holds and does."""

    def between(cls: type) -> type:
        for name, value in added.items():
            setattr(cls, name, value)
        for name, factor in wrapped.items():
            plain = getattr(cls, name)
            setattr(cls, name, lambda self, plain=plain, factor=factor: plain(self) * factor)
        if own_repr:
            cls.__repr__ = lambda self: "own"  # type: ignore[method-assign,assignment]
        if delete_helper:
            del cls.helper  # type: ignore[attr-defined]
        return cls

    ours = jdc.pytree_dataclass(kw_only=kw_only)(
        between(types.new_class("Sub", (_OracleBase,), exec_body=_body))
    )
    std = dataclasses.dataclass(frozen=True, kw_only=kw_only)(
        between(types.new_class("Sub", (_PlainBase,), exec_body=_body))
    )

    def behaviour(cls: type) -> tuple[object, ...]:
        obj = cls(3.0, b=4.0)
        values = [getattr(cls, name, None) for name in ("tag", "kind", "level")]
        results = [getattr(obj, name)() for name in _METHODS]
        try:
            cls(3.0, 4.0)
            positional = True
        except TypeError:
            positional = False
        return (values, results, repr(obj), hasattr(cls, "helper"), cls().b, positional)

    assert behaviour(ours) == behaviour(std)
