"""`pytree_dataclass`: a frozen standard-library dataclass registered as a JAX pytree node."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

import numpy as np
from jax import Array

from jax_dataclasses._annotations import LEGACY_STATIC_MARKER, is_static_annotation
from jax_dataclasses._construct import is_generated_init, make_init
from jax_dataclasses._frozen import (
    begin_construction,
    end_permission,
    frozen_delattr,
    frozen_setattr,
    is_constructing,
)
from jax_dataclasses._registry import (
    FLAT_ATTR,
    Layout,
    dict_setter,
    finish_construction,
    layout_of,
    refresh,
    register,
)

_STATIC_METADATA = (("static", True), ("pytree_node", False), (LEGACY_STATIC_MARKER, True))
_CLASSVAR_SOURCE = re.compile(r"^\s*(?:[\w.]+\.)?ClassVar\b")
_decorating = threading.local()
_pending_inits: dict[type, Callable[..., None] | None] = {}
"""Undecorated subclasses that declare fields: their own `__init__` (if any), replaced by one
that raises until the class is decorated."""


def pytree_dataclass(
    cls: type | None = None,
    /,
    *,
    init: bool = True,
    repr: bool = True,  # The name is `dataclasses.dataclass`'s.
    eq: bool = True,
    order: bool = False,
    unsafe_hash: bool = False,
    frozen: bool = True,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
    weakref_slot: bool = False,
) -> Any:
    """Make `cls` a frozen dataclass registered as a JAX pytree node.

    Takes exactly the arguments of `dataclasses.dataclass`. Fields annotated `Static[T]` (or
    with field metadata `static=True` / `pytree_node=False`) are static: stored in the tree
    structure. Every other field is a child. Instances are always frozen.
    """
    options = {
        "init": init,
        "repr": repr,
        "eq": eq,
        "order": order,
        "unsafe_hash": unsafe_hash,
        "match_args": match_args,
        "kw_only": kw_only,
        "slots": slots,
        "weakref_slot": weakref_slot,
    }
    if frozen is not True:
        raise TypeError(
            "pytree_dataclass(frozen=False) is not supported: instances are always frozen, "
            "because JAX may share and cache them. Edit a copy with jdc.copy_and_mutate(obj) "
            "or jdc.replace(obj, ...)."
        )
    localns = sys._getframe(1).f_locals  # pyright: ignore[reportPrivateUsage]  # The decorating scope's names.

    def wrap(target: type) -> type:
        return _decorate(target, options, localns)

    return wrap if cls is None else wrap(cls)


def _decorate(cls: object, options: dict[str, bool], localns: Mapping[str, Any]) -> type:
    if not isinstance(cls, type):
        raise TypeError(
            f"pytree_dataclass decorates classes, got {cls!r}. Write @pytree_dataclass (or "
            "@pytree_dataclass(...)) directly above a class statement."
        )
    if cls.__dict__.get("__setattr__") is frozen_setattr:
        raise TypeError(f"{cls.__qualname__} is already a pytree dataclass: decorate it once.")
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} defines {name}, which pytree_dataclass must own to keep "
                "instances frozen. Remove it; use jdc.copy_and_mutate to edit copies."
            )
    if cls in _pending_inits:
        _restore_init(cls)
    user_init = cls.__dict__.get("__init__")
    if user_init is not None and user_init in _FINISHING:  # Wrapped when adopted.
        user_init = user_init.__wrapped__
    array_defaults = _wrap_array_defaults(cls)
    explicit_hash = "__hash__" in cls.__dict__ and not (
        cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__
    )
    # Frozen to `dataclasses` too (so frozen plain dataclasses can be bases and subclasses),
    # unless a base is a non-frozen dataclass, which `dataclasses` would refuse to combine.
    # Either way our `__setattr__`/`__delattr__` do the freezing.
    frozen = all(
        getattr(base, "__dataclass_params__").frozen  # noqa: B009
        for base in cls.__mro__[1:]
        if getattr(base, "__dataclass_fields__", None) is not None
    )
    kwargs = dict(options, init=False, frozen=frozen)
    # Hash like a frozen dataclass (by fields) unless the class brings its own.
    kwargs["unsafe_hash"] = options["unsafe_hash"] or (options["eq"] and not explicit_hash)
    _decorating.active = True
    try:
        # cast: checkers cannot pick an overload of `dataclass` for `**kwargs`.
        cls = cast(type, dataclasses.dataclass(cls, **kwargs))
    finally:
        _decorating.active = False
    _unwrap_array_defaults(cls, array_defaults)
    layout = _layout(cls, localns)
    if options["init"] and user_init is None:
        cls.__init__ = make_init(cls, layout)  # type: ignore[misc]  # Installing our method on the class.
    else:
        # The class's own `__init__`, or (init=False) the one it inherits, which knows only
        # the base's fields: either way, check and cache once it has run.
        init: Callable[..., None] = user_init or next(
            k.__dict__["__init__"] for k in cls.__mro__ if "__init__" in k.__dict__
        )
        if init is not object.__init__:
            cls.__init__ = _finishing_init(init)  # type: ignore[misc]  # Installing our method on the class.
    cls.__setattr__ = frozen_setattr  # type: ignore[method-assign,assignment]  # Installing our method on the class.
    cls.__delattr__ = frozen_delattr  # type: ignore[method-assign,assignment]  # Installing our method on the class.
    _add_pickle_support(cls, layout)
    _install_subclass_hook(cls)
    adopted = layout_of(cls)
    if adopted is None:
        register(layout)
    elif not adopted.same_fields(layout):
        # Adopted as an undecorated subclass, which cannot declare fields: same layout.
        raise RuntimeError(
            f"jax_dataclasses internal error: {cls.__qualname__} was registered as a pytree "
            f"with fields {adopted.children + adopted.statics} before its decorator ran, and "
            f"now has {layout.children + layout.statics}. Please report this."
        )
    return cls


def _static_names(cls: type, localns: Mapping[str, Any]) -> set[str]:
    globalns = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
    statics: set[str] = set()
    for f in dataclasses.fields(cls):
        if any(f.metadata.get(key, not value) == value for key, value in _STATIC_METADATA):
            statics.add(f.name)
            continue
        owner = _defining_class(cls, f)
        owner_layout = layout_of(owner)
        if owner_layout is not None:
            if f.name in owner_layout.statics:
                statics.add(f.name)
            continue
        if owner is cls:
            namespace, local = globalns, localns
        else:
            module = sys.modules.get(owner.__module__)
            # A base defined in the same function as `cls` is the likely case.
            namespace, local = (vars(module) if module else {}), localns
        where = f"field {f.name!r} of {cls.__qualname__}"
        if is_static_annotation(f.type, where, namespace, local):
            statics.add(f.name)
    return statics


def _layout(cls: type, localns: Mapping[str, Any]) -> Layout:
    names = [f.name for f in dataclasses.fields(cls)]
    if FLAT_ATTR in names:
        raise TypeError(f"{cls.__qualname__} may not have a field named {FLAT_ATTR!r}")
    statics = _static_names(cls, localns)
    return Layout(
        cls=cls,
        children=tuple(n for n in names if n not in statics),
        statics=tuple(n for n in names if n in statics),
        cached=not cls.__dict__.get("__slots__") and not _has_descriptor_field(cls, names),
    )


def _has_descriptor_field(cls: type, names: list[str]) -> bool:
    """A field stored behind a data descriptor cannot live in the instance `__dict__`."""
    for name in names:
        for klass in cls.__mro__:
            attribute: object = klass.__dict__.get(name)
            if attribute is not None and hasattr(type(attribute), "__set__"):
                return True
    return False


def _defining_class(cls: type, f: dataclasses.Field[Any]) -> type:
    """The class whose annotation created field `f` (fields are inherited as the same object)."""
    owner = cls
    for base in cls.__mro__[1:]:
        if base.__dict__.get("__dataclass_fields__", {}).get(f.name) is f:
            owner = base
    return owner


class _SharedArrayDefault:
    """Stands in for a JAX array default while `dataclasses` checks for mutable defaults.

    JAX arrays are immutable, so one default can be shared by every instance; the standard
    library only rejects them because they are unhashable.
    """

    def __init__(self, array: object) -> None:
        self.array = array


def _wrap_array_defaults(cls: type) -> dict[str, object]:
    wrapped: dict[str, object] = {}
    for name in inspect.get_annotations(cls):
        value = cls.__dict__.get(name)
        default = (
            cast("dataclasses.Field[object]", value).default
            if isinstance(value, dataclasses.Field)
            else value
        )
        if isinstance(default, np.ndarray):
            raise ValueError(
                f"field {name!r} of {cls.__qualname__} has a NumPy array as its default, which "
                "is mutable and would be shared by every instance. Use a JAX array "
                f"(jnp.asarray(...)) or field(default_factory=lambda: np.array(...))."
            )
        if isinstance(default, Array):
            wrapped[name] = default
            if isinstance(value, dataclasses.Field):
                value.default = _SharedArrayDefault(default)
            else:
                setattr(cls, name, _SharedArrayDefault(default))
    return wrapped


def _unwrap_array_defaults(cls: type, wrapped: dict[str, object]) -> None:
    for name, array in wrapped.items():
        cls.__dataclass_fields__[name].default = array  # type: ignore[attr-defined]  # cls is a dataclass now.
        if isinstance(cls.__dict__.get(name), _SharedArrayDefault):
            setattr(cls, name, array)


def _finishing_init(init: Callable[..., None]) -> Callable[..., None]:
    """Run `init` (which may assign `self.x = ...`), then check the fields and build the cache.

    Called through `super().__init__` from a subclass's own `__init__`, it only runs `init`:
    the outermost `__init__` finishes, once every field is set.
    """

    @functools.wraps(init)
    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        if is_constructing(self):
            init(self, *args, **kwargs)
            return
        token = begin_construction(self)
        try:
            init(self, *args, **kwargs)
        finally:
            end_permission(token)
        finish_construction(self)

    _FINISHING.add(__init__)
    return __init__


_FINISHING: weakref.WeakSet[Callable[..., None]] = weakref.WeakSet()
"""The `__init__`s `_finishing_init` made."""


def _add_pickle_support(cls: type, layout: Layout) -> None:
    """`__getstate__`/`__setstate__` that never go through our frozen `__setattr__`.

    The pickled state leaves out the flatten cache and `__setstate__` rebuilds it, so an
    object pickled before a class changed which fields are static cannot come back stale. A
    class's own hooks (or a base's) are kept; its `__setstate__` is followed by a refresh.
    """
    own_getstate = _own_hook(cls, "__getstate__")
    own_setstate = _own_hook(cls, "__setstate__")
    if own_setstate is not None:

        def __setstate__(self: object, state: Any) -> None:
            own_setstate(self, state)
            refresh(self)

    elif layout.cached:
        set_dict = dict_setter(cls)

        def __setstate__(self: object, state: Any) -> None:
            set_dict(self, dict(state))
            refresh(self)

    else:

        def __setstate__(self: object, state: Any) -> None:
            for name, value in state.items():
                object.__setattr__(self, name, value)

    if own_getstate is None:
        names = layout.children + layout.statics

        def __getstate__(self: object) -> dict[str, object]:
            return {name: getattr(self, name) for name in names}

        cls.__getstate__ = _ours(__getstate__, None)  # type: ignore[method-assign]  # Installing our method on the class.
    cls.__setstate__ = _ours(__setstate__, own_setstate)  # type: ignore[attr-defined]  # Installing our method on the class.


_WRAPS = "__jdc_wraps__"
"""Marks our pickle hooks, with the class's own hook that one wraps (or None)."""


def _ours(function: Callable[..., Any], wrapped: Callable[..., Any] | None) -> Callable[..., Any]:
    setattr(function, _WRAPS, wrapped)
    return function


def _own_hook(cls: type, name: str) -> Callable[..., Any] | None:
    """The class's (or a base's) own pickle hook, if any: not ours, not `object`'s."""
    for klass in cls.__mro__[:-1]:
        hook = klass.__dict__.get(name)
        if hook is not None:
            if hasattr(hook, _WRAPS):
                return cast(Callable[..., Any] | None, getattr(hook, _WRAPS))
            return cast(Callable[..., Any], hook)
    return None


def _declared_fields(cls: type) -> list[str]:
    """Annotated names a class body declares itself, other than `ClassVar`s."""
    names: list[str] = []
    for name, annotation in inspect.get_annotations(cls).items():
        if isinstance(annotation, str):
            if _CLASSVAR_SOURCE.match(annotation):
                continue
        elif annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar:
            continue
        names.append(name)
    return names


def _install_subclass_hook(cls: type) -> None:
    """Keep undecorated subclasses pytrees: adopt them, or refuse new undecorated fields."""
    own = cls.__dict__.get("__init_subclass__")

    def __init_subclass__(sub: type, /, **kwargs: Any) -> None:
        if own is not None:
            own.__func__(sub, **kwargs)
        else:
            super(cls, sub).__init_subclass__(**kwargs)  # type: ignore[arg-type]  # mypy wants a class literal; cls is one at run time
        _adopt(sub)

    cls.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]  # Installing our method on the class.


def _adopt(sub: type) -> None:
    if getattr(_decorating, "active", False) or layout_of(sub) is not None or sub in _pending_inits:
        return
    parent = next(found for base in sub.__mro__[1:] if (found := layout_of(base)) is not None)
    inherited = {
        f.name
        for base in sub.__mro__[1:]
        if dataclasses.is_dataclass(base)
        for f in dataclasses.fields(base)
    }
    known = set(parent.children + parent.statics)
    declared = [*_declared_fields(sub), *sorted(inherited - known)]
    if declared:
        _pending_inits[sub] = sub.__dict__.get("__init__")
        message = (
            f"{sub.__qualname__} subclasses a pytree dataclass and declares fields "
            f"{', '.join(map(repr, declared))} but is not decorated. Add @jdc.pytree_dataclass "
            f"above `class {sub.__name__}` so the new fields become part of the pytree."
        )

        def __init__(self: object, *args: object, **kwargs: object) -> None:
            raise TypeError(message)

        sub.__init__ = __init__  # type: ignore[misc]  # Installing our method on the class.
        return
    layout = dataclasses.replace(parent, cls=sub)
    register(layout)
    # The `__init__` that runs first: the subclass's own, or a plain mixin's. Wrap it, so that
    # construction is finished once it returns. (A pytree dataclass's `__init__` finishes
    # itself.)
    owner = next(klass for klass in sub.__mro__ if "__init__" in klass.__dict__)
    init = owner.__dict__["__init__"]
    if owner is sub or layout_of(owner) is None:
        sub.__init__ = _finishing_init(init)  # type: ignore[misc]  # Installing our method on the class.
    elif is_generated_init(init):  # The same fields: the subclass's own copy takes the fast path.
        sub.__init__ = make_init(sub, layout)  # type: ignore[misc]  # Installing our method on the class.


def _restore_init(cls: type) -> None:
    user_init = _pending_inits.pop(cls)
    if user_init is None:
        del cls.__init__  # type: ignore[misc]  # Back to the inherited __init__.
    else:
        cls.__init__ = user_init  # type: ignore[misc]  # Restoring the class's own __init__.
