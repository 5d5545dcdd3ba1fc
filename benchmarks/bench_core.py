"""Hot paths of `pytree_dataclass` against `jax.tree_util.register_dataclass`, in one process.

Each node has two array children and two static fields; a model is a list of N nodes. Every
variant is timed in interleaved rounds and we report the median per node (construction: per
object), plus the ratio ours / reference. Two of our classes are measured: a plain one (which
gets JAX's C++ dataclass node) and one with a `__post_init__` (which gets the generated Python
node, since unflatten must not run `__post_init__`). Memory is the traced allocation per
instance. Only public API is used, so the script also measures other versions of the package
(`PYTHONPATH=<checkout> python benchmarks/bench_core.py`).

Run: `.venv/bin/python benchmarks/bench_core.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import timeit
import tracemalloc
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Ours:
    a: Any
    b: Any
    depth: jdc.Static[int]
    name: jdc.Static[str]


@jdc.pytree_dataclass
class OursPostInit:
    a: Any
    b: Any
    depth: jdc.Static[int]
    name: jdc.Static[str]

    def __post_init__(self) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class Plain:
    a: Any
    b: Any
    depth: int
    name: str


@dataclasses.dataclass(frozen=True)
class Reference:
    a: Any
    b: Any
    depth: int
    name: str


jax.tree_util.register_dataclass(Reference, data_fields=["a", "b"], meta_fields=["depth", "name"])


def _flax_class() -> type | None:
    try:
        from flax import struct
    except ImportError:
        return None

    @struct.dataclass
    class Flax:
        a: Any
        b: Any
        depth: int = struct.field(pytree_node=False)
        name: str = struct.field(pytree_node=False)

    return Flax


def _median_ns(
    variants: dict[str, Callable[[], object]], number: int, rounds: int
) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            samples[name].append(timeit.timeit(run, number=number) / number * 1e9)
    return {name: statistics.median(values) for name, values in samples.items()}


def _tree_ops(cls: type, n: int) -> dict[str, Callable[[], object]]:
    leaf = np.ones(3, np.float32)
    model = [cls(leaf, leaf, 1, "node") for _ in range(n)]
    leaves, treedef = jax.tree_util.tree_flatten(model)
    apply = jax.jit(lambda m: m[0].a)
    apply(model)  # compile

    def round_trip() -> object:
        flat, structure = jax.tree_util.tree_flatten(model)
        return jax.tree_util.tree_unflatten(structure, flat)

    return {
        "flatten": lambda: jax.tree_util.tree_flatten(model),
        "unflatten": lambda: jax.tree_util.tree_unflatten(treedef, leaves),
        "round trip": round_trip,
        "jit dispatch": lambda: apply(model),
    }


def _bytes_per_instance(make: Callable[[], object], count: int = 20_000) -> float:
    make()
    gc.collect()
    tracemalloc.start()
    objects = [make() for _ in range(count)]
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del objects
    list_bytes = 56 + 8 * count  # The list holding them (approximately).
    return (size - list_bytes) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100, 1000])
    args = parser.parse_args()
    classes: dict[str, type] = {
        "ours": Ours,
        "ours, __post_init__": OursPostInit,
        "register_dataclass": Reference,
    }
    flax_class = _flax_class()
    if flax_class is not None:
        classes["flax.struct"] = flax_class
    print(f"jax {jax.__version__}; median of {args.rounds} interleaved rounds; ns per node")
    header = f"| {'operation':<13}| {'nodes':>5} | " + " | ".join(f"{c:>19}" for c in classes)
    print(header + " | ours / ref | ours, __post_init__ / ref |")
    print("|" + "---|" * (len(classes) + 4))
    for n in args.sizes:
        ops = {name: _tree_ops(cls, n) for name, cls in classes.items()}
        number = max(1, 20_000 // n)
        for op in ("flatten", "unflatten", "round trip", "jit dispatch"):
            variants = {name: ops[name][op] for name in classes}
            times = _median_ns(variants, number, args.rounds)
            per_node = {name: t / n for name, t in times.items()}
            cells = " | ".join(f"{per_node[c]:>19.0f}" for c in classes)
            reference = times["register_dataclass"]
            ratio = times["ours"] / reference
            post_init_ratio = times["ours, __post_init__"] / reference
            print(f"| {op:<13}| {n:>5} | {cells} | {ratio:>9.2f}x | {post_init_ratio:>23.2f}x |")
    leaf = np.ones(3, np.float32)
    build = {
        "ours": lambda: Ours(leaf, leaf, 1, "node"),
        "plain frozen dataclass": lambda: Plain(leaf, leaf, 1, "node"),
    }
    times = _median_ns(build, 20_000, args.rounds)
    print(
        f"\nconstruction: ours {times['ours']:.0f} ns, plain frozen dataclass "
        f"{times['plain frozen dataclass']:.0f} ns, "
        f"ratio {times['ours'] / times['plain frozen dataclass']:.2f}x"
    )
    memory = {name: _bytes_per_instance(make) for name, make in build.items()}
    print(
        f"memory per instance: ours {memory['ours']:.0f} B, plain frozen dataclass "
        f"{memory['plain frozen dataclass']:.0f} B, "
        f"ratio {memory['ours'] / memory['plain frozen dataclass']:.2f}x"
    )


if __name__ == "__main__":
    main()
