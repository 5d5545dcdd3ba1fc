# ruff reads the axis names in Sharded[...] as forward references (docs/design/sharding.md).
# ruff: noqa: F821
"""`jdc.partition_specs` and `jdc.shardings` on models of 10 to 10,000 leaves, in one process.

The model is a list of layers, each two `Linear`s (a declared `w` and `b`) and an undeclared
scale: 5 leaves per layer, three nested dataclasses. The reference is `jax.tree.map` giving
every leaf the same `PartitionSpec` (what a tree without declarations costs); the rows show
the time per leaf, flat when the walk is linear. Reading the declarations of a class (once per
call and class, never cached: docs/design/sharding.md) is timed on its own, to show what a cache
would save. Run: `.venv/bin/python benchmarks/bench_sharding.py`.
"""

import argparse
import statistics
import timeit
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import jax_dataclasses as jdc
from jax_dataclasses._sharding_layouts.vocabulary import class_declarations

RULES = {"embed": None, "mlp": "model"}


@jdc.pytree_dataclass
class Linear:
    w: jdc.Sharded[jax.Array, "embed", "mlp"]
    b: jdc.Sharded[jax.Array, "mlp"]


@jdc.pytree_dataclass
class Layer:
    attn: Linear
    mlp: Linear
    scale: jax.Array


def model(leaves: int) -> list[Layer]:
    w, b, scale = jnp.ones((8, 8)), jnp.zeros(8), jnp.ones(())
    return [Layer(Linear(w, b), Linear(w, b), scale) for _ in range(leaves // 5)]


def best_of(call: Callable[[], object], rounds: int) -> float:
    """Median over rounds of the best of 3 timings of one call, in seconds."""
    timer = timeit.Timer(call)
    return statistics.median(min(timer.repeat(repeat=3, number=1)) for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    args = parser.parse_args()
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    print(f"jax {jax.__version__}; median over {args.rounds} rounds, best of 3 each")
    print("| leaves | partition_specs µs/leaf | shardings µs/leaf | tree.map µs/leaf | ratio |")
    print("|---|---|---|---|---|")
    for size in args.sizes:
        tree = model(size)
        specs = best_of(lambda tree=tree: jdc.partition_specs(tree, RULES), args.rounds)
        placed = best_of(lambda tree=tree: jdc.shardings(tree, mesh, RULES), args.rounds)
        plain = best_of(lambda tree=tree: jax.tree.map(lambda _: P(), tree), args.rounds)
        per_leaf = [1e6 * t / size for t in (specs, placed, plain)]
        print(
            f"| {size} | {per_leaf[0]:.2f} | {per_leaf[1]:.2f} | {per_leaf[2]:.2f} | "
            f"{specs / plain:.1f}x |"
        )
    reading = best_of(lambda: [class_declarations(cls) for cls in (Linear, Layer)], args.rounds)
    print(f"\nreading the declarations of both classes (once per call): {1e6 * reading:.1f} µs")


if __name__ == "__main__":
    main()
