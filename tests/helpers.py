"""Fixture classes and checks shared by several test modules (through the public API only)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AbstractMesh

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Layer:
    w: jax.Array
    b: jax.Array
    activation: jdc.Static[str] = "tanh"


@jdc.pytree_dataclass
class Model:
    layers: list[Layer]
    name: jdc.Static[str] = "model"


@jdc.pytree_dataclass(slots=True)
class Slotted:
    x: Any
    tag: jdc.Static[int] = 0


def make_model() -> Model:
    return Model([Layer(jnp.ones((2, 2)), jnp.zeros(2)), Layer(jnp.eye(2), jnp.ones(2), "relu")])


def split_fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(children, statics) of a pytree dataclass, as JAX sees them: the fields that flatten
    yields under `GetAttrKey` keys, and the others."""
    blank = object.__new__(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for index, name in enumerate(names):
        object.__setattr__(blank, name, index)
    keyed, _ = jax.tree_util.tree_flatten_with_path(blank)
    children = {path[0].name for path, _ in keyed}
    return tuple(n for n in names if n in children), tuple(n for n in names if n not in children)


def statics(cls: type) -> tuple[str, ...]:
    return split_fields(cls)[1]


def children(cls: type) -> tuple[str, ...]:
    return split_fields(cls)[0]


def leaves_equal_fields(obj: Any) -> None:
    """Flatten, flatten with paths and the fields agree: the leaves are exactly the current
    field values of the children, under their field names."""
    child_names = children(type(obj))
    expected = [
        leaf for name in child_names for leaf in jax.tree_util.tree_leaves(getattr(obj, name))
    ]
    assert [id(x) for x in jax.tree_util.tree_leaves(obj)] == [id(x) for x in expected]
    keyed, _ = jax.tree_util.tree_flatten_with_path(obj)
    assert [id(x) for _, x in keyed] == [id(x) for x in expected]
    assert [path[0].name for path, _ in keyed] == [
        name for name in child_names for _ in jax.tree_util.tree_leaves(getattr(obj, name))
    ]


def child_environment(device_count: int) -> dict[str, str]:
    """This environment, on `device_count` CPU devices, without pytest options meant for us."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    flag = f"--xla_force_host_platform_device_count={device_count}"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_NUM_CPU_DEVICES"] = str(device_count)  # It would override XLA_FLAGS if inherited.
    return env


def run_python(
    arguments: list[str],
    devices: int = 1,
    *,
    env: dict[str, str] | None = None,
    input: str | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
) -> str:
    """Run `python ARGUMENTS` on `devices` CPU devices (with `env` added to the environment);
    its output, or a test failure that shows the child's output."""
    command = [sys.executable, *arguments]
    environment = {**child_environment(devices), **(env or {})}
    try:
        result = subprocess.run(
            command,
            cwd=cwd,
            env=environment,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(
            f"{' '.join(command)}\ndid not finish within {timeout} s and was killed.\n"
            f"--- output so far ---\n{_text(expired.stdout)}\n{_text(expired.stderr)}",
            pytrace=False,
        )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(command)}\nexited with {result.returncode}; its output:\n"
            f"{result.stdout}\n{result.stderr}",
            pytrace=False,
        )
    return result.stdout


def _text(output: str | bytes | None) -> str:
    """Output captured before a timeout: bytes, text or nothing, depending on the platform."""
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def sharding_error(call: Any) -> str:
    """The message of the `jdc.ShardingDeclarationError` that `call()` raises."""
    with pytest.raises(jdc.ShardingDeclarationError) as caught:
        call()
    return str(caught.value)


SPELLINGS = ["future import"] + (["lazy (3.14)"] if sys.version_info >= (3, 14) else [])
"""How a module's annotations are read: strings (the future import, on every Python), and on
Python 3.14 lazily (PEP 649). Earlier Pythons evaluate them at class definition, where a name
defined later is a `NameError`, for the standard library too."""
_COUNTER = itertools.count()


def define(
    source: str, spelling: str, decorator: str = "@jdc.pytree_dataclass"
) -> types.ModuleType:
    """Run `source` as a new module (registered in `sys.modules`, as an imported module is),
    with `@DECORATE` replaced by `decorator`; with the future import if `spelling` says so,
    else as the running Python reads annotations."""
    text = textwrap.dedent(source).replace("@DECORATE", decorator)
    if spelling == "future import":
        text = "from __future__ import annotations\n" + text
    module = types.ModuleType(f"defined_{next(_COUNTER)}")
    sys.modules[module.__name__] = module
    # `dont_inherit`: the calling test file's own future import must not reach the source
    # (the lazy cases would then run with strings, never lazily).
    exec(compile(text, f"<{module.__name__}>", "exec", dont_inherit=True), module.__dict__)
    return module


def abstract_mesh(**sizes: int) -> AbstractMesh:
    """An `AbstractMesh` of these axis sizes, on jax before and after 0.5's signature change."""
    try:
        return AbstractMesh(tuple(sizes.values()), tuple(sizes))  # type: ignore[arg-type,call-arg,unused-ignore]
    except TypeError:
        return AbstractMesh(tuple(sizes.items()))  # type: ignore[arg-type,unused-ignore]


CONTEXT_NAMED = tuple(int(part) for part in jax.__version__.split(".")[:2]) >= (0, 5)
"""Whether a recompile report names a tracing-context option (`jax_default_matmul_precision`):
jax 0.4.36's jaxlib gives the options no names, and the report names one by position there
(`trace context [8]`)."""


def context_option(report_name: str, name: str) -> str:
    """A report's name for the tracing-context option `name`, as this jax allows it."""
    return (
        report_name
        if CONTEXT_NAMED or not re.fullmatch(r"trace context \[\d+\]", report_name)
        else name
    )
