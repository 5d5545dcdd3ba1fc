"""Changing one leaf deep in a model: `copy_and_mutate` against the other ways, in one process.

The model is a list of N layers; each layer is six pytree dataclasses (a block, an attention
projection, an MLP with two linear layers, a norm) with eight array leaves and one static
field. Every variant changes `layers[N // 2].mlp.fc1.w`:

- `tree_map`: `jax.tree.map(lambda x: x, model)`, the reference (it changes nothing);
- `cm validate`, `cm no-validate`: `with jdc.copy_and_mutate(model, validate=...) as m:`;
- `replace`: a hand-written functional rebuild of the path with `jdc.replace`;
- `flatten-modify-unflatten`: `tree_flatten`, replace one leaf, `tree_unflatten`.

Variants run in interleaved rounds; we report the median CPU time per call in microseconds
(thread CPU time, so that other jobs on a loaded machine count less) and the ratios. Target (issue 3): `cm validate` at most 2x `tree_map`.
Run: `.venv/bin/python benchmarks/bench_copy_and_mutate.py`.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
import timeit
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Linear:
    w: jax.Array
    b: jax.Array


@jdc.pytree_dataclass
class MLP:
    fc1: Linear
    fc2: Linear


@jdc.pytree_dataclass
class Norm:
    scale: jax.Array
    bias: jax.Array


@jdc.pytree_dataclass
class Layer:
    attn: Linear
    mlp: MLP
    norm: Norm
    width: jdc.Static[int]


@jdc.pytree_dataclass
class Model:
    layers: list[Layer]
    name: jdc.Static[str] = "model"


def make_model(n: int, width: int = 4) -> Model:
    def linear() -> Linear:
        return Linear(jnp.ones((width, width)), jnp.zeros(width))

    layers = [
        Layer(linear(), MLP(linear(), linear()), Norm(jnp.ones(width), jnp.zeros(width)), width)
        for _ in range(n)
    ]
    return Model(layers)


def variants(model: Model, new: jax.Array) -> dict[str, Callable[[], Any]]:
    k = len(model.layers) // 2
    target = model.layers[k].mlp.fc1.w
    leaves = jax.tree_util.tree_leaves(model)
    index = next(i for i, leaf in enumerate(leaves) if leaf is target)

    def cm_validate() -> Model:
        with jdc.copy_and_mutate(model) as m:
            m.layers[k].mlp.fc1.w = new
        return m

    def cm_no_validate() -> Model:
        with jdc.copy_and_mutate(model, validate=False) as m:
            m.layers[k].mlp.fc1.w = new
        return m

    def replace() -> Model:
        layer = model.layers[k]
        fc1 = jdc.replace(layer.mlp.fc1, w=new)
        layers = list(model.layers)
        layers[k] = jdc.replace(layer, mlp=jdc.replace(layer.mlp, fc1=fc1))
        return jdc.replace(model, layers=layers)

    def flatten_modify_unflatten() -> Model:
        flat, structure = jax.tree_util.tree_flatten(model)
        flat[index] = new
        result: Model = jax.tree_util.tree_unflatten(structure, flat)
        return result

    return {
        "tree_map": lambda: jax.tree.map(lambda x: x, model),
        "cm validate": cm_validate,
        "cm no-validate": cm_no_validate,
        "replace": replace,
        "flatten-modify-unflatten": flatten_modify_unflatten,
    }


def check(model: Model, new: jax.Array, runs: dict[str, Callable[[], Any]]) -> None:
    """Every variant that edits must produce the same tree; the original must not change."""
    before = jax.tree_util.tree_leaves(model)
    expected = runs["replace"]()
    for name in ("cm validate", "cm no-validate", "flatten-modify-unflatten"):
        got = runs[name]()
        same = jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
        pairs = zip(
            jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected), strict=same
        )
        if not same or not all(a is b for a, b in pairs):
            raise RuntimeError(f"{name} does not match the functional rebuild")
    if not all(a is b for a, b in zip(jax.tree_util.tree_leaves(model), before, strict=True)):
        raise RuntimeError("the original model changed")
    if not any(leaf is new for leaf in jax.tree_util.tree_leaves(expected)):
        raise RuntimeError("the rebuild lost the new leaf")


def median_us(runs: dict[str, Callable[[], Any]], number: int, rounds: int) -> dict[str, float]:
    """Median over rounds of the CPU time per call; each round runs every variant in turn.

    CPU time of this thread (not wall time), so that other jobs on a loaded machine do not
    count; garbage is collected before each round, so that no variant pays for another's.
    """
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        gc.collect()
        for name, run in runs.items():
            timer = timeit.Timer(run, timer=time.thread_time)
            samples[name].append(timer.timeit(number=number) / number * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    args = parser.parse_args()
    print(
        f"jax {jax.__version__}, Python {platform.python_version()}; median of {args.rounds} "
        "interleaved rounds; CPU microseconds per call"
    )
    names = ["tree_map", "cm validate", "cm no-validate", "replace", "flatten-modify-unflatten"]
    print("| layers | " + " | ".join(names) + " | cm validate / tree_map |")
    print("|" + "---|" * (len(names) + 2))
    ratios: list[str] = []
    for n in args.sizes:
        model = make_model(n)
        new = jnp.full((4, 4), 2.0)
        runs = variants(model, new)
        check(model, new, runs)
        times = median_us(runs, max(1, 500 // n), args.rounds)
        cells = " | ".join(f"{times[name]:.1f}" for name in names)
        ratio = times["cm validate"] / times["tree_map"]
        print(f"| {n} | {cells} | {ratio:.2f}x |")
        ratios.append(
            f"{n} layers: cm validate / replace {times['cm validate'] / times['replace']:.2f}x, "
            f"/ flatten-modify-unflatten "
            f"{times['cm validate'] / times['flatten-modify-unflatten']:.2f}x, "
            f"cm no-validate / tree_map {times['cm no-validate'] / times['tree_map']:.2f}x"
        )
    print()
    for line in ratios:
        print(line)
    construction_in_open_blocks(args.rounds)
    nested_blocks(args.rounds)
    replaced_items(args.rounds)


@jdc.pytree_dataclass
class OwnInit:
    """A class with its own `__init__`, which runs with a permission to assign its fields."""

    x: jax.Array

    def __init__(self, x: jax.Array) -> None:
        self.x = x


def construction_in_open_blocks(rounds: int) -> None:
    """Constructing objects while a block over a large model is open costs what it costs
    outside (the construction permission does not copy the block's)."""
    leaf = jnp.ones(1)
    model = make_model(3_500)  # about 21,000 pytree dataclasses

    def build() -> object:
        return [OwnInit(leaf) for _ in range(1_000)]

    outside = median_us({"outside": build}, 1, rounds)["outside"]
    with jdc.copy_and_mutate(model):
        inside = median_us({"inside": build}, 1, rounds)["inside"]
    print(
        f"\n1,000 constructions of a class with its own __init__: {outside:.0f} us outside any "
        f"block, {inside:.0f} us inside a block over a model of 3,500 layers "
        f"(ratio {inside / outside:.2f}x)"
    )


def nested_blocks(rounds: int) -> None:
    """A helper that returns an edited copy of one layer, called for 100 layers inside an outer
    block over a large model, against the same calls outside any block: a nested block should
    cost what its own copy costs, whatever the outer block's size (issue 19's cliff)."""
    model = make_model(16_000)  # about 96,000 pytree dataclasses
    new = jnp.full((4, 4), 2.0)

    def edited(layer: Layer) -> Layer:
        with jdc.copy_and_mutate(layer) as copy:
            copy.mlp.fc1.w = new
        return copy

    def calls(layers: list[Layer]) -> object:
        return [edited(layer) for layer in layers[:100]]

    outside = median_us({"outside": lambda: calls(model.layers)}, 1, rounds)["outside"]
    with jdc.copy_and_mutate(model) as outer:
        inside = median_us({"inside": lambda: calls(outer.layers)}, 1, rounds)["inside"]
    print(
        f"100 nested blocks (one layer each): {outside:.0f} us outside any block, {inside:.0f} us "
        f"inside a block over a model of 16,000 layers (ratio {inside / outside:.2f}x)"
    )


@jdc.pytree_dataclass
class Stage:
    """A layer holding its sub-modules in a list (the case whose check was quadratic)."""

    parts: list[Linear]


def replaced_items(rounds: int) -> None:
    """Replacing one list item in each of K layers inside a validated block
    (`stages[i].parts[0] = ...`), against the same number of field assignments
    (`stages[i].parts[0].w = ...`): the end-of-block check is linear in the size of the copy,
    so the time per replaced item stays flat as K grows (issue 26 item 5: it searched the
    copy once per replaced item, 0.77 s for 1,000)."""
    print("\n| replaced items K | list items replaced (ms) | fields assigned (ms) | us per item |")
    print("|---|---|---|---|")
    new_w = jnp.full((4, 4), 2.0)

    def linear() -> Linear:
        return Linear(jnp.zeros((4, 4)), jnp.zeros(4))

    for k in (10, 100, 1_000, 10_000):
        stages = [Stage([linear()]) for _ in range(k)]
        fresh = [linear() for _ in range(k)]

        def replace_items(stages: list[Stage] = stages, fresh: list[Linear] = fresh) -> object:
            with jdc.copy_and_mutate(stages) as copy:
                for stage, part in zip(copy, fresh, strict=True):
                    stage.parts[0] = part
            return copy

        def assign_fields(stages: list[Stage] = stages) -> object:
            with jdc.copy_and_mutate(stages) as copy:
                for stage in copy:
                    stage.parts[0].w = new_w
            return copy

        runs = {"items": replace_items, "fields": assign_fields}
        times = median_us(runs, 1, max(3, rounds // (1 + k // 1_000)))
        print(
            f"| {k:,} | {times['items'] / 1e3:.1f} | {times['fields'] / 1e3:.1f} | "
            f"{times['items'] / k:.1f} |"
        )


if __name__ == "__main__":
    main()
