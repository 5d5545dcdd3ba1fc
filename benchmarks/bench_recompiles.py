"""What `explain_recompiles` costs on a large tree, against plain `jax.jit` (issue 38, item 5).

The argument is a list of pytree_dataclass nodes (two array children and one static field
each: `--leaves` leaves in all). Each round makes a fresh function (JAX's caches belong to the
Python function) and times, for `jax.jit(f)` and `jdc.explain_recompiles(jax.jit(f))` in
turn (ABBA): the first call (trace and compile), a recompiling call (one leaf's shape changed)
and a call that reuses the compilation; and `jdc.jit_diff` of the two trees on its own. We
report median milliseconds and the median per-round ratio explained / plain.
Run: `.venv/bin/python benchmarks/bench_recompiles.py`.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Node:
    weight: jax.Array
    bias: jax.Array
    name: jdc.Static[str] = "node"


def tree(leaves: int, width: int = 2) -> list[Node]:
    """`leaves` leaves: the first node's weight is `width` wide."""
    nodes = [Node(jnp.ones(2), jnp.ones(2)) for _ in range(leaves // 2)]
    nodes[0] = Node(jnp.ones(width), jnp.ones(2))
    return nodes


def fresh() -> Callable[[list[Node]], jax.Array]:
    """A new function each time, so that no cache of JAX's knows it."""

    def first_weight(nodes: list[Node]) -> jax.Array:
        return nodes[0].weight * 2

    return first_weight


def _timed(function: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    jax.block_until_ready(function(*args))
    return (time.perf_counter() - start) * 1e3


def one_round(before: list[Node], after: list[Node]) -> dict[str, tuple[float, float]]:
    """(plain, explained) milliseconds for each call, ABBA within the round."""
    found: dict[str, list[float]] = {"first call": [0, 0], "recompiling call": [0, 0]}
    found["call that reuses it"] = [0, 0]
    for index in (0, 1, 1, 0):
        jitted: Any = jax.jit(fresh())
        if index:
            jitted = jdc.explain_recompiles(jitted)
        found["first call"][index] += _timed(jitted, before)
        found["recompiling call"][index] += _timed(jitted, after)
        found["call that reuses it"][index] += _timed(jitted, after)
    return {name: (plain / 2, explained / 2) for name, (plain, explained) in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--leaves", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    before, after = tree(args.leaves), tree(args.leaves, width=3)
    warnings.simplefilter("ignore", jdc.RecompileWarning)
    one_round(before, after)  # Warm up JAX's own first-use costs.
    rounds = [one_round(before, after) for _ in range(args.rounds)]
    print(f"{args.leaves} leaves, {args.rounds} rounds (median ms; ratio explained / plain)")
    for name in rounds[0]:
        plain = statistics.median(r[name][0] for r in rounds)
        explained = statistics.median(r[name][1] for r in rounds)
        ratio = statistics.median(r[name][1] / r[name][0] for r in rounds)
        print(f"  {name:<22} plain {plain:9.2f}  explained {explained:9.2f}  ratio {ratio:5.2f}x")
    diffs = [_timed(jdc.jit_diff, before, after) for _ in range(args.rounds)]
    print(f"  {'jdc.jit_diff':<22} {statistics.median(diffs):9.2f} ms")


if __name__ == "__main__":
    main()
