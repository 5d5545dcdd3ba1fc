"""The one code generator: every function we generate for a class is made by `make_function`.

As in CPython's `dataclasses` and attrs, generated source is compiled with the class's module
namespace as its globals, so string annotations resolve (`typing.get_type_hints`,
`inspect.signature(eval_str=True)`, beartype, jaxtyping) and the function pickles like a
hand-written one. The helpers it calls are bound as closure variables, never added to the
module: nothing unpicklable sits in its globals (cloudpickle copies those), and no field name
can shadow a helper. The source is registered with `linecache`, so tracebacks and `inspect`
show the generated lines.
"""

from __future__ import annotations

import linecache
import sys
from collections.abc import Callable, Mapping
from typing import Any

FILENAME_PREFIX = "<jax_dataclasses generated "
"""Start of the file name of every generated function (`_user_warning` skips those frames)."""


def make_function(
    cls: type,
    name: str,
    params: list[str],
    body: list[str],
    helpers: Mapping[str, object],
    annotations: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """Compile `def name(*params): body` for `cls`, with `helpers` as closure variables.

    `body` holds the function's lines without indentation. The result has the `__module__`,
    `__qualname__` and (if given) `__annotations__` of a method written in the class body.
    """
    inner = f"  def {name}({', '.join(params)}):\n" + "".join(
        f"    {line}\n" for line in body or ["pass"]
    )
    source = f"def __jdc_create__({', '.join(helpers)}):\n{inner}  return {name}\n"
    filename = _unique_filename(f"{FILENAME_PREFIX}{name} {cls.__module__}.{cls.__qualname__}")
    module = sys.modules.get(cls.__module__)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), vars(module) if module else {}, namespace)
    function: Callable[..., Any] = namespace["__jdc_create__"](**helpers)
    function.__module__ = cls.__module__
    function.__qualname__ = f"{cls.__qualname__}.{name}"
    if annotations is not None:
        function.__annotations__ = annotations
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return function


def _unique_filename(base: str) -> str:
    """`base>`, or `base-N>` if a class of the same name generated one already."""
    filename, count = f"{base}>", 1
    while filename in linecache.cache:
        filename, count = f"{base}-{count}>", count + 1
    return filename


def tuple_source(items: list[str]) -> str:
    """Python source of a tuple display with `items`: `(a, b, )`, `()`."""
    return "(" + "".join(f"{item}, " for item in items) + ")"
