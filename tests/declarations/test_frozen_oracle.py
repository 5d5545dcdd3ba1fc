"""The frozen-parameters oracle: optax chains over generated models, against the same chain run
on the trainable leaves alone.

Hypothesis generates models (pytree dataclasses with `Frozen` fields, a subclass adding one,
lists, dicts, integer counters, at several depths) and, alongside each, the reference flags:
which leaves the generator put under a `Frozen` field, and which are integers. The reference is
the generator's own bookkeeping, never `jdc.trainable`. Each model is trained for a few steps
with a chain from `CHAINS` wrapped in `jdc.trainable_only` (inside or outside `MultiSteps` and
`apply_if_finite`), with large and, at one step, NaN gradients on the frozen leaves. Then every
frozen leaf is bit for bit what it was, and the trainable leaves are bit for bit what the same
chain gives run on a list of the trainable leaves alone (the reference flags pick them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jax_dataclasses as jdc

optax = pytest.importorskip("optax")

Wrap = Callable[[Any], Any]
"""`jdc.trainable_only` for the model, the identity for the reference's trainable leaves."""


@jdc.pytree_dataclass
class Block:
    w: Any
    b: Any
    name: jdc.Static[str] = "block"


@jdc.pytree_dataclass
class Buffered:
    w: Any
    stats: jdc.Frozen[Any]


@jdc.pytree_dataclass
class Deeper(Block):
    table: jdc.Frozen[Any] = None


@jdc.pytree_dataclass
class Tuned:
    head: Any
    backbone: jdc.Frozen[Any]
    step: Any


NODES: list[tuple[type, dict[str, bool]]] = [
    (Block, {"w": False, "b": False}),
    (Buffered, {"w": False, "stats": True}),
    (Deeper, {"w": False, "b": False, "table": True}),
    (Tuned, {"head": False, "backbone": True, "step": False}),
]
"""Each class, its children in field order, and whether each is declared `Frozen` (the
reference)."""

Generated = tuple[Any, list[bool | None]]
"""A tree and, per leaf in flatten order: trainable (True), frozen (False), integer (None)."""


@st.composite
def trees(draw: st.DrawFn, depth: int = 0, frozen: bool = False) -> Generated:
    kinds = ["array", "array", "int"] + (["node", "node", "list", "dict"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "array":
        shape = draw(st.sampled_from([(), (3,), (2, 3)]))
        seed = draw(st.integers(0, 2**16))
        value = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
        return jnp.asarray(value), [not frozen]
    if kind == "int":
        return jnp.asarray(draw(st.integers(0, 9)), jnp.int32), [None]
    if kind == "node":
        cls, declared = draw(st.sampled_from(NODES))
        parts = {name: draw(trees(depth + 1, frozen or f)) for name, f in declared.items()}
        flags = [flag for _, part in parts.values() for flag in part]
        return cls(**{name: tree for name, (tree, _) in parts.items()}), flags
    parts = [draw(trees(depth + 1, frozen)) for _ in range(draw(st.integers(1, 3)))]
    flags = [flag for _, part in parts for flag in part]
    if kind == "list":
        return [tree for tree, _ in parts], flags
    return {f"k{i}": tree for i, (tree, _) in enumerate(parts)}, flags  # keys in sorted order


@st.composite
def models(draw: st.DrawFn) -> Generated:
    """A model with a trainable array, a frozen part and a counter at its root."""
    (first, first_flags), (rest, rest_flags) = draw(trees(2)), draw(trees(0))
    head = [jnp.linspace(-1.0, 1.0, 4), first, rest]
    backbone, backbone_flags = draw(trees(1, frozen=True))
    model = Tuned(head, backbone, jnp.zeros((), jnp.int32))
    return model, [True, *first_flags, *rest_flags, *backbone_flags, None]


def by_rank(tree: Any) -> Any:
    return jax.tree.map(lambda leaf: leaf.ndim >= 2, tree)


def labels_by_rank(tree: Any) -> Any:
    return jax.tree.map(lambda leaf: "matrix" if leaf.ndim >= 2 else "vector", tree)


CHAINS: dict[str, Callable[[Wrap], Any]] = {
    "adamw": lambda wrap: wrap(optax.adamw(1e-2, weight_decay=0.1)),
    "clip, adamw, schedule": lambda wrap: wrap(
        optax.chain(
            optax.clip_by_global_norm(0.05),
            optax.adamw(optax.linear_schedule(1e-2, 1e-3, 4), weight_decay=0.1),
        )
    ),
    "masked decay, momentum": lambda wrap: wrap(
        optax.chain(optax.masked(optax.add_decayed_weights(0.1), by_rank), optax.sgd(0.1, 0.9))
    ),
    "multi_transform, cosine": lambda wrap: wrap(
        optax.multi_transform(
            {
                "matrix": optax.adam(optax.cosine_decay_schedule(1e-2, 5)),
                "vector": optax.chain(optax.clip(0.5), optax.sgd(0.1)),
            },
            labels_by_rank,
        )
    ),
    "MultiSteps inside": lambda wrap: wrap(
        optax.MultiSteps(optax.adam(1e-2), every_k_schedule=2).gradient_transformation()
    ),
    "MultiSteps outside": lambda wrap: optax.MultiSteps(
        wrap(optax.chain(optax.clip_by_global_norm(0.1), optax.adam(1e-2))), every_k_schedule=2
    ).gradient_transformation(),
    "apply_if_finite inside": lambda wrap: wrap(
        optax.apply_if_finite(optax.chain(optax.clip_by_global_norm(0.1), optax.sgd(0.1)), 3)
    ),
    "apply_if_finite outside": lambda wrap: optax.apply_if_finite(
        wrap(optax.chain(optax.clip_by_global_norm(0.1), optax.adamw(1e-2))), 3
    ),
}
SEES_FROZEN = {"apply_if_finite outside"}
"""Chains whose outermost transformation is given the frozen leaves' gradients, by the user's
choice: `apply_if_finite` outside `trainable_only` skips a step for a NaN in any of them (put it
inside). Their frozen gradients stay finite here."""
COND = {"MultiSteps inside", "MultiSteps outside", "apply_if_finite inside",
        "apply_if_finite outside"}  # fmt: skip
"""Chains with a `lax.cond`, which compiles at every call outside `jax.jit`: their step is
jitted (one compilation per example, for the model and the reference alike)."""
STEPS = 4


def gradient(leaf: jax.Array, step: int) -> jax.Array:
    """A gradient for a trainable leaf that depends on its value and the step only."""
    return jnp.sin(leaf * (step + 1)) + 0.5 * jnp.cos(3.0 * leaf)


def model_gradients(model: Any, flags: list[bool | None], step: int, nan_at: int) -> Any:
    """The model's gradients: the trainable leaves' as `gradient`; the frozen ones large, and
    NaN at step `nan_at` (neither may reach a trainable leaf); ones for integers."""

    def one(leaf: jax.Array, flag: bool | None) -> jax.Array:
        if flag is None:
            return jnp.ones_like(leaf)
        if flag:
            return gradient(leaf, step)
        return jnp.full_like(leaf, jnp.nan) if step == nan_at else 1e3 * gradient(leaf, step)

    leaves, treedef = jax.tree.flatten(model)
    return treedef.unflatten([one(leaf, flag) for leaf, flag in zip(leaves, flags, strict=True)])


def train(tx: Any, params: Any, grads_at: Callable[[Any, int], Any], jit: bool) -> Any:
    def step(params: Any, state: Any, grads: Any) -> tuple[Any, Any]:
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    state, run = tx.init(params), jax.jit(step) if jit else step
    for index in range(STEPS):
        params, state = run(params, state, grads_at(params, index))
    return params


def bits(leaves: list[Any]) -> list[bytes]:
    return [np.asarray(leaf).tobytes() for leaf in leaves]


OLD_OPTAX = tuple(int(part) for part in optax.__version__.split(".")[:3]) < (0, 2, 8)
"""optax 0.2.4 (the oldest corner's) fails in `MultiSteps`' `lax.cond` ("true_fun and false_fun
output must have identical types") with `jdc.trainable_only` inside it; 0.2.8 runs it."""
RUN = sorted(c for c in CHAINS if not (OLD_OPTAX and c == "MultiSteps outside"))


@settings(max_examples=30, deadline=None)
@given(models(), st.sampled_from(RUN), st.integers(0, STEPS))
def test_frozen_leaves_stay_and_trainable_ones_move_as_the_chain_on_them_alone(
    generated: Generated, chain: str, nan_at: int
) -> None:
    model, flags = generated
    assert len(flags) == len(jax.tree.leaves(model))  # The generator's bookkeeping.
    nan_at = STEPS if chain in SEES_FROZEN else nan_at
    trained = train(
        CHAINS[chain](jdc.trainable_only),
        model,
        lambda params, step: model_gradients(params, flags, step, nan_at),
        chain in COND,
    )
    alone = train(
        CHAINS[chain](lambda tx: tx),
        [leaf for leaf, flag in zip(jax.tree.leaves(model), flags, strict=True) if flag],
        lambda params, step: [gradient(leaf, step) for leaf in params],
        chain in COND,
    )
    before, after = bits(jax.tree.leaves(model)), bits(jax.tree.leaves(trained))
    assert [a for a, b, f in zip(after, before, flags, strict=True) if not f] == [
        b for b, f in zip(before, flags, strict=True) if not f
    ], "a frozen or integer leaf moved"
    assert [a for a, f in zip(after, flags, strict=True) if f] == bits(alone), (
        "a trainable leaf differs from the chain run on the trainable leaves alone"
    )
