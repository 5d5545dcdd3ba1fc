"""jax_dataclasses 1.6's private `_dataclasses` names, kept for code that imports them.

Published projects copied 1.6's field classification and import `FieldInfo`,
`JDC_STATIC_MARKER` and `get_type_hints_partial` from here. They keep 1.6.3's meaning:
`JDC_STATIC_MARKER` is 1.6's marker string, which the metadata of our `Static` compares equal
to (`marker in hint.__metadata__` finds it) and which `static_field()` puts in field metadata.
Compatibility only: new code reads `dataclasses.fields` and `jax.tree_util`.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import sys
import typing
from typing import Any

from jax_dataclasses._field_declarations.forms import LEGACY_STATIC_MARKER, Static
from jax_dataclasses._field_declarations.scope import class_annotations

JDC_STATIC_MARKER = LEGACY_STATIC_MARKER

__all__ = ["JDC_STATIC_MARKER", "FieldInfo", "Static", "get_type_hints_partial"]


@dataclasses.dataclass(frozen=True)
class FieldInfo:
    """1.6's split of a class's `__init__` fields into children and static fields."""

    child_node_field_names: list[str]
    static_field_names: list[str]


class _Unresolvable:
    """Stands for a name that cannot be resolved; subscripting it gives itself."""

    def __class_getitem__(cls, item: object) -> type[_Unresolvable]:
        return cls


def get_type_hints_partial(obj: Any, include_extras: bool = False) -> dict[str, Any]:
    """`typing.get_type_hints(obj, include_extras=True)` for a class or function, except that
    a name that cannot be resolved (defined later, imported under `TYPE_CHECKING`) becomes a
    subscriptable placeholder instead of raising `NameError`, as in 1.6.3. Only
    `include_extras=True` is supported (1.6.3 asserted it)."""
    if not include_extras:
        raise ValueError("get_type_hints_partial supports include_extras=True only (as in 1.6)")
    if isinstance(obj, type):
        hints: dict[str, Any] = {}
        for base in reversed(obj.__mro__):
            module = sys.modules.get(base.__module__)
            namespace = {**vars(module)} if module is not None else {}
            for name, value in class_annotations(base).items():
                hints[name] = _evaluate(value, namespace)
        return hints
    inner = obj
    while hasattr(inner, "__wrapped__"):
        inner = inner.__wrapped__
    namespace = dict(getattr(inner, "__globals__", {}))
    annotations: dict[str, Any] = dict(getattr(obj, "__annotations__", None) or {})
    return {name: _evaluate(value, namespace) for name, value in annotations.items()}


def _evaluate(value: object, namespace: dict[str, Any]) -> Any:
    if value is None:
        return type(None)
    if isinstance(value, typing.ForwardRef):  # Python 3.14: a name not defined yet.
        namespace = {**namespace, **(getattr(value, "__extra_names__", None) or {})}
        value = value.__forward_arg__
    if not isinstance(value, str):
        return value
    names: collections.defaultdict[str, Any] = collections.defaultdict(lambda: _Unresolvable)
    names.update(vars(builtins))
    names.update(namespace)
    return eval(value.replace("*", ""), names)  # 1.6.3's spelling of variadic generics
