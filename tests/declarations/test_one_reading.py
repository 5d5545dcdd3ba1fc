"""One reading of annotations (issue 30): a field's declarations (`Static`, `Sharded`, the rest
of its metadata) are read once, where Python resolves the names where the class is defined (its
body, enclosing class bodies and functions, the module), and every feature reads what was
stored. Each case is a silent wrong result found where an annotation was read a second time,
elsewhere, differently; each runs with the future import and, on Python 3.14, lazily."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from helpers import SPELLINGS, define, statics
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc

LOCAL_ALIAS_AFTER_THE_CLASS = """
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

def make_solver():
    @jdc.pytree_dataclass
    class Solver:
        x: jax.Array
        iters: "MyStatic" = 3

    @jdc.jit
    def run(solver: Solver, times: "MyStatic") -> jax.Array:
        return solver.x * solver.iters * times

    MyStatic = jdc.Static[int]
    return Solver(jnp.ones(2)), run
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_local_alias_defined_after_the_class_is_read_where_it_lives(spelling: str) -> None:
    """The late decision reads the function's names as they are at the first use: the field
    is static; `jdc.jit`, which cannot change what it told `jax.jit`, refuses the parameter
    with the fix (both were silently traced)."""
    solver, run = define(LOCAL_ALIAS_AFTER_THE_CLASS, spelling).make_solver()
    assert statics(type(solver)) == ("iters",)
    assert len(jax.tree.leaves(solver)) == 1
    with pytest.raises(jdc.StaticAnnotationError, match=r"parameter 'times' of .*run.*before"):
        run(solver, 2)


RECURSIVE_BUILDER = """
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

def build(axis, inner=None):
    Axes = jdc.Sharded[jax.Array, axis]

    @jdc.pytree_dataclass
    class Block:
        w: Axes
        inner: object = None

    block = Block(jnp.ones(8), inner)
    return block, jdc.partition_specs(block)
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_each_call_of_a_recursive_builder_declares_its_own_axes(spelling: str) -> None:
    """Read when each class is decorated, in the call that defines it (the sharding reader
    read the string later, in whichever running call of the function it found first)."""
    build = define(RECURSIVE_BUILDER, spelling).build
    first, specs = build("data")
    assert specs.w == P("data")
    _, specs = build("model", inner=first)
    assert (specs.w, specs.inner.w) == (P("model"), P("data"))


@pytest.mark.parametrize(
    "annotation",
    ['"jdc.Static[int"', "\"jdc.Sharded[jax.Array, 'embed', 'mlp'\""],
)
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_unparsable_string_annotation_is_an_error_naming_class_and_field(
    spelling: str, annotation: str
) -> None:
    """As `typing.get_type_hints` (and 1.6.3) raise it; it was silently a traced child or a
    replicated array."""
    source = f"""
import jax
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Broken:
    x: jax.Array
    y: {annotation} = 3
"""
    with pytest.raises(SyntaxError, match=r"annotation .* of field 'y' of Broken is not valid"):
        define(source, spelling)


ENCLOSING_CLASS_BODY = """
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

class Layers:
    Row = jdc.Sharded[jax.Array, "data", None]
    Count = jdc.Static[int]

    @jdc.pytree_dataclass
    class Dense:
        w: Row
        n: Count = 2
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_aliases_of_an_enclosing_class_body_declare_both_kinds(spelling: str) -> None:
    """`Static` and `Sharded` aliases of the same scope are read by the same reader (the
    `Sharded` one was dropped: a replicated array)."""
    dense = define(ENCLOSING_CLASS_BODY, spelling).Layers.Dense(jnp.ones((4, 2)))
    assert statics(type(dense)) == ("n",)
    assert jdc.partition_specs(dense).w == P("data", None)


MIXIN_BEFORE_THE_BASE = """
import jax
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Base:
    w: jdc.Sharded[jax.Array, None, "model"]
    n: jdc.Static[int] = 1

class Typed:
    w: jax.Array  # For type checkers only: not a dataclass, so not a field.
    n: int

@jdc.pytree_dataclass
class Layer(Typed, Base):
    pass
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_plain_mixins_annotation_does_not_hide_the_bases_declaration(spelling: str) -> None:
    """A base's declaration of a field stays unless a subclass declares the field again, as
    `dataclasses.fields()` says (the sharding reader took the mixin's bare annotation)."""
    module = define(MIXIN_BEFORE_THE_BASE, spelling)
    fields = {f.name: f for f in dataclasses.fields(module.Layer)}
    assert fields["w"] is {f.name: f for f in dataclasses.fields(module.Base)}["w"]
    layer = module.Layer(jnp.ones((2, 4)))
    assert jdc.partition_specs(layer).w == P(None, "model")
    assert statics(module.Layer) == ("n",)


CLASSES_MADE_IN_A_LOOP = """
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

def make_models():
    models = []
    for axis in ("data", "model"):
        @jdc.pytree_dataclass
        class Model:
            bias: jdc.Sharded[jax.Array, axis]
            block: BLOCK

        models.append(Model)
    axis = "neither"
    return models

models = []
for axis in ("data", "model"):
    @jdc.pytree_dataclass
    class Model:
        bias: jdc.Sharded[jax.Array, axis]
        block: BLOCK

    models.append(Model)
axis = "neither"

@jdc.pytree_dataclass
class Block:
    w: jax.Array
"""


@pytest.mark.parametrize("where", ["module", "function"])
@pytest.mark.parametrize("spelling", [*SPELLINGS, "string"])
def test_a_class_made_in_a_loop_keeps_the_names_defined_when_it_was_decorated(
    spelling: str, where: str
) -> None:
    """Issue 39: only the name undefined at decoration (`Block`) is decided at the first use;
    `axis` keeps its value from then (the whole annotation was read again after the loop:
    `bias` sharded along 'data' and `block.w` along the loop's last axis, or none).
    "string": the annotation in quotes, without the future import (read the same on 3.11)."""
    block = "jdc.Sharded[Block, axis]"
    source = CLASSES_MADE_IN_A_LOOP.replace("BLOCK", repr(block) if spelling == "string" else block)
    module = define(source, spelling)
    models = module.models if where == "module" else module.make_models()
    for model, axis in zip(models, ("data", "model"), strict=True):
        specs = jdc.partition_specs(model(jnp.ones(2), module.Block(jnp.ones(2))))
        assert (specs.bias, specs.block.w) == (P(axis), P(axis))


_AXES = st.sampled_from(["data", "model", "expert", None])


@settings(max_examples=60, deadline=None)
@given(
    first=st.lists(_AXES, min_size=1, max_size=3, unique=True),  # An axis once per array.
    later=st.lists(st.one_of(st.none(), _AXES.map(lambda axis: (axis,))), max_size=3),
    inner_later=st.booleans(),
    quoted=st.booleans(),
)
def test_oracle_a_pending_annotation_keeps_every_name_bound_at_decoration(
    first: list[str | None],
    later: list[tuple[str | None] | None],
    inner_later: bool,
    quoted: bool,
) -> None:
    """Oracle (issue 39): axis names bound when the class is decorated, then bound again
    (`later`: a new value, or none) before the first use, against the values they had at
    decoration; the array type defined before or after the class. The reference is the
    generated plan itself, not the package's reading."""
    names = [f"axis_{i}" for i in range(len(first))]
    annotation = f"jdc.Sharded[{'Later' if inner_later else 'jax.Array'}, {', '.join(names)}]"
    lines = ["import jax", "import jax_dataclasses as jdc"]
    lines += [f"{name} = {axis!r}" for name, axis in zip(names, first, strict=False)]
    written = repr(annotation) if quoted else annotation  # A string without the future import.
    lines += ["@jdc.pytree_dataclass", "class Model:", f"    w: {written}"]
    lines += [
        f"{name} = {again[0]!r}"
        for name, again in zip(names, later, strict=False)
        if again is not None
    ]
    lines.append("Later = jax.Array")
    module = define("\n".join(lines), "evaluated" if quoted else "future import")
    model = module.Model(jnp.ones((2,) * len(first)))
    assert jdc.partition_specs(model).w == P(*first)
