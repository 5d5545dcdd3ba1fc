"""A griffe extension for the API reference: show the signatures that type checkers see.

`jax_dataclasses/__init__.py` binds some public names differently for type checkers, under
`if TYPE_CHECKING:`. `pytree_dataclass` is `dataclasses.dataclass` to mypy and pyright (so
that they treat a decorated class as a dataclass), while at run time it is our function,
annotated `-> Any`; griffe reads the runtime function, and the reference would show `-> Any`.
This extension gives such a function the overloads of the function it stands for, built from
its keyword parameters as it runs (names, types and defaults), so the page shows what a
checker infers: `type[T]` for `@pytree_dataclass`, a decorator for `@pytree_dataclass(...)`.
A name whose stand-in is not in `TYPE_CHECKER_VIEWS` (the deprecated `static_field`, which is
`dataclasses.field` to checkers) keeps its runtime signature.

Functions that declare their own `@overload`s (`jit`) get them from griffe, and mkdocstrings
shows them (`overloads_only` in mkdocs.yml hides the implementation's signature). For every
function with overloads, an `Any` annotation of the implementation becomes the union of the
overloads' annotations, so that the docstring's tables (parameters, returns) agree with the
signatures above them.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import griffe

POSITIONAL_ONLY = griffe.ParameterKind.positional_only
KEYWORD_ONLY = griffe.ParameterKind.keyword_only


def _annotation(text: str, function: griffe.Function) -> Any:
    """`text` as a griffe expression, read in the module that defines `function`."""
    return griffe.safe_get_annotation(ast.parse(text, mode="eval").body, parent=function.parent)


def _keywords(function: griffe.Function) -> list[griffe.Parameter]:
    """The keyword parameters of `function` as it runs: `pytree_dataclass` takes `**options`,
    and its signature at run time is made from its table of `dataclasses.dataclass`'s
    keywords, all `bool`."""
    module = importlib.import_module(function.module.path)
    runtime = inspect.signature(getattr(module, function.name))
    return [
        griffe.Parameter(p.name, annotation="bool", kind=KEYWORD_ONLY, default=repr(p.default))
        for p in runtime.parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]


def _dataclass_overloads(function: griffe.Function) -> list[griffe.Function]:
    """typeshed's two overloads of `dataclasses.dataclass`, with `function`'s keywords."""
    keywords = _keywords(function)

    def overload(cls: griffe.Parameter, returns: str) -> griffe.Function:
        return griffe.Function(
            function.name,
            lineno=function.lineno,
            endlineno=function.endlineno,
            parameters=griffe.Parameters(cls, *keywords),
            returns=_annotation(returns, function),
            parent=function.parent,
        )

    decorated = griffe.Parameter(
        "cls", annotation=_annotation("type[T]", function), kind=POSITIONAL_ONLY
    )
    bare = griffe.Parameter("cls", annotation="None", kind=POSITIONAL_ONLY, default="None")
    return [overload(decorated, "type[T]"), overload(bare, "Callable[[type[T]], type[T]]")]


TYPE_CHECKER_VIEWS: dict[str, Callable[[griffe.Function], list[griffe.Function]]] = {
    "dataclasses.dataclass": _dataclass_overloads,
}
"""What a name imported under `if TYPE_CHECKING:` stands for, and how to build its overloads."""


def _type_checking_imports(init: Path) -> Iterator[tuple[str, str]]:
    """(name, imported path) of each `from m import x as name` under `if TYPE_CHECKING:`."""
    for node in ast.parse(init.read_text()).body:
        if not isinstance(node, ast.If) or ast.unparse(node.test) not in {
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        }:
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                for name in statement.names:
                    yield name.asname or name.name, f"{statement.module}.{name.name}"


class TypeCheckerOverloads(griffe.Extension):
    """Overloads for the runtime functions that type checkers see as another function."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Give each such public function of `pkg` the overloads of what checkers see."""
        if not isinstance(pkg.filepath, Path):
            return
        for name, target in _type_checking_imports(pkg.filepath):
            build = TYPE_CHECKER_VIEWS.get(target)
            if build is None or name not in pkg.members:
                continue
            function = _function(pkg.members[name])
            if function is not None and not function.overloads:
                function.overloads = build(function)
        for member in pkg.members.values():
            function = _function(member)
            if function is not None and function.overloads:
                _types_from_overloads(function)


def _function(member: griffe.Object | griffe.Alias) -> griffe.Function | None:
    """The function `member` is or points to; None for anything else."""
    try:
        target = member.final_target if isinstance(member, griffe.Alias) else member
    except griffe.AliasResolutionError:
        return None
    return target if isinstance(target, griffe.Function) else None


def _types_from_overloads(function: griffe.Function) -> None:
    """Replace the implementation's `Any` annotations by the union of its overloads' ones."""

    def union(annotations: list[object]) -> Any:
        texts = list(dict.fromkeys(str(a) for a in annotations if a is not None))
        return _annotation(" | ".join(texts), function) if texts else None

    overloads = function.overloads or []
    for parameter in function.parameters:
        if str(parameter.annotation) == "Any":
            found = [
                o.parameters[parameter.name] for o in overloads if parameter.name in o.parameters
            ]
            parameter.annotation = union([p.annotation for p in found]) or parameter.annotation
    if str(function.returns) == "Any":
        function.returns = union([o.returns for o in overloads]) or function.returns
