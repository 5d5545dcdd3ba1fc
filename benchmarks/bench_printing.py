"""`repr` of a 1,000-layer model against `equinox.tree_pformat` of the same model, in one process.

Each layer holds an attention and an MLP projection (two arrays each), a norm scale and a
static activation name; the model is a list of layers. Both libraries print arrays by dtype
and shape. Rounds interleave the two; we report the median time per call and the ratio.
Target (docs/design/core.md, performance targets): at most 2x equinox. Run: `.venv/bin/python benchmarks/bench_printing.py`
(needs equinox, which the dev extra installs).
"""

from __future__ import annotations

import argparse
import statistics
import timeit

import equinox as eqx
import jax
import jax.numpy as jnp

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Linear:
    w: jax.Array
    b: jax.Array


@jdc.pytree_dataclass
class Layer:
    attn: Linear
    mlp: Linear
    scale: jax.Array
    activation: jdc.Static[str] = "gelu"


class EqxLinear(eqx.Module):
    w: jax.Array
    b: jax.Array


class EqxLayer(eqx.Module):
    attn: EqxLinear
    mlp: EqxLinear
    scale: jax.Array
    activation: str = eqx.field(static=True, default="gelu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    w, b, scale = jnp.ones((64, 64)), jnp.zeros(64), jnp.ones(64)
    ours = [Layer(Linear(w, b), Linear(w, b), scale) for _ in range(args.layers)]
    theirs = [EqxLayer(EqxLinear(w, b), EqxLinear(w, b), scale) for _ in range(args.layers)]
    variants = {
        "repr (ours)": lambda: repr(ours),
        "eqx.tree_pformat": lambda: eqx.tree_pformat(theirs),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, run in variants.items():
            samples[name].append(timeit.timeit(run, number=1) * 1e3)
    median = {name: statistics.median(values) for name, values in samples.items()}
    print(
        f"jax {jax.__version__}, equinox {eqx.__version__}; {args.layers} layers; median of {args.rounds}"
    )
    for name, value in median.items():
        print(f"{name}: {value:.1f} ms")
    print(f"ratio ours / equinox: {median['repr (ours)'] / median['eqx.tree_pformat']:.2f}x")
    print("\nfirst lines of ours:\n" + "\n".join(repr(ours).splitlines()[:4]))


if __name__ == "__main__":
    main()
