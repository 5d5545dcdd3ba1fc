"""Dispatch cost of `jdc.jit` against `jax.jit(static_argnames=...)` on the same function, and
with `explain_recompiles` on (a wrapper around it).

The argument is a model of N pytree_dataclass nodes (two array children, one static field
each) plus one `Static[int]`. Both variants are compiled first, then timed in interleaved ABBA
rounds; we report the median microseconds per call and the median per-round ratio ours / jax.jit.
Run: `.venv/bin/python benchmarks/bench_jit.py`.
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Node:
    weight: jax.Array
    bias: jax.Array
    name: jdc.Static[str] = "node"


@jdc.pytree_dataclass
class Model:
    nodes: list[Node]

    def forward(self, power: jdc.Static[int]) -> jax.Array:
        return self.nodes[0].weight ** power

    forward_ours = jdc.jit(forward)
    forward_jax = jax.jit(forward, static_argnames="power")


def forward(model: Model, power: jdc.Static[int]) -> jax.Array:
    return model.nodes[0].weight ** power


def _paired(
    ours: Callable[[], object], reference: Callable[[], object], number: int, rounds: int
) -> tuple[float, float, float]:
    """Median us/call of each, and the median per-round ratio. Each round runs ours, reference,
    reference, ours (ABBA), so drifting machine load cancels out of the ratio."""
    ours_us: list[float] = []
    reference_us: list[float] = []
    ratios: list[float] = []
    for _ in range(rounds):
        a1 = timeit.timeit(ours, number=number)
        b1 = timeit.timeit(reference, number=number)
        b2 = timeit.timeit(reference, number=number)
        a2 = timeit.timeit(ours, number=number)
        ours_us.append((a1 + a2) / (2 * number) * 1e6)
        reference_us.append((b1 + b2) / (2 * number) * 1e6)
        ratios.append((a1 + a2) / (b1 + b2))
    return statistics.median(ours_us), statistics.median(reference_us), statistics.median(ratios)


def _cases(model: Model) -> dict[str, dict[str, Callable[[], object]]]:
    ours: Any = jdc.jit(forward)
    reference: Any = jax.jit(forward, static_argnames="power")
    control: Any = jax.jit(forward, static_argnames="power")
    explained: Any = jdc.jit(forward, explain_recompiles="warn")
    same = (ours._jit_info.static_argnums, ours._jit_info.static_argnames) == (
        reference._jit_info.static_argnums,
        reference._jit_info.static_argnames,
    )
    print(f"same type: {type(ours) is type(reference)}; same static arguments: {same}")
    cases: dict[str, dict[str, Callable[[], object]]] = {
        "control: a second jax.jit (noise floor)": {
            "ours": lambda: control(model, 2),
            "jax.jit": lambda: reference(model, 2),
        },
        "function, static by position": {
            "ours": lambda: ours(model, 2),
            "jax.jit": lambda: reference(model, 2),
        },
        "function, static by keyword": {
            "ours": lambda: ours(model, power=2),
            "jax.jit": lambda: reference(model, power=2),
        },
        "method": {
            "ours": lambda: model.forward_ours(2),
            "jax.jit": lambda: model.forward_jax(2),
        },
        "explain_recompiles on, static by position (a cache hit)": {
            "ours": lambda: explained(model, 2),
            "jax.jit": lambda: reference(model, 2),
        },
    }
    for variants in cases.values():
        for run in variants.values():
            jax.block_until_ready(run())  # Compile before timing.
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=101)
    parser.add_argument("--number", type=int, default=100, help="calls per timed sample")
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    leaf = np.ones(3, np.float32)
    model = Model([Node(leaf, leaf) for _ in range(args.nodes)])
    print(
        f"jax {jax.__version__}; {args.nodes}-node model; median of {args.rounds} ABBA rounds "
        f"of {args.number} calls; microseconds per call"
    )
    cases = _cases(model)
    print("| call | jdc.jit | jax.jit(static_argnames=...) | ours / jax.jit |")
    print("|---|---|---|---|")
    for case, variants in cases.items():
        ours, reference, ratio = _paired(
            variants["ours"], variants["jax.jit"], args.number, args.rounds
        )
        print(f"| {case} | {ours:.1f} | {reference:.1f} | {ratio:.3f}x |")


if __name__ == "__main__":
    main()
