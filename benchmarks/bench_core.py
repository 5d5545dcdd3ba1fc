"""Hot paths of `pytree_dataclass` against `jax.tree_util.register_dataclass`, in one process.

The model is a list of N `Layer(w, b, name: Static[str])`. Our class and the reference (a
frozen dataclass registered with `register_dataclass`, whose nodes are JAX's C++ dataclass
nodes) run the same operations in interleaved rounds; each round times every variant several
times and keeps the minimum (the run least disturbed by other work), and a row reports the
median over rounds of the per-round ratio ours / reference. The control row times a second,
identical reference class against the first: its distance from 1.00x is the noise floor.

Also measured: construction against a plain frozen dataclass, decorating a class against
`dataclass(frozen=True)` + `register_dataclass`, decorating a recursive class (its annotations
name it, as strings) and using it once likewise, memory per instance, class creation after
thousands of classes of the same name (the median of the last 200 of 4,000 against that of
the first 200), and the import time of jax_dataclasses over `import jax`. Nested
`copy_and_mutate` blocks and validation are in `bench_copy_and_mutate.py`.

Only public API is used, so other versions of the package can be measured
(`PYTHONPATH=<checkout> python benchmarks/bench_core.py`). `--json PATH` writes the ratios for
`python3 dev.py bench --check`; `--quick` is the short version it runs.

Run: `.venv/bin/python benchmarks/bench_core.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import tracemalloc
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import jax_dataclasses as jdc

TARGETS = {
    "flatten": 1.3,
    "unflatten": 0.5,
    "round trip": 0.75,
    "keyed flatten": 1.3,
    "jit, model in": 1.1,
    "jit, model in and out": 0.9,
    "construction": 1.0,
    "decoration": 1.5,
    "recursive class, decoration + first use": 1.5,
    "memory per instance": 1.0,
    "class creation, last 200 / first 200": 1.2,
}
"""The targets of issue 19 (docs/design/core.md), as ratios; printed, never gated on."""


@jdc.pytree_dataclass
class Layer:
    w: Any
    b: Any
    name: jdc.Static[str]


def _reference_class() -> type:
    @dataclasses.dataclass(frozen=True)
    class Reference:
        w: Any
        b: Any
        name: str

    jax.tree_util.register_dataclass(Reference, data_fields=["w", "b"], meta_fields=["name"])
    return Reference


Reference = _reference_class()
Twin = _reference_class()  # The control: identical to Reference.


@dataclasses.dataclass(frozen=True)
class Plain:
    w: Any
    b: Any
    name: str


Timings = dict[str, list[float]]


def rounds_of(variants: dict[str, Callable[[], object]], number: int, rounds: int) -> Timings:
    """Seconds per call of each variant, one sample per round: the minimum of 5 timings."""
    samples: Timings = {name: [] for name in variants}
    for _ in range(rounds):
        gc.collect()
        for name, run in variants.items():
            samples[name].append(min(timeit.repeat(run, number=number, repeat=5)) / number)
    return samples


def median_ratio(samples: Timings, numerator: str, denominator: str) -> float:
    pairs = zip(samples[numerator], samples[denominator], strict=True)
    return statistics.median(a / b for a, b in pairs)


def tree_operations(cls: type, n: int) -> dict[str, Callable[[], object]]:
    leaf = np.ones(3, np.float32)
    model = [cls(leaf, leaf, "layer") for _ in range(n)]
    leaves, treedef = jax.tree_util.tree_flatten(model)
    model_in = jax.jit(lambda m: m[0].w)
    model_in_and_out = jax.jit(lambda m: m)
    model_in(model), model_in_and_out(model)  # compile

    def round_trip() -> object:
        flat, structure = jax.tree_util.tree_flatten(model)
        return jax.tree_util.tree_unflatten(structure, flat)

    return {
        "flatten": lambda: jax.tree_util.tree_flatten(model),
        "unflatten": lambda: jax.tree_util.tree_unflatten(treedef, leaves),
        "round trip": round_trip,
        "keyed flatten": lambda: jax.tree_util.tree_flatten_with_path(model),
        "jit, model in": lambda: model_in(model),
        "jit, model in and out": lambda: model_in_and_out(model),
    }


def tree_rows(n: int, rounds: int) -> dict[str, dict[str, float]]:
    """For each operation: ours / reference and the control (twin / reference)."""
    ops = {
        name: tree_operations(cls, n)
        for name, cls in (("ours", Layer), ("ref", Reference), ("twin", Twin))
    }
    number = max(1, 2_000 // n)
    rows: dict[str, dict[str, float]] = {}
    for op in ops["ours"]:
        samples = rounds_of({name: ops[name][op] for name in ops}, number, rounds)
        rows[op] = {
            "ours": median_ratio(samples, "ours", "ref"),
            "control": median_ratio(samples, "twin", "ref"),
            "ref_ns": statistics.median(samples["ref"]) / n * 1e9,
        }
    return rows


def define_ours() -> type:
    @jdc.pytree_dataclass
    class Defined:
        w: Any
        b: Any
        name: jdc.Static[str] = "layer"

    return Defined


def define_reference() -> type:
    @dataclasses.dataclass(frozen=True)
    class Defined:
        w: Any
        b: Any
        name: str = "layer"

    jax.tree_util.register_dataclass(Defined, data_fields=["w", "b"], meta_fields=["name"])
    return Defined


def define_twin() -> type:
    return define_reference()


def use_recursive_ours() -> type:
    """A recursive class (its annotations name it, strings under the future import), decorated
    and then used once: what a tree model pays before its first step."""

    @jdc.pytree_dataclass
    class Node:
        value: Any
        children: tuple[Node, ...] = ()

    jax.tree_util.tree_leaves(Node(1.0, (Node(2.0),)))
    return Node


def use_recursive_reference() -> type:
    @dataclasses.dataclass(frozen=True)
    class Node:
        value: Any
        children: tuple[Node, ...] = ()

    jax.tree_util.register_dataclass(Node, data_fields=["value", "children"], meta_fields=[])
    jax.tree_util.tree_leaves(Node(1.0, (Node(2.0),)))
    return Node


def bytes_per_instance(make: Callable[[], object], count: int = 20_000) -> float:
    make()
    gc.collect()
    tracemalloc.start()
    objects = [make() for _ in range(count)]
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del objects
    return (size - (56 + 8 * count)) / count  # Less the list holding them.


def class_creation_growth(count: int) -> tuple[float, float]:
    """Microseconds to define one more same-named class: median of the first and last 200."""
    times: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        define_ours()
        times.append(time.perf_counter() - start)
    return statistics.median(times[:200]) * 1e6, statistics.median(times[-200:]) * 1e6


def import_ms(runs: int = 5, env: dict[str, str] | None = None) -> float:
    """Milliseconds `import jax_dataclasses` adds to `import jax` (median of `runs` fresh
    processes), as a user sees it: from cached bytecode. A first process writes the bytecode
    into a temporary cache (`PYTHONPYCACHEPREFIX`), even where `PYTHONDONTWRITEBYTECODE` is
    set, which would otherwise make every run compile the package again."""
    code = (
        "import time, jax; start = time.perf_counter(); import jax_dataclasses; "
        "print(time.perf_counter() - start)"
    )
    with tempfile.TemporaryDirectory() as cache:
        environment = dict(os.environ if env is None else env, PYTHONPYCACHEPREFIX=cache)
        environment.pop("PYTHONDONTWRITEBYTECODE", None)
        times = [
            float(
                subprocess.run(
                    [sys.executable, "-c", code],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=environment,
                ).stdout
            )
            for _ in range(runs + 1)
        ][1:]  # The first wrote the bytecode.
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--classes", type=int, default=4_000, help="for the class-creation cliff")
    parser.add_argument("--quick", action="store_true", help="the short version for CI")
    parser.add_argument("--json", help="write the ratios to this file")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.sizes, args.classes = 5, [100], 1_000
    results: dict[str, dict[str, float]] = {}
    print(
        f"jax {jax.__version__}, Python {platform.python_version()}; median over {args.rounds} "
        "rounds of ours / register_dataclass, each round the minimum of 5 timings"
    )
    print("| operation | N | ours / ref | control | target | ref ns per node |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        for op, row in tree_rows(n, args.rounds).items():
            results[f"{op}, N={n}"] = {"ratio": row["ours"], "control": row["control"]}
            print(
                f"| {op} | {n} | {row['ours']:.2f}x | {row['control']:.2f}x | "
                f"<= {TARGETS[op]}x | {row['ref_ns']:.0f} |"
            )
    leaf = np.ones(3, np.float32)
    builds = {
        "ours": lambda: Layer(leaf, leaf, "layer"),
        "ref": lambda: Plain(leaf, leaf, "layer"),
        "twin": lambda: Plain(leaf, leaf, "layer"),
    }
    definitions = {"ours": define_ours, "ref": define_reference, "twin": define_twin}
    recursive = {
        "ours": use_recursive_ours,
        "ref": use_recursive_reference,
        "twin": use_recursive_reference,
    }
    for name, variants, number in (
        ("construction", builds, 2_000),
        ("decoration", definitions, 20),
        ("recursive class, decoration + first use", recursive, 20),
    ):
        samples = rounds_of(variants, number, args.rounds)
        ratio, control = median_ratio(samples, "ours", "ref"), median_ratio(samples, "twin", "ref")
        results[name] = {"ratio": ratio, "control": control}
        ref_ns = statistics.median(samples["ref"]) * 1e9
        print(
            f"| {name} | - | {ratio:.2f}x | {control:.2f}x | <= {TARGETS[name]}x | "
            f"{ref_ns:.0f} per call |"
        )
    memory = bytes_per_instance(builds["ours"]) / bytes_per_instance(builds["ref"])
    results["memory per instance"] = {"ratio": memory, "control": 1.0}
    print(f"| memory per instance | - | {memory:.2f}x | - | <= 1.0x | - |")
    first, last = class_creation_growth(args.classes)
    growth = last / first
    results["class creation, last 200 / first 200"] = {"ratio": growth, "control": 1.0}
    print(
        f"\nclass creation: {first:.0f} us for one of the first 200 same-named classes, {last:.0f} us "
        f"for one of the last 200 of {args.classes} (ratio {growth:.2f}x; target <= 1.2x)"
    )
    if not args.quick:
        print(f"import jax_dataclasses after import jax: {import_ms():.1f} ms (target <= 30 ms)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {"jax": jax.__version__, "python": platform.python_version(), "results": results},
                out,
                indent=1,
            )


if __name__ == "__main__":
    main()
