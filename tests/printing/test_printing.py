"""Printing: the repr of pytree dataclasses, `jdc.pformat` / `jdc.pprint` for any pytree."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_python

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Linear:
    w: jax.Array
    b: jax.Array


@jdc.pytree_dataclass
class Block:
    attn: Linear
    mlp: list[Linear]
    activation: jdc.Static[str] = "gelu"
    cache: Any = dataclasses.field(default=None, repr=False)


@jdc.pytree_dataclass
class State:
    t: jax.Array
    key: jax.Array


class Adam(NamedTuple):
    count: jax.Array
    mu: dict[str, jax.Array]


def linear(n: int = 4) -> Linear:
    return Linear(jnp.ones((n, n)), jnp.zeros(n))


def test_large_arrays_print_as_dtype_and_shape() -> None:
    assert repr(Linear(jnp.ones((1000, 1000)), jnp.zeros(1000))) == (
        "Linear(w=f32[1000,1000], b=f32[1000])"
    )


def test_small_arrays_keep_their_values() -> None:
    state = State(jnp.asarray(0.5), jax.random.key(0))
    assert repr(state) == "State(t=f32[](0.5), key=key<fry>[])"
    assert jdc.pformat(jnp.arange(3)) == "i32[3](0, 1, 2)"
    assert jdc.pformat(np.arange(9)) == "i64[9]"  # more than jdc.pformat shows by default


def test_short_arrays_false_shows_every_value() -> None:
    assert jdc.pformat(jnp.arange(12.0).reshape(3, 4)[:, :2], short_arrays=False) == (
        "f32[3,2]([[0., 1.], [4., 5.], [8., 9.]])"
    )


def test_nested_nodes_fit_the_width_or_are_indented() -> None:
    block = Block(linear(), [linear(), linear(8)])
    assert jdc.pformat(block, width=300) == (
        "Block(attn=Linear(w=f32[4,4], b=f32[4](0.0, 0.0, 0.0, 0.0)), mlp=[Linear(w=f32[4,4], "
        "b=f32[4](0.0, 0.0, 0.0, 0.0)), Linear(w=f32[8,8], b=f32[8](0.0, 0.0, 0.0, 0.0, 0.0, "
        "0.0, 0.0, 0.0))], activation='gelu')"
    )
    text = jdc.pformat(block, width=60)
    assert text == "\n".join(
        [
            "Block(",
            "    attn=Linear(w=f32[4,4], b=f32[4](0.0, 0.0, 0.0, 0.0)),",
            "    mlp=[",
            "        Linear(w=f32[4,4], b=f32[4](0.0, 0.0, 0.0, 0.0)),",
            "        Linear(",
            "            w=f32[8,8],",
            "            b=f32[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),",
            "        ),",
            "    ],",
            "    activation='gelu',",
            ")",
        ]
    )
    assert repr(block) == jdc.pformat(block)  # repr is pformat at the default width


def test_any_pytree_prints_with_the_same_rules() -> None:
    state = {"params": [linear(2)], "opt": Adam(jnp.asarray(3), {"w": jnp.ones((5, 5))}), "n": None}
    assert jdc.pformat(state, width=200) == (
        "{'params': [Linear(w=f32[2,2](1.0, 1.0, 1.0, 1.0), b=f32[2](0.0, 0.0))], "
        "'opt': Adam(count=i32[](3), mu={'w': f32[5,5]}), 'n': None}"
    )
    assert jdc.pformat((1,)) == "(1,)"


def test_pprint_prints_pformat(capsys: pytest.CaptureFixture[str]) -> None:
    jdc.pprint([linear(2)], width=30)
    assert capsys.readouterr().out == jdc.pformat([linear(2)], width=30) + "\n"


def test_tracers_print_their_dtype_and_shape() -> None:
    seen: list[str] = []

    @jax.jit
    def step(state: State) -> jax.Array:
        seen.append(repr(state))
        return state.t

    step(State(jnp.asarray(0.5), jax.random.key(0)))
    assert seen == ["State(t=f32[], key=key<fry>[])"]


def test_printing_a_large_array_copies_nothing_to_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    big = jnp.ones((512, 512))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("copied to the host")

    monkeypatch.setattr(type(big), "__array__", refuse)
    monkeypatch.setattr(type(big), "tolist", refuse)
    assert repr(Linear(big, big)) == "Linear(w=f32[512,512], b=f32[512,512])"


def test_repr_false_fields_are_left_out_and_statics_shown() -> None:
    text = repr(Block(linear(1), [], cache=object()))
    assert "cache" not in text and "activation='gelu'" in text


def test_a_node_inside_itself_prints_as_ellipsis() -> None:
    holder: list[Any] = []
    node = Linear(jnp.zeros(1), holder)  # type: ignore[arg-type]
    holder.append(node)
    assert repr(node) == "Linear(w=f32[1](0.0), b=[...])"


def test_own_repr_is_kept() -> None:
    @jdc.pytree_dataclass
    class Named:
        x: float

        def __repr__(self) -> str:
            return "named"

    @jdc.pytree_dataclass(repr=False)
    class Plain:
        x: float

    assert repr(Named(1.0)) == "named"
    assert repr(Plain(1.0)).startswith("<")


def test_ipython_pretty_printing_uses_the_same_text() -> None:
    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    block = Block(linear(), [])
    assert pretty(block) == repr(block)
    assert pretty(block, max_width=30) == jdc.pformat(block, width=30)


def test_ipython_pretty_printing_breaks_the_groups_around_a_long_object() -> None:
    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    block = Block(linear(), [])
    text = pretty([1234567890] * 3 + [block], max_width=60)
    lines = text.splitlines()
    assert lines[:3] == ["[1234567890,", " 1234567890,", " 1234567890,"], text
    assert "\n".join(line[1:] for line in lines[3:]) == jdc.pformat(block, width=59) + "]", text
    assert max(map(len, lines)) <= 60, text


def test_ipython_pretty_printing_of_a_minimal_printer_is_the_repr() -> None:
    class Printer:
        def __init__(self) -> None:
            self.parts: list[str] = []

        def text(self, text: str) -> None:
            self.parts.append(text)

    printer = Printer()
    block = Block(linear(), [])
    block._repr_pretty_(printer, False)  # type: ignore[attr-defined]
    assert printer.parts == [repr(block)]


def test_ipython_pretty_printing_fits_and_indents_inside_containers() -> None:
    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    block = Block(linear(), [linear()])
    text = pretty({"first_block": block, "blocks": [block, block]}, max_width=60)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 60, text
    # Each block's lines keep their shape, shifted to the column where the block starts.
    start = lines[0].index("Block(")
    expected = jdc.pformat(block, width=60 - start).splitlines()
    shifted = [line[start:] for line in lines[: len(expected)]]
    assert shifted == [*expected[:-1], expected[-1] + ","], text  # IPython adds the comma
    assert all(line[:start].isspace() for line in lines[1 : len(expected)]), text
    assert text.endswith(")]}"), text


def test_treescope_renders_field_names() -> None:
    treescope = pytest.importorskip("treescope")
    text = treescope.render_to_text(Block(linear(2), [], activation="relu"))
    assert "attn=" in text and "activation='relu'" in text and "Linear" in text


def test_float32_values_print_as_float32() -> None:
    assert jdc.pformat(jnp.asarray(0.1)) == "f32[](0.1)"
    assert jdc.pformat(jnp.asarray([True, False])) == "bool[2](True, False)"


def test_a_1_tuple_counts_its_comma_against_the_width() -> None:
    text = jdc.pformat((list(range(20)),), width=72)
    assert max(map(len, text.splitlines())) <= 72


def test_dict_subclasses_are_nodes() -> None:
    assert jdc.pformat(collections.OrderedDict(a=jnp.ones(300))) == "OrderedDict({'a': f32[300]})"
    defaults: collections.defaultdict[str, Any] = collections.defaultdict(list, a=jnp.ones(9))
    assert jdc.pformat(defaults) == "defaultdict({'a': f32[9]})"


def test_nested_classes_keep_their_own_repr_and_their_qualified_name() -> None:
    @dataclasses.dataclass
    class Own:
        x: Any

        def __repr__(self) -> str:
            return "Own!"

    @jdc.pytree_dataclass
    class Outer:
        child: Any

        @jdc.pytree_dataclass
        class Inner:
            x: Any

    assert jdc.pformat(Outer(Own(jnp.ones(2))), width=300).endswith("Outer(child=Own!)")
    assert jdc.pformat(Outer.Inner(1), width=300).endswith("Outer.Inner(x=1)")


def test_float0_gradients_print_as_float0() -> None:
    grads = jax.grad(lambda s: s.t * 2.0, allow_int=True)(Holder(jnp.asarray(1.0), jnp.asarray(3)))
    assert repr(grads).endswith("Holder(t=f32[](2.0), n=float0[])")


@jdc.pytree_dataclass
class Holder:
    t: jax.Array
    n: jax.Array


def test_deep_nesting_prints() -> None:
    node: Any = Holder(jnp.zeros(()), None)  # type: ignore[arg-type]
    for _ in range(800):  # as deep as copy_and_mutate copies
        node = Holder(0.0, node)  # type: ignore[arg-type]
    lines = jdc.pformat(node).splitlines()
    assert lines[0] == "Holder(" and lines[-1] == ")"


def test_a_wrapper_around_the_generated_repr_prints_the_fields_as_with_the_standard_library() -> (
    None
):
    """A decorator that wraps the generated `__repr__` (logging, decoration) calls ours, which
    lays out the fields, as with the standard library's (it recursed: the printer took the
    wrapped object for a leaf and called the wrapper again)."""

    def wrapping(cls: type) -> type:
        plain = cls.__repr__
        cls.__repr__ = lambda self: f"<{plain(self)}>"  # type: ignore[method-assign,assignment]
        return cls

    @wrapping
    @jdc.pytree_dataclass
    class Point:
        x: float

    @wrapping
    @dataclasses.dataclass(frozen=True)
    class Plain:
        x: float

    Point.__qualname__, Plain.__qualname__ = "Point", "Plain"  # Short: on one line.
    assert repr([Point(1.0)]) == repr([Plain(1.0)]).replace("Plain", "Point") == "[<Point(x=1.0)>]"


SUBCLASS_PICKLED_BY_VALUE = """
import sys
import cloudpickle
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Base:
    a: float = 1.0

@jdc.pytree_dataclass
class Sub(Base):
    b: float = 2.0
    n: jdc.Static[int] = 5

with open(sys.argv[1], "wb") as file:
    cloudpickle.dump((Sub, Sub(b=3.0)), file)  # Classes of `__main__`: by value.
"""

_LOAD = """
import pickle, sys
Sub, sub = pickle.loads(open(sys.argv[1], "rb").read())
print(sub, Sub(), Sub.__repr__.__qualname__, sep="\\n")
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("future", [True, False])
def test_a_subclass_pickled_by_value_prints_its_own_fields(future: bool, tmp_path: Path) -> None:
    """Issue 39: each class holds its own generated repr. cloudpickle leaves out of a class it
    copies what the class shares with a base as inherited: with one repr function for every
    class, the copy printed its base's fields (`Sub(a=1.0)`), also for new instances."""
    pytest.importorskip("cloudpickle")
    prefix = "from __future__ import annotations\n" if future else ""
    target = str(tmp_path / "sub.pkl")
    run_python(["-c", prefix + SUBCLASS_PICKLED_BY_VALUE, target])
    output = run_python(["-c", _LOAD, target])
    assert output.split("\n")[:3] == [
        "Sub(a=1.0, b=3.0, n=5)",
        "Sub(a=1.0, b=2.0, n=5)",
        "Sub.__repr__",
    ]
