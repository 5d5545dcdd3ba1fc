"""Property: random nests of our classes and containers survive flatten/unflatten and jit."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Pair:
    left: Any
    right: Any
    tag: jdc.Static[str] = "pair"


@jdc.pytree_dataclass(slots=True)
class Box:
    content: Any
    size: jdc.Static[tuple[int, ...]] = ()


@jdc.pytree_dataclass(kw_only=True)
class Labelled:
    value: Any
    label: jdc.Static[int] = 0


arrays = st.builds(
    lambda shape, seed: np.random.default_rng(seed).standard_normal(shape).astype(np.float32),
    st.lists(st.integers(1, 3), max_size=2).map(tuple),
    st.integers(0, 2**16),
)
leaves = st.one_of(arrays, st.floats(-10, 10, allow_nan=False).map(np.float32), st.none())
statics = st.text("abc", max_size=3)


def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(st.text("xyz", min_size=1, max_size=2), children, max_size=3),
        st.builds(Pair, children, children, statics),
        st.builds(Box, children, st.lists(st.integers(0, 3), max_size=2).map(tuple)),
        st.builds(lambda v, n: Labelled(value=v, label=n), children, st.integers(0, 3)),
    )


trees = st.recursive(leaves, extend, max_leaves=12)


def assert_same(a: Any, b: Any) -> None:
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@settings(max_examples=60, deadline=None)
@given(trees)
def test_flatten_unflatten_round_trip(tree: Any) -> None:
    flat, treedef = jax.tree_util.tree_flatten(tree)
    rebuilt = jax.tree_util.tree_unflatten(treedef, flat)
    assert_same(rebuilt, tree)
    assert all(x is y for x, y in zip(jax.tree_util.tree_leaves(rebuilt), flat, strict=True))
    # Rebuilt objects flatten like the originals, including their cached flat form.
    assert jax.tree_util.tree_flatten(rebuilt)[1] == treedef
    keyed, _ = jax.tree_util.tree_flatten_with_path(tree)
    assert [leaf for _, leaf in keyed] == flat


@settings(max_examples=25, deadline=None)
@given(trees)
def test_jit_identity_round_trip(tree: Any) -> None:
    assert_same(jax.jit(lambda t: t)(tree), tree)
