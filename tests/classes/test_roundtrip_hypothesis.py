"""Properties of every public path, on random nests of our classes, lists, tuples, dicts and
None, with shared nodes, static values and typed PRNG keys: flatten/unflatten, jit,
copy_and_mutate (against a functional rebuild), pickle, cloudpickle and flax round trips."""

from __future__ import annotations

import pickle
from typing import Any

import jax
import numpy as np
import pytest
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
keys = st.integers(0, 2**16).map(jax.random.key)
leaves = st.one_of(arrays, st.floats(-10, 10, allow_nan=False).map(np.float32), st.none(), keys)
statics = st.text("abc", max_size=3)


def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(st.text("xyz", min_size=1, max_size=2), children, max_size=3),
        st.builds(Pair, children, children, statics),
        st.builds(Box, children, st.lists(st.integers(0, 3), max_size=2).map(tuple)),
        st.builds(lambda v, n: Labelled(value=v, label=n), children, st.integers(0, 3)),
        children.map(lambda node: [node, node]),  # one object at two key paths
        children.map(lambda node: Pair(node, node)),
    )


trees = st.recursive(leaves, extend, max_leaves=12)


def values(leaf: Any) -> np.ndarray:
    dtype = getattr(leaf, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(leaf))
    return np.asarray(leaf)


def assert_same(a: Any, b: Any) -> None:
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(values(x), values(y))


@settings(max_examples=60, deadline=None)
@given(trees)
def test_flatten_unflatten_round_trip(tree: Any) -> None:
    flat, treedef = jax.tree_util.tree_flatten(tree)
    rebuilt = jax.tree_util.tree_unflatten(treedef, flat)
    assert_same(rebuilt, tree)
    assert all(x is y for x, y in zip(jax.tree_util.tree_leaves(rebuilt), flat, strict=True))
    assert jax.tree_util.tree_flatten(rebuilt)[1] == treedef
    keyed, _ = jax.tree_util.tree_flatten_with_path(tree)
    assert [leaf for _, leaf in keyed] == flat


@settings(max_examples=25, deadline=None)
@given(trees)
def test_jit_identity_round_trip(tree: Any) -> None:
    assert_same(jax.jit(lambda t: t)(tree), tree)


def _follow(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        if isinstance(key, jax.tree_util.GetAttrKey):
            tree = getattr(tree, key.name)
        elif isinstance(key, jax.tree_util.SequenceKey):
            tree = tree[key.idx]
        else:
            tree = tree[key.key]
    return tree


@settings(max_examples=60, deadline=None)
@given(trees, st.integers(0, 100), st.booleans())
def test_copy_and_mutate_matches_a_functional_rebuild(tree: Any, pick: int, validate: bool) -> None:
    """A field assigned at any depth gives the tree a functional rebuild gives. Validated: a
    value of the old structure, shapes and dtypes (every leaf replaced by a new one like it);
    not validated: anything (a string)."""
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    fields = [path for path, _ in flat if path and isinstance(path[-1], jax.tree_util.GetAttrKey)]
    before = jax.tree_util.tree_leaves(tree)
    path = fields[pick % len(fields)] if fields else None

    def new_value(old: Any) -> Any:
        return jax.tree_util.tree_map(lambda leaf: leaf.copy(), old) if validate else "new"

    with jdc.copy_and_mutate(tree, validate=validate) as copy:
        if path is not None:
            value = new_value(_follow(copy, path))
            setattr(_follow(copy, path[:-1]), path[-1].name, value)
    if path is not None:
        expected = jax.tree_util.tree_map_with_path(
            lambda p, leaf: value if p == path else leaf, tree
        )
    else:
        expected = tree
    assert jax.tree_util.tree_structure(copy) == jax.tree_util.tree_structure(expected)
    assert [id(x) for x in jax.tree_util.tree_leaves(copy)] == [
        id(x) for x in jax.tree_util.tree_leaves(expected)
    ]
    assert [id(x) for x in jax.tree_util.tree_leaves(tree)] == [id(x) for x in before]


@settings(max_examples=40, deadline=None)
@given(trees)
def test_pickle_and_cloudpickle_round_trips(tree: Any) -> None:
    assert_same(pickle.loads(pickle.dumps(tree)), tree)
    cloudpickle = pytest.importorskip("cloudpickle")
    assert_same(cloudpickle.loads(cloudpickle.dumps(tree)), tree)


@settings(max_examples=40, deadline=None)
@given(trees)
def test_flax_state_dict_round_trip(tree: Any) -> None:
    serialization = pytest.importorskip("flax.serialization")
    state = serialization.to_state_dict(tree)
    assert_same(serialization.from_state_dict(tree, state), tree)
