"""An oracle for recompile reports: generated sequences of calls, checked against what JAX
really did and against the differences the generator put in (issue 38).

Hypothesis generates calls of one function, each a choice of the argument `x`'s shape and
dtype, whether `lr` is a Python float (weakly typed) or a `jnp.float32`, and its value, the
length of the list `items` (structure) and its last item's dtype (other items are `f32[2]`,
so one tree holds leaves of one shape and two dtypes), the static argument `n`, and whether the call runs
under `jax.default_matmul_precision("highest")` (a context outside the arguments). Some are
first made through the same function jitted without a report (a warm cache), then all through
the reporting one: `jdc.jit(explain_recompiles="warn")`, or `jdc.explain_recompiles` of a
`jax.jit` with `static_argnums`.

The reference never asks the package: a compilation is a run of the function's Python body
(each case traces, on one device), counted by the body itself; the differences between two
calls are computed from the generated choices. Each call that compiled after the reporting
function's first call must be reported, once, and only those; and the causes a report names
must be exactly the differences from one of the earlier calls it saw.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import pytest
from helpers import context_option
from hypothesis import given, settings
from hypothesis import strategies as st

import jax_dataclasses as jdc


class Spec(NamedTuple):
    """One call's choices."""

    width: int
    dtype: str
    weak: bool
    lr: float
    length: int
    last: str
    n: int
    highest: bool


SPECS = st.builds(
    Spec,
    width=st.sampled_from([2, 3]),
    dtype=st.sampled_from(["float32", "int32"]),
    weak=st.booleans(),
    lr=st.sampled_from([0.1, 0.2]),
    length=st.sampled_from([1, 2]),
    last=st.sampled_from(["float32", "int32"]),
    n=st.sampled_from([1, 2]),
    highest=st.booleans(),
)
MADE_BY = ["jdc.jit", "jax.jit"]
_LINE = re.compile(r"^  (?P<path>[^:]+): .* \((?P<kind>[a-z ]+)\)(;.*)?$")


def arguments(spec: Spec) -> tuple[Any, ...]:
    lr = spec.lr if spec.weak else jnp.float32(spec.lr)
    items = [jnp.ones(2, dtype) for dtype in item_dtypes(spec)]
    return jnp.ones(spec.width, spec.dtype), lr, items, spec.n


def item_dtypes(spec: Spec) -> list[str]:
    return ["float32"] * (spec.length - 1) + [spec.last]


def run(jitted: Callable[..., Any], spec: Spec) -> None:
    context = jax.default_matmul_precision("highest") if spec.highest else contextlib.nullcontext()
    with context:
        jax.block_until_ready(jitted(*arguments(spec)))


def expected_causes(before: Spec, after: Spec, made_by: str) -> set[tuple[str, str]]:
    """What differs between two calls, as a report must name it, from the choices alone."""
    found: set[tuple[str, str]] = set()
    if before.width != after.width:
        found.add(("x", "shape"))
    elif before.dtype != after.dtype:
        found.add(("x", "dtype"))
    if before.weak != after.weak:
        found.add(("lr", "weak type"))
    if before.length != after.length:
        found.add(("items", "structure"))
    kept = zip(item_dtypes(before), item_dtypes(after), strict=False)  # Compared by index.
    found.update((f"items[{i}]", "dtype") for i, (a, b) in enumerate(kept) if a != b)
    if before.highest != after.highest:
        found.add(("jax_default_matmul_precision", "context"))
    if made_by == "jdc.jit":  # It knows `n` is static and `lr` is traced.
        if before.n != after.n:
            found.add(("n", "static argument"))
        return found
    # A plain jax.jit's static argument looks like any Python number: named as a value, with
    # the traced `lr`'s, only when nothing else differs.
    numbers = {("n", "value")} if before.n != after.n else set()
    if before.weak and after.weak and before.lr != after.lr:
        numbers.add(("lr", "value"))
    return found or numbers


def named_causes(report: str) -> set[tuple[str, str]]:
    lines = report.splitlines()[1:]
    matches = [_LINE.match(line) for line in lines]
    assert all(matches), report
    return {
        (context_option(m["path"], "jax_default_matmul_precision") if m["kind"] == "context"
         else m["path"], m["kind"])
        for m in matches
        if m is not None
    }  # fmt: skip


def functions(made_by: str) -> tuple[Callable[..., Any], Callable[..., Any], list[int]]:
    """A fresh function (JAX's caches are the function's) jitted without and with a report,
    and the count of its traces."""
    traces = [0]

    def step(x: jax.Array, lr: float, items: list[jax.Array], n: jdc.Static[int]) -> jax.Array:
        traces[0] += 1
        return (x @ x) * lr + len(items) * n

    if made_by == "jdc.jit":
        return jdc.jit(step), jdc.jit(step, explain_recompiles="warn"), traces
    return (
        jax.jit(step, static_argnums=3),
        jdc.explain_recompiles(jax.jit(step, static_argnums=3)),
        traces,
    )


@pytest.mark.parametrize("made_by", MADE_BY)
@settings(max_examples=25, deadline=None)
@given(
    warm=st.lists(SPECS, max_size=3),
    calls=st.lists(SPECS, min_size=1, max_size=6),
)
def test_one_report_per_compilation_naming_real_differences(
    made_by: str, warm: list[Spec], calls: list[Spec]
) -> None:
    plain, reporting, traces = functions(made_by)
    for spec in warm:
        run(plain, spec)
    seen: list[Spec] = []
    for number, spec in enumerate(calls):
        before = traces[0]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(reporting, spec)
        reports = [str(w.message) for w in caught if w.category is jdc.RecompileWarning]
        compiled = traces[0] - before
        assert len(reports) == (compiled if number else 0), (number, reports)
        for report in reports:
            named = named_causes(report)
            candidates = [expected_causes(old, spec, made_by) for old in seen]
            assert named in candidates, (report, candidates)
        seen.append(spec)
