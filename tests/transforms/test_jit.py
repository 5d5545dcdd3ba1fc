"""`jdc.jit`: static arguments from `Static[...]` annotations, on functions and class members."""

import dataclasses
import functools
import inspect
import typing
import warnings
from typing import Annotated, Any, Optional, TypeVarTuple

import _jit_future_annotations as future  # tests/ is on sys.path under pytest.
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jax_dataclasses as jdc

PjitFunction = type(jax.jit(lambda x: x))
Ts = TypeVarTuple("Ts")


class Traces:
    """Counts how often each jitted function body runs, i.e. how often it is traced."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, name: str) -> None:
        self.names.append(name)

    def count(self, name: str) -> int:
        return self.names.count(name)


@pytest.fixture
def traces() -> Traces:
    return Traces()


@dataclasses.dataclass(frozen=True)
class Config:
    scale: float = 1.0


def assert_static(
    jitted: object, argnums: tuple[int, ...] | None = None, argnames: tuple[str, ...] | None = None
) -> None:
    """The static arguments `jax.jit` was given, where this jax shows them (a private attribute
    of newer versions; the tests around each call check the behaviour on every version)."""
    info = getattr(jitted, "_jit_info", None)
    if info is None:
        return
    if argnums is not None:
        assert info.static_argnums == argnums
    if argnames is not None:
        assert info.static_argnames == argnames


# --------------------------------------------------------------------------- what jit returns


def test_returns_jax_jit_object_with_nothing_on_the_call_path() -> None:
    @jdc.jit
    def f(x: jax.Array, n: jdc.Static[int]) -> jax.Array:
        return x * n

    assert type(f) is PjitFunction


def test_name_doc_wrapped_and_signature_are_kept() -> None:
    def f(x: jax.Array, n: jdc.Static[int] = 2) -> jax.Array:
        """Multiply by n."""
        return x * n

    jitted = jdc.jit(f)
    assert jitted.__name__ == "f"
    assert jitted.__qualname__ == f.__qualname__
    assert jitted.__doc__ == "Multiply by n."
    assert jitted.__wrapped__ is f
    assert inspect.signature(jitted) == inspect.signature(f)


def test_lower_trace_and_eval_shape_are_available() -> None:
    @jdc.jit
    def f(x: jax.Array, n: jdc.Static[int]) -> jax.Array:
        return jnp.tile(x, n)

    x = jnp.ones(3)
    compiled = f.lower(x, 2).compile()
    np.testing.assert_array_equal(compiled(x), jnp.ones(6))
    assert f.trace(x, n=4).out_info.shape == (12,)
    assert f.eval_shape(x, 5).shape == (15,)


def test_decorator_with_options_and_without_parentheses_match() -> None:
    def f(x: jax.Array, n: jdc.Static[int]) -> jax.Array:
        return x * n

    assert type(jdc.jit()(f)) is PjitFunction
    assert type(jdc.jit(inline=True)(f)) is PjitFunction
    np.testing.assert_array_equal(jdc.jit(keep_unused=True)(f)(jnp.ones(2), 3), [3.0, 3.0])


# --------------------------------------------------------------------------- static parameters


def test_static_by_position_and_by_keyword(traces: Traces) -> None:
    @jdc.jit
    def f(x: jax.Array, n: jdc.Static[int]) -> jax.Array:
        traces("f")
        return jnp.tile(x, n)  # Fails to trace unless n is a Python int.

    x = jnp.ones(2)
    assert f(x, 3).shape == (6,)
    assert f(x, n=3).shape == (6,)
    assert f(x=x, n=4).shape == (8,)
    assert traces.count("f") == 3  # One per calling convention and value, like jax.jit.


def test_compiles_once_for_equal_static_values(traces: Traces) -> None:
    @jdc.jit
    def f(x: jax.Array, shape: jdc.Static[tuple[int, ...]], config: jdc.Static[Config]) -> Any:
        traces("f")
        return jnp.broadcast_to(x, shape) * config.scale

    x = jnp.ones(())
    for _ in range(3):
        f(x, (2, 3), Config(2.0))  # Fresh, equal tuples and configs each time.
    assert traces.count("f") == 1
    f(jnp.zeros(()), (2, 3), Config(2.0))  # New dynamic value: same compilation.
    assert traces.count("f") == 1
    f(x, (3, 2), Config(2.0))
    f(x, (2, 3), Config(1.0))
    assert traces.count("f") == 3


def test_positional_only_static_becomes_static_argnums(traces: Traces) -> None:
    @jdc.jit
    def f(n: jdc.Static[int], /, x: jax.Array) -> jax.Array:
        traces("f")
        return jnp.tile(x, n)

    assert f(2, jnp.ones(2)).shape == (4,)
    assert f(2, x=jnp.ones(2)).shape == (4,)
    assert_static(f, argnums=(0,), argnames=())


def test_keyword_only_static_becomes_static_argnames() -> None:
    @jdc.jit
    def f(x: jax.Array, *, n: jdc.Static[int]) -> jax.Array:
        return jnp.tile(x, n)

    assert f(jnp.ones(2), n=3).shape == (6,)
    assert_static(f, argnums=(), argnames=("n",))


def test_static_parameter_with_default(traces: Traces) -> None:
    @jdc.jit
    def f(x: jax.Array, n: jdc.Static[int] = 2, *, mode: jdc.Static[str] = "tile") -> jax.Array:
        traces(mode)
        return jnp.tile(x, n) if mode == "tile" else jnp.repeat(x, n)

    x = jnp.arange(2.0)
    np.testing.assert_array_equal(f(x), [0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(f(x, mode="repeat"), [0.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(f(x, 3, mode="repeat"), [0.0, 0.0, 0.0, 1.0, 1.0, 1.0])


def test_args_and_kwargs_in_the_signature() -> None:
    @jdc.jit
    def f(n: jdc.Static[int], *arrays: jax.Array, scale: jdc.Static[float], **named: Any) -> Any:
        total = sum(jnp.tile(a, n) for a in arrays) * scale
        return total + sum(named.values())

    out = f(2, jnp.ones(1), jnp.ones(1), scale=3.0, bias=jnp.ones(2))
    np.testing.assert_array_equal(out, [7.0, 7.0])


def test_static_names_in_kwargs_are_passed_to_jax() -> None:
    @jdc.jit(static_argnames="n")
    def f(x: jax.Array, **options: Any) -> jax.Array:
        return jnp.tile(x, options["n"])

    assert f(jnp.ones(2), n=3).shape == (6,)


def test_every_spelling_of_static() -> None:
    S = jdc.Static

    @jdc.jit
    def f(
        x: jax.Array,
        a: S[int],
        b: "jdc.Static[int]",
        c: Annotated[jdc.Static[int], "doc"],
        d: typing.Annotated[int, jdc.Static[int].__metadata__[0]],
    ) -> jax.Array:
        return jnp.tile(x, a + b + c + d)

    assert f(jnp.ones(1), 1, 1, 1, 1).shape == (4,)
    assert_static(f, argnums=(1, 2, 3, 4))


def test_dynamic_parameters_stay_dynamic(traces: Traces) -> None:
    @jdc.jit
    def f(x: jax.Array, n: int, m: Optional[int] = None, k: "list[int] | None" = None) -> Any:  # noqa: UP045
        traces("f")
        return x * n

    f(jnp.ones(1), 2)
    f(jnp.ones(1), 3)
    assert traces.count("f") == 1


def test_explicit_static_argnums_and_argnames_are_merged(traces: Traces) -> None:
    def f(x: jax.Array, a: int, b: jdc.Static[int], c: int, /, d: int = 1, *, e: int = 1) -> Any:
        traces("f")
        return jnp.tile(x * a * c, b * d * e)  # a and c may be traced; b, d, e may not.

    jitted = jdc.jit(f, static_argnums=(1,), static_argnames=["c", "e"])
    assert_static(jitted, argnums=(1, 2, 3), argnames=("e",))
    assert jitted(jnp.ones(1), 2, 3, 1, e=2).shape == (6,)
    by_number = jdc.jit(f, static_argnums=4)
    assert_static(by_number, argnums=(2, 4), argnames=("d",))
    assert by_number(jnp.ones(1), 1, 2, 1, d=3).shape == (6,)


def test_string_annotations_without_future_import_and_locals() -> None:
    Local = jdc.Static

    @jdc.jit
    def f(x: jax.Array, n: "Local[int]", later: "jdc.Static[DefinedLater]") -> Any:
        return jnp.tile(x, n)

    class DefinedLater:
        pass

    assert f(jnp.ones(1), 2, DefinedLater()).shape == (2,)


@pytest.mark.parametrize("bad", [Optional[jdc.Static[int]], "Optional[jdc.Static[int]]"])  # noqa: UP045
def test_nested_static_is_an_error_with_the_fix(bad: Any) -> None:
    def f(x: jax.Array, n: Any) -> jax.Array:
        return x

    f.__annotations__["n"] = bad
    with pytest.raises(jdc.StaticAnnotationError) as info:
        jdc.jit(f)
    message = str(info.value)
    assert "parameter 'n'" in message
    assert "f" in message
    assert "Static[Optional[int]] instead of Optional[Static[int]]" in message


def test_undecidable_annotation_mentioning_static_is_an_error() -> None:
    def f(x: jax.Array, n: "NotYetDefined[jdc.Static[int]]") -> jax.Array:  # noqa: F821
        return x

    with pytest.raises(
        jdc.StaticAnnotationError, match=r"cannot tell .* of parameter 'n' of .*\bf\b"
    ):
        jdc.jit(f)


@pytest.mark.parametrize("star", ["*", "**"])
def test_static_on_star_args_is_an_error(star: str) -> None:
    namespace: dict[str, Any] = {"jdc": jdc}
    exec(f"def g(x, {star}rest: jdc.Static[int]): return x", namespace)
    with pytest.raises(jdc.StaticAnnotationError) as info:
        jdc.jit(namespace["g"])
    assert f"{star}rest" in str(info.value)
    assert "parameter 'rest' of g" in str(info.value)
    assert "static_argnums/static_argnames" in str(info.value)


def test_generic_function_with_type_var_tuple_is_accepted() -> None:
    @jdc.jit
    def pack(*args: *Ts) -> tuple[*Ts]:
        return args

    a, b = pack(jnp.ones(1), jnp.zeros(2))
    assert (a.shape, b.shape) == ((1,), (2,))
    assert future.pack(1, 2) == (1, 2)
    out = future.Batched.scale_all(jnp.ones(1), jnp.ones(2), by=3)
    np.testing.assert_array_equal(out[1], [3.0, 3.0])


# --------------------------------------------------------------------------- future annotations


def test_future_annotations_forward_reference_defined_after_the_function() -> None:
    before = future.traces.count("scaled")
    for _ in range(2):
        np.testing.assert_array_equal(future.scaled(jnp.ones(2), future.Config(3.0)), [3.0, 3.0])
    assert future.traces.count("scaled") == before + 1


def test_future_annotations_alias_positional_only_and_default() -> None:
    assert future.zeros(3).shape == (3,)
    assert future.zeros(2, dtype="int32").dtype == jnp.int32
    assert_static(future.zeros, argnums=(0, 1))


def test_future_annotations_methods_and_classmethods() -> None:
    model = future.Model.create((2,), future.Config(2.0))
    assert isinstance(model, future.Model)
    np.testing.assert_array_equal(model.apply(jnp.ones(2), 2), [4.0, 4.0])


def test_future_annotations_locals_of_the_decorating_function() -> None:
    assert future.local_alias()(jnp.ones(2), 3).shape == (6,)


# --------------------------------------------------------------------------- class members


@jdc.pytree_dataclass
class Layer:
    weight: jax.Array
    activation: jdc.Static[str] = "identity"

    @jdc.jit
    def apply(self, x: jax.Array, power: jdc.Static[int] = 1) -> jax.Array:
        """Apply the layer."""
        y = (x @ self.weight) ** power
        return jnp.tanh(y) if self.activation == "tanh" else y

    @jdc.jit
    @classmethod
    def create(cls, batch_shape: jdc.Static[tuple[int, ...]], features: jdc.Static[int]) -> Any:
        return cls(jnp.ones((*batch_shape, features, features)))

    @jdc.jit
    @staticmethod
    def identity(n: jdc.Static[int]) -> jax.Array:
        return jnp.eye(n)

    @staticmethod
    @jdc.jit
    def tiled(x: jax.Array, n: jdc.Static[int]) -> jax.Array:
        return jnp.tile(x, n)


class SubLayer(Layer):
    pass


def test_method_binds_self_as_a_dynamic_pytree() -> None:
    layer = Layer(jnp.eye(2) * 2)
    x = jnp.ones(2)
    np.testing.assert_array_equal(layer.apply(x), [2.0, 2.0])
    np.testing.assert_array_equal(layer.apply(x, 2), [4.0, 4.0])
    np.testing.assert_array_equal(layer.apply(x, power=2), [4.0, 4.0])
    np.testing.assert_array_equal(Layer.apply(layer, x, 2), [4.0, 4.0])
    before = Layer.apply._cache_size()  # type: ignore[attr-defined]
    Layer(jnp.eye(2) * 3).apply(x, 2)  # New weights: the same compilation.
    assert Layer.apply._cache_size() == before  # type: ignore[attr-defined]
    Layer(jnp.eye(2), "tanh").apply(x, 2)  # A new static field: a new compilation.
    assert Layer.apply._cache_size() == before + 1  # type: ignore[attr-defined]
    assert Layer.apply.__doc__ == "Apply the layer."


def test_classmethod_constructor_with_static_batch_shape() -> None:
    layer = Layer.create((4, 3), 2)
    assert type(layer) is Layer
    assert layer.weight.shape == (4, 3, 2, 2)
    assert type(SubLayer.create((1,), 2)) is SubLayer  # cls binds to the subclass.
    assert type(layer.create((), 1)) is Layer  # Through an instance, too.
    assert isinstance(Layer.__dict__["create"], classmethod)
    assert Layer.create.__name__ == "create"
    # On the class, `lower` & co. are those of the function underneath: pass `cls` too.
    assert Layer.create.lower(Layer, (2,), 3).compile()().weight.shape == (2, 3, 3)


def test_staticmethod_in_either_decorator_order() -> None:
    np.testing.assert_array_equal(Layer.identity(2), jnp.eye(2))
    np.testing.assert_array_equal(Layer(jnp.eye(2)).identity(2), jnp.eye(2))
    assert isinstance(Layer.__dict__["identity"], staticmethod)
    assert Layer.tiled(jnp.ones(1), 3).shape == (3,)
    assert Layer(jnp.eye(1)).tiled(jnp.ones(1), 2).shape == (2,)
    assert Layer.identity.lower(3).compile()().shape == (3, 3)


def test_explicit_staticmethod_and_classmethod_objects() -> None:
    def make(cls: type, n: jdc.Static[int]) -> Any:
        return cls(jnp.zeros(n))

    def double(x: jax.Array) -> jax.Array:
        return 2 * x

    Host = jdc.pytree_dataclass(type("Host", (), {"__annotations__": {"value": jax.Array}}))
    Host.make = jdc.jit(classmethod(make))
    Host.double = jdc.jit(staticmethod(double), inline=True)
    assert Host.make(3).value.shape == (3,)
    np.testing.assert_array_equal(Host.double(jnp.ones(1)), [2.0])


def _library_class() -> type:
    @jdc.pytree_dataclass
    class Model:
        weight: jax.Array
        scale: jdc.Static[float] = 1.0

        def forward(self, x: jax.Array, power: jdc.Static[int]) -> jax.Array:
            """Forward pass."""
            return (self.weight * x * self.scale) ** power

        @classmethod
        def zeros(cls, shape: jdc.Static[tuple[int, ...]]) -> Any:
            return cls(jnp.zeros(shape))

        @staticmethod
        def tile(x: jax.Array, n: jdc.Static[int]) -> jax.Array:
            return jnp.tile(x, n)

    return Model


def test_jit_existing_methods_in_a_loop_with_getattr() -> None:
    Model = _library_class()
    for name in ("forward", "zeros"):
        setattr(Model, name, jdc.jit(getattr(Model, name)))

    class Child(Model):  # type: ignore[misc,valid-type]
        pass

    assert type(Model.__dict__["forward"]) is PjitFunction
    assert isinstance(Model.__dict__["zeros"], classmethod)
    model = Model(jnp.full(2, 2.0), 0.5)
    np.testing.assert_array_equal(model.forward(jnp.ones(2), 3), [1.0, 1.0])
    assert model.forward.__doc__ == "Forward pass."
    assert type(Model.zeros((2,))) is Model
    assert type(Child.zeros((2,))) is Child
    assert type(model.zeros((1,))) is Model
    # What `getattr` returned is also usable directly, like the bound classmethod it was.
    direct = jdc.jit(_library_class().zeros)
    assert direct((3,)).weight.shape == (3,)
    assert direct.lower((3,)).compile()().weight.shape == (3,)
    assert direct.eval_shape((4,)).weight.shape == (4,)
    assert direct.trace((5,)).out_info.weight.shape == (5,)


def test_jit_existing_members_in_a_loop_with_vars() -> None:
    # `getattr` turns a staticmethod into a plain function; `vars(cls)[name]` keeps its kind.
    Model = _library_class()
    for name in ("forward", "zeros", "tile"):
        setattr(Model, name, jdc.jit(vars(Model)[name]))
    model = Model(jnp.ones(2))
    assert model.forward(jnp.ones(2), 2).shape == (2,)
    assert type(Model.zeros((2,))) is Model
    assert model.tile(jnp.ones(1), 4).shape == (4,)
    assert Model.tile(jnp.ones(1), 4).shape == (4,)


def test_bound_method_of_an_instance() -> None:
    Model = _library_class()
    model = Model(jnp.full(2, 3.0))
    forward = jdc.jit(model.forward)
    np.testing.assert_array_equal(forward(jnp.ones(2), 2), [9.0, 9.0])
    assert_static(forward, argnums=(1,))


def test_functools_wraps_chain_reads_the_inner_signature() -> None:
    def inner(x: jax.Array, n: "jdc.Static[int]") -> jax.Array:
        return jnp.tile(x, n)

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> jax.Array:
        return inner(*args, **kwargs)

    jitted = jdc.jit(wrapper)
    assert jitted(jnp.ones(1), 3).shape == (3,)
    assert jitted(jnp.ones(1), n=2).shape == (2,)


def test_partial_reads_globals_of_the_wrapped_function() -> None:
    def f(x: jax.Array, scale: float, n: "jdc.Static[int]") -> jax.Array:
        return jnp.tile(x, n) * scale

    jitted = jdc.jit(functools.partial(f, scale=2.0))
    np.testing.assert_array_equal(jitted(jnp.ones(1), n=2), [2.0, 2.0])


# --------------------------------------------------------------------------- jax.jit options


def test_donate_argnums_donates_the_buffer() -> None:
    @jdc.jit(donate_argnums=0)
    def step(x: jax.Array, n: jdc.Static[int]) -> jax.Array:
        return x + n

    x = jnp.ones(3)
    np.testing.assert_array_equal(step(x, 2), [3.0, 3.0, 3.0])
    assert x.is_deleted()


def test_donate_argnames_on_a_method() -> None:
    @jdc.pytree_dataclass
    class State:
        value: jax.Array

        @jdc.jit(donate_argnames="self")
        def advance(self, by: jdc.Static[int]) -> Any:
            return State(self.value + by)

    state = State(jnp.zeros(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = state.advance(1)
    assert state.value.is_deleted()
    np.testing.assert_array_equal(new.value, [1.0, 1.0])


@pytest.mark.parametrize(
    "options",
    [
        {"donate_argnums": 1},
        {"donate_argnums": (0, 1)},
        {"donate_argnames": "n"},
        {"donate_argnames": ("x", "n")},
        {"static_argnums": 0, "donate_argnames": "x"},
        {"static_argnames": "x", "donate_argnums": 0},
    ],
)
def test_static_and_donated_is_an_error_naming_the_parameter(options: dict[str, Any]) -> None:
    def step(x: jax.Array, n: jdc.Static[int]) -> jax.Array:
        return x + n

    with pytest.raises(ValueError, match=r"jit of .*step: argument '(n|x)' is both static") as info:
        jdc.jit(step, **options)
    assert "donate_argnums or donate_argnames" in str(info.value)


def test_static_and_donated_position_in_star_args_is_an_error() -> None:
    def f(*args: jax.Array) -> jax.Array:
        return args[0]

    with pytest.raises(ValueError, match="argument 2 is both static"):
        jdc.jit(f, static_argnums=2, donate_argnums=(0, 2))


def test_unknown_keyword_is_left_to_jax() -> None:
    def f(x: jax.Array) -> jax.Array:
        return x

    with pytest.raises(TypeError, match="not_a_jit_option"):
        jdc.jit(f, not_a_jit_option=True)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"static_argnums": "n"}, "static_argnums must be one int"),
        ({"static_argnums": [1.0]}, "static_argnums must be one int"),
        ({"static_argnums": True}, "static_argnums must be one int"),
        ({"static_argnames": 1}, "static_argnames must be one str"),
        ({"donate_argnames": [None]}, "donate_argnames must be one str"),
    ],
)
def test_malformed_argnums_and_argnames(options: dict[str, Any], message: str) -> None:
    def f(x: jax.Array, n: int) -> jax.Array:
        return x

    with pytest.raises(TypeError, match=f"jit of .*f: {message}"):
        jdc.jit(f, **options)


def test_not_callable_is_an_error() -> None:
    with pytest.raises(TypeError, match=r"jit expects a function.*got 3"):
        jdc.jit(3)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- property


_KINDS = ("positional_only", "positional_or_keyword", "keyword_only")


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_KINDS), st.booleans(), st.integers(1, 3)),
        min_size=1,
        max_size=5,
    ).map(lambda params: sorted(params, key=lambda p: _KINDS.index(p[0]))),
    st.booleans(),
)
def test_any_mix_of_parameter_kinds(params: list[tuple[str, bool, int]], by_keyword: bool) -> None:
    """Static ints size arrays (so tracing fails if one is dynamic); arrays add up."""
    source, call_args, call_kwargs, expected = [], [], {}, 0.0
    kinds_seen = {kind for kind, _, _ in params}
    for i, (kind, static, value) in enumerate(params):
        name = f"p{i}"
        source.append(f"{name}: jdc.Static[int]" if static else f"{name}: jax.Array")
        argument: Any = value if static else jnp.full((), float(value))
        if kind == "keyword_only" or (kind == "positional_or_keyword" and by_keyword):
            call_kwargs[name] = argument
        else:
            call_args.append(argument)
        expected += value
    if "positional_only" in kinds_seen:
        last_positional_only = max(i for i, p in enumerate(params) if p[0] == "positional_only")
        source.insert(last_positional_only + 1, "/")
    if "keyword_only" in kinds_seen:
        first_keyword_only = min(i for i, p in enumerate(params) if p[0] == "keyword_only")
        source.insert(first_keyword_only + (1 if "positional_only" in kinds_seen else 0), "*")
    body = " + ".join(
        f"jnp.zeros(p{i}).size" if static else f"p{i}" for i, (_, static, _) in enumerate(params)
    )
    namespace: dict[str, Any] = {"jdc": jdc, "jax": jax, "jnp": jnp}
    exec(f"def f({', '.join(source)}):\n    return 0.0 + {body}\n", namespace)
    jitted = jdc.jit(namespace["f"])
    assert float(jitted(*call_args, **call_kwargs)) == expected
    assert float(jitted(*call_args, **call_kwargs)) == expected
    assert jitted._cache_size() == 1  # type: ignore[attr-defined]


def test_callable_object_statics_resolve_in_its_class_module() -> None:
    step = future.jit_callable_object_in_a_function()
    np.testing.assert_array_equal(step(jnp.ones(2), 3), jnp.full(2, 3.0))


def test_the_function_may_be_passed_by_1_6s_keyword() -> None:
    def repeat(x: jax.Array, times: jdc.Static[int]) -> jax.Array:
        return jnp.tile(x, times)

    jitted = jdc.jit(fun=repeat)  # 1.6's parameter was `fun`: the jitted function, not a decorator
    assert jitted(jnp.ones(1), 3).tolist() == [1.0, 1.0, 1.0]
    assert jdc.jit(fun=repeat, inline=True)(jnp.ones(1), 2).shape == (2,)
