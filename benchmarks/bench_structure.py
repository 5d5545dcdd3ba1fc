"""How the package's rooms are used: its module count, and how often decorating one class (and
constructing, flattening and editing it) crosses from one of our modules into another.

A crossing is a call from a function of one module of the package into a function of another
(calls into the standard library or JAX are not counted; generated code counts as
`_core.codegen`'s). Fewer crossings mean a reader follows one flow in fewer files (issue 24).
Also the distinct lines of each module that decorating and constructing one class run, and
those that every way into the class builder and every reader of its declarations run (what
one reads to follow a class, issue 30).
Run: `.venv/bin/python benchmarks/bench_structure.py`.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import jax
import jax.numpy as jnp

import jax_dataclasses as jdc

PACKAGE = Path(jdc.__file__).resolve().parent


def _module_of(frame: FrameType) -> str | None:
    filename = frame.f_code.co_filename
    if filename.startswith("<jax_dataclasses generated"):
        return "_core.codegen (generated)"
    path = Path(filename)
    return _dotted(path) if path.is_relative_to(PACKAGE) else None


def _dotted(path: Path) -> str:
    """A module's name inside the package: `_core.record`, `_jit`."""
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def crossings(action: Callable[[], Any]) -> tuple[int, Counter[tuple[str, str]]]:
    """The calls `action` makes from one of our modules into another, counted by pair."""
    pairs: Counter[tuple[str, str]] = Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee, caller = _module_of(frame), _module_of(frame.f_back)
        if callee is not None and caller is not None and callee != caller:
            pairs[caller, callee] += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return sum(pairs.values()), pairs


def lines_run(action: Callable[[], Any]) -> dict[str, int]:
    """The distinct lines of each of our modules that `action` runs: what a reader follows."""
    lines: dict[str, set[int]] = {}

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        module = _module_of(frame)
        if module is None or module.startswith("_core.codegen ("):
            return None
        lines.setdefault(module, set()).add(frame.f_lineno)
        return trace

    sys.settrace(trace)
    try:
        action()
    finally:
        sys.settrace(None)
    return {module: len(found) for module, found in sorted(lines.items())}


def decorate() -> type:
    @jdc.pytree_dataclass
    class Layer:
        w: jax.Array
        b: jax.Array = jnp.zeros(2)
        activation: jdc.Static[str] = "tanh"
        scale: float = jdc.field(default=1.0, metadata={"static": True})

        def __post_init__(self) -> None:
            pass

    return Layer


EVERY_ENTRY = """
from __future__ import annotations
import jax
import jax_dataclasses as jdc

Count = jdc.Static[int]

@jdc.pytree_dataclass
class Block:
    w: jdc.Sharded[jax.Array, "embed"]
    n: Count = 2
    other: Later = None

class Plain(Block):
    pass

class Later:
    pass
"""


def every_entry_point() -> None:
    """A class through each way into the builder (decorated with a name defined after it,
    decided at its first use (as 1.6.3 and every revision since could run it), an undecorated subclass, a cloudpickle round trip) and each
    reader of its declarations (sharding, the 1.6 layout)."""
    import types

    import cloudpickle

    module = types.ModuleType("every_entry")
    sys.modules[module.__name__] = module
    exec(compile(EVERY_ENTRY, "<every_entry>", "exec"), module.__dict__)
    block = module.Block(jnp.ones(2))
    module.Plain(jnp.ones(2))
    cloudpickle.loads(cloudpickle.dumps(block))
    jdc.partition_specs(block, {"embed": None})
    jdc.v1_6_layout(block)


def main() -> None:
    modules = sorted(_dotted(path) for path in PACKAGE.glob("**/*.py"))
    print(f"{len(modules)} modules: {', '.join(modules)}")
    layer = decorate()
    instance = layer(jnp.ones(2))

    def edit() -> None:
        with jdc.copy_and_mutate(instance) as copy:
            copy.w = jnp.zeros(2)

    actions = {
        "decorate a class": decorate,
        "construct an instance": lambda: layer(jnp.ones(2)),
        "flatten and unflatten": lambda: jax.tree.map(lambda x: x, instance),
        "a validated copy_and_mutate edit": edit,
    }
    for what, action in (
        ("decorating a class and constructing it", lambda: decorate()(jnp.ones(2))),
        ("every way into the builder, and every reader", every_entry_point),
    ):
        followed = lines_run(action)
        print(
            f"{what} runs {sum(followed.values())} lines of {len(followed)} modules: "
            + ", ".join(f"{module} {count}" for module, count in followed.items())
        )
    for name, action in actions.items():
        total, pairs = crossings(action)
        top = ", ".join(f"{a}->{b} {n}" for (a, b), n in pairs.most_common(4))
        print(
            f"{name}: {total} crossings between {len({m for p in pairs for m in p})} modules ({top})"
        )


if __name__ == "__main__":
    main()
