"""What `explain_recompiles` costs on a large tree, against plain `jax.jit` (issue 38, item 5).

The argument is a list of pytree_dataclass nodes (two array children and one static field
each: `--leaves` leaves in all). Each round makes a fresh function (JAX's caches belong to the
Python function) and times, for `jax.jit(f)` and `jdc.explain_recompiles(jax.jit(f))` in
turn, with a second plain `jax.jit(f)` as the control (ABCCBA): the first call (trace and
compile), a recompiling call (one leaf's shape changed) and a call that reuses the
compilation; and `jdc.jit_diff` of the two trees on its own. We report median milliseconds and
the median per-round ratios explained / plain and control / plain (the control's distance from
1.00x is the noise floor).
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


CALLS = ("first call", "recompiling call", "call that reuses it")


def one_round(before: list[Node], after: list[Node]) -> dict[str, list[float]]:
    """(plain, explained, control) milliseconds for each call, ABCCBA within the round."""
    found = {name: [0.0, 0.0, 0.0] for name in CALLS}
    for index in (0, 1, 2, 2, 1, 0):
        jitted: Any = jax.jit(fresh())
        if index == 1:
            jitted = jdc.explain_recompiles(jitted)
        for name, tree_ in zip(CALLS, (before, after, after), strict=True):
            found[name][index] += _timed(jitted, tree_) / 2
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--leaves", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    before, after = tree(args.leaves), tree(args.leaves, width=3)
    warnings.simplefilter("ignore", jdc.RecompileWarning)
    one_round(before, after)  # Warm up JAX's own first-use costs.
    rounds = [one_round(before, after) for _ in range(args.rounds)]
    print(f"{args.leaves} leaves, {args.rounds} rounds (median ms; ratios to plain)")
    for name in CALLS:
        plain, explained, _ = (statistics.median(r[name][i] for r in rounds) for i in range(3))
        ratio, control = (
            statistics.median(r[name][i] / r[name][0] for r in rounds) for i in (1, 2)
        )
        print(
            f"  {name:<22} plain {plain:9.2f}  explained {explained:9.2f}  ratio {ratio:5.2f}x"
            f"  control {control:5.2f}x"
        )
    diffs = [_timed(jdc.jit_diff, before, after) for _ in range(args.rounds)]
    print(f"  {'jdc.jit_diff':<22} {statistics.median(diffs):9.2f} ms")


if __name__ == "__main__":
    main()
