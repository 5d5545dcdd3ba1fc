"""Hot paths of `pytree_dataclass` against `jax.tree_util.register_dataclass`, in one process.

Each node has two array children and two static fields; a model is a list of N nodes. Every
variant is timed in interleaved rounds and we report the median per node (construction: per
object), plus the ratio ours / reference. Run: `.venv/bin/python benchmarks/bench_core.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import timeit
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import jax_dataclasses as jdc
from jax_dataclasses._registry import dict_setter
from jax_dataclasses._static_values import OK_TYPES, check_static_value


@jdc.pytree_dataclass
class Ours:
    a: Any
    b: Any
    depth: jdc.Static[int]
    name: jdc.Static[str]


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


@dataclasses.dataclass(init=False, frozen=True)
class CppNode:
    """The alternative we measured and rejected: JAX's C++ dataclass node (whose unflatten calls
    the class) with the cheapest `__init__` that only sets fields and checks static values."""

    a: Any
    b: Any
    depth: int
    name: str


def _fields_only_init(self: CppNode, a: Any, b: Any, depth: int, name: str) -> None:
    if type(depth) not in OK_TYPES:
        check_static_value(CppNode, "depth", depth)
    if type(name) not in OK_TYPES:
        check_static_value(CppNode, "name", name)
    _set_dict(self, {"a": a, "b": b, "depth": depth, "name": name})


_set_dict = dict_setter(CppNode)
CppNode.__init__ = _fields_only_init  # type: ignore[method-assign]
jax.tree_util.register_dataclass(CppNode, data_fields=["a", "b"], meta_fields=["depth", "name"])


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
    return {
        "flatten": lambda: jax.tree_util.tree_flatten(model),
        "unflatten": lambda: jax.tree_util.tree_unflatten(treedef, leaves),
        "jit dispatch": lambda: apply(model),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100, 1000])
    args = parser.parse_args()
    classes: dict[str, type] = {
        "ours": Ours,
        "register_dataclass": Reference,
        "C++ node, own init": CppNode,
    }
    flax_class = _flax_class()
    if flax_class is not None:
        classes["flax.struct"] = flax_class
    print(f"jax {jax.__version__}; median of {args.rounds} interleaved rounds; ns per node")
    header = f"| {'operation':<13}| {'nodes':>5} | " + " | ".join(f"{c:>18}" for c in classes)
    print(header + " | ours / register_dataclass |")
    print("|" + "---|" * (len(classes) + 3))
    for n in args.sizes:
        ops = {name: _tree_ops(cls, n) for name, cls in classes.items()}
        number = max(1, 20_000 // n)
        for op in ("flatten", "unflatten", "jit dispatch"):
            variants = {name: ops[name][op] for name in classes}
            times = _median_ns(variants, number, args.rounds)
            per_node = {name: t / n for name, t in times.items()}
            cells = " | ".join(f"{per_node[c]:>18.0f}" for c in classes)
            ratio = times["ours"] / times["register_dataclass"]
            print(f"| {op:<13}| {n:>5} | {cells} | {ratio:>25.2f}x |")
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


if __name__ == "__main__":
    main()
