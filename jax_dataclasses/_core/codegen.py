"""The one code generator: every function we generate for a class is made by `make_functions`,
all of a class's functions from one source, compiled once.

As in CPython's `dataclasses` and attrs, generated source is compiled with the class's module
namespace as its globals, so string annotations resolve (`typing.get_type_hints`,
`inspect.signature(eval_str=True)`, beartype, jaxtyping) and the functions pickle like
hand-written ones. The helpers they call are bound as closure variables, never added to the
module: nothing unpicklable sits in their globals (cloudpickle copies those), and no field name
can shadow a helper. The source is registered with `linecache`, under a file name made from
the class's name and identity (found in constant time, however many classes share the name),
so tracebacks and `inspect` show the generated lines. A module's namespace is found by name
(`_field_declarations.scope.module_globals`), as the reading of string annotations finds it.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from jax_dataclasses._field_declarations.scope import module_globals

FILENAME_PREFIX = "<jax_dataclasses generated "
"""Start of the file name of every generated function (`warn_at_user` skips those frames)."""


AnnotationsOf = dict[str, Any] | Callable[[int], dict[str, object]]
"""A generated function's annotations: a dict, or an `__annotate__` function (Python 3.14)."""


class FunctionSource(NamedTuple):
    """One function to generate: `def name(*params): body`, calling `helpers`.

    `body` holds the lines without indentation; `annotations`, if given, become the function's
    `__annotations__` (or, a function, its `__annotate__`); the first `checks` lines of
    `body` check the arguments before anything else runs. Helpers of the functions compiled
    together share one namespace, so a name must mean the same object in each. The function's
    closure variables are exactly its helpers, used or not (`nonlocal` for those it does not
    use): two functions made from sources with the same helper names can exchange code
    (`take_code`).
    """

    name: str
    params: Sequence[str]
    body: Sequence[str]
    helpers: Mapping[str, object]
    annotations: AnnotationsOf | None = None
    checks: int = 0


def make_functions(cls: type, sources: Sequence[FunctionSource]) -> dict[str, Callable[..., Any]]:
    """Compile `sources` for `cls` in one go; the functions by name, each with the
    `__module__`, `__qualname__` and (if given) `__annotations__` of a method of `cls`."""
    helpers: dict[str, object] = {}
    for source in sources:
        for name, value in source.helpers.items():
            if helpers.setdefault(name, value) is not value:
                raise ValueError(f"generated helper {name!r} means two things")  # Our bug.
    filename = f"{FILENAME_PREFIX}{cls.__module__}.{cls.__qualname__} at {id(cls):#x}>"
    text = _source_text(sources, helpers, declare_all=False)
    functions = _create(text, filename, cls.__module__, helpers)
    if any(
        len(function.__code__.co_freevars) != len(source.helpers)
        for source, function in zip(sources, functions, strict=True)
    ):  # A field name holds a helper's name (`x__jdc_cls`): it looked used.
        text = _source_text(sources, helpers, declare_all=True)
        functions = _create(text, filename, cls.__module__, helpers)
    for source, function in zip(sources, functions, strict=True):
        function.__module__ = cls.__module__
        function.__qualname__ = f"{cls.__qualname__}.{source.name}"
        if callable(source.annotations):
            function.__annotate__ = source.annotations  # type: ignore[attr-defined]  # 3.14
        elif source.annotations is not None:
            function.__annotations__ = source.annotations
    # A class compiled again (adopted, then decorated) replaces its entry: the functions of
    # the first compile take the new code (`_core.record.register`).
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return {source.name: function for source, function in zip(sources, functions, strict=True)}


def _source_text(
    sources: Sequence[FunctionSource], helpers: Mapping[str, object], declare_all: bool
) -> str:
    """The source of `__jdc_create__(*helpers)`, which defines and returns the functions.
    Each function's closure is exactly its helpers, whether its body uses each: those it
    does not use are declared `nonlocal` (each declaration costs compile time; without
    `declare_all`, a helper whose name the body holds counts as used)."""
    lines = [f"def __jdc_create__({', '.join(helpers)}):"]
    for source in sources:
        lines.append(f"  def {source.name}({', '.join(source.params)}):")
        body = "\n".join(source.body)
        unused = [name for name in source.helpers if declare_all or name not in body]
        if unused:
            lines.append(f"    nonlocal {', '.join(unused)}")
        lines.extend(f"    {line}" for line in source.body or ["pass"])
    lines.append(f"  return ({''.join(f'{source.name}, ' for source in sources)})")
    return "\n".join(lines) + "\n"


def _create(
    text: str, filename: str, module: str, helpers: Mapping[str, object]
) -> tuple[Callable[..., Any], ...]:
    namespace: dict[str, Any] = {}
    exec(compile(text, filename, "exec"), module_globals(module), namespace)
    functions: tuple[Callable[..., Any], ...] = namespace["__jdc_create__"](**helpers)
    return functions


def take_code(target: Callable[..., Any], source: Callable[..., Any]) -> None:
    """Make function `target` run `source`'s code with `source`'s helpers: how a function JAX
    already holds gets the code of a new layout. The two must close over the same names (the
    same helper names, `FunctionSource`); each of `target`'s cells takes the value of
    `source`'s cell of that name."""
    names = target.__code__.co_freevars
    if names != source.__code__.co_freevars:  # Our bug: the sources declare other helpers.
        raise ValueError(f"{target.__qualname__} closes over {names}, its new code over others")
    # The cells first: a call that starts in between runs the old code, which for a class
    # deciding its pending names (the only change while instances exist) decides, waits for
    # the decision, and calls the function again.
    for target_cell, source_cell in zip(
        target.__closure__ or (), source.__closure__ or (), strict=True
    ):
        target_cell.cell_contents = source_cell.cell_contents
    target.__code__ = source.__code__


# -- module namespaces ---------------------------------------------------------------------
# The global namespace of a module, by name: what a class's generated code and its string
# annotations see as globals (as for methods written in the class body).
