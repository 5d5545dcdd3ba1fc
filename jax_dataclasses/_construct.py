"""Generated `__init__` for pytree dataclasses.

We write our own `__init__` instead of the standard library's because instances are frozen
through our `__setattr__` (which the standard non-frozen `__init__` would call), and because
one `__dict__` write that also stores the flatten cache is faster than the standard frozen
`__init__`'s `object.__setattr__` per field, which pays for the static-value checks.
The signature follows `dataclasses` exactly: the same parameters, order, defaults,
`kw_only` handling, `InitVar`s and `__post_init__` call.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from typing import Any

from jax_dataclasses._frozen import is_constructing
from jax_dataclasses._registry import (
    FLAT_ATTR,
    Layout,
    compile_function,
    dict_setter,
    finish_construction,
)
from jax_dataclasses._static_values import OK_TYPES, check_static_value


class _FactorySentinel:
    def __repr__(self) -> str:
        return "<factory>"


HAS_DEFAULT_FACTORY = _FactorySentinel()


def _is_initvar(f: dataclasses.Field[Any]) -> bool:
    return getattr(f, "_field_type", None) is getattr(dataclasses, "_FIELD_INITVAR", None)


def init_parameters(cls: type) -> list[dataclasses.Field[Any]]:
    """Fields and InitVars that `__init__` takes, in the order `dataclasses` uses."""
    all_fields: dict[str, dataclasses.Field[Any]] = getattr(cls, "__dataclass_fields__")  # noqa: B009
    params = [
        f
        for f in all_fields.values()
        if f.init and (f in dataclasses.fields(cls) or _is_initvar(f))
    ]
    positional = [f for f in params if not f.kw_only]
    seen_default = None
    for f in positional:
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        if has_default:
            seen_default = f
        elif seen_default is not None:
            raise TypeError(
                f"non-default argument {f.name!r} follows default argument "
                f"{seen_default.name!r} in {cls.__qualname__}"
            )
    return positional + [f for f in params if f.kw_only]


def make_init(cls: type, layout: Layout) -> Callable[..., None]:
    """Build `cls.__init__`: set every field, check static values, call `__post_init__`."""
    params = init_parameters(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    namespace: dict[str, Any] = {
        "__jdc_factory": HAS_DEFAULT_FACTORY,
        "__jdc_ok": OK_TYPES,
        "__jdc_check": check_static_value,
        "__jdc_finish": finish_construction,
        "__jdc_setattr": object.__setattr__,
    }
    signature = ["__jdc_self__"]
    body: list[str] = []
    assigned: set[str] = set()  # Fields that hold a value in the generated body.
    for f in params:
        if f.kw_only and "*" not in signature:
            signature.append("*")
        if f.default_factory is not dataclasses.MISSING:
            namespace[f"__jdc_factory_{f.name}"] = f.default_factory
            signature.append(f"{f.name}=__jdc_factory")
            body.append(f"    if {f.name} is __jdc_factory: {f.name} = __jdc_factory_{f.name}()")
        elif f.default is not dataclasses.MISSING:
            namespace[f"__jdc_default_{f.name}"] = f.default
            signature.append(f"{f.name}=__jdc_default_{f.name}")
        else:
            signature.append(f.name)
        if not _is_initvar(f):
            assigned.add(f.name)
    for f in dataclasses.fields(cls):
        if f.init:
            continue
        if f.default_factory is not dataclasses.MISSING:
            namespace[f"__jdc_factory_{f.name}"] = f.default_factory
            body.append(f"    {f.name} = __jdc_factory_{f.name}()")
            assigned.add(f.name)
        elif f.default is not dataclasses.MISSING:
            namespace[f"__jdc_default_{f.name}"] = f.default
            body.append(f"    {f.name} = __jdc_default_{f.name}")
            assigned.add(f.name)
    post_init = hasattr(cls, "__post_init__")
    if not post_init and len(assigned) < len(fields):
        missing = next(name for name in fields if name not in assigned)
        raise TypeError(
            f"field {missing!r} of {cls.__qualname__} has init=False and no default, and no "
            "__post_init__ sets it: every field is part of the pytree. Give it a default, or set "
            f"it in __post_init__ with object.__setattr__(self, {missing!r}, value)."
        )
    stored = [name for name in fields if name in assigned]
    values = "".join(f"{name!r}: {name}, " for name in stored)
    initvars = "".join(f"{f.name}, " for f in params if _is_initvar(f))
    namespace.update({"__jdc_cls": cls, "__jdc_type": type, "__jdc_inherited": construct_inherited})
    # The exact class takes the fast path. A subclass instance (whose own `__init__` may be
    # running this one through `super().__init__`) takes the general one.
    post_init_args = f"({initvars})" if post_init else "None"
    body.append("    if __jdc_type(__jdc_self__) is not __jdc_cls:")
    body.append(f"        return __jdc_inherited(__jdc_self__, {{{values}}}, {post_init_args})")
    if not post_init:  # Otherwise finish checks, after __post_init__ may have changed them.
        body.extend(
            f"    if __jdc_type({name}) not in __jdc_ok: __jdc_check(__jdc_cls, {name!r}, {name})"
            for name in layout.statics
        )
    if layout.cached:
        entries = values
        if not post_init:
            children = "".join(f"{name}, " for name in layout.children)
            statics = "".join(f"{name}, " for name in layout.statics)
            entries += f"{FLAT_ATTR!r}: (({children}), ({statics})), "
        # Nothing can be in the fresh `__dict__` yet. (mypy thinks the two types cannot be equal.)
        if cls.__new__ is object.__new__:  # type: ignore[comparison-overlap]
            namespace["__jdc_set_dict"] = dict_setter(cls)
            body.append(f"    __jdc_set_dict(__jdc_self__, {{{entries}}})")
        else:
            body.append(f"    __jdc_self__.__dict__.update({{{entries}}})")
    else:
        body.extend(f"    __jdc_setattr(__jdc_self__, {name!r}, {name})" for name in stored)
    if post_init:
        body.append(f"    __jdc_self__.__post_init__({initvars})")
        body.append("    __jdc_finish(__jdc_self__)")
    source = f"def __init__({', '.join(signature)}):\n" + "\n".join(body or ["    pass"]) + "\n"
    init: Callable[..., None] = compile_function("__init__", source, namespace)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {f.name: f.type for f in params} | {"return": None}
    _GENERATED_INITS.add(init)
    return init


_GENERATED_INITS: weakref.WeakSet[Callable[..., None]] = weakref.WeakSet()


def is_generated_init(init: object) -> bool:
    """Whether `init` is an `__init__` that `make_init` built."""
    return init in _GENERATED_INITS


def construct_inherited(
    obj: object, values: dict[str, object], post_init_args: tuple[object, ...] | None
) -> None:
    """A generated `__init__` running on an instance of a subclass.

    Sets the fields it knows (other entries of the instance `__dict__`, such as fields the
    subclass's own `__init__` set already, stay), runs `__post_init__`, and finishes
    construction unless an `__init__` further out is constructing the object (it finishes
    when it returns, with all fields set).
    """
    for name, value in values.items():
        object.__setattr__(obj, name, value)
    if post_init_args is not None:
        obj.__post_init__(*post_init_args)  # type: ignore[attr-defined]  # present when passed
    if not is_constructing(obj):
        finish_construction(obj)
