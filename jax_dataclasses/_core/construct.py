"""Construction: the generated `__init__`, the wrapper around a class's own `__init__`, the
permission to assign fields while one runs, and the refusal of subclasses that cannot be
pytrees (docs/design/core.md).

The generated `__init__` has the signature `dataclasses` would give (the same parameters,
order, defaults, `kw_only` handling, `InitVar`s and `__post_init__` call). It sets each field
with `object.__setattr__`, as a frozen dataclass does, and checks static values as it goes.
A class's own `__init__`, and `__post_init__`, run with permission to assign fields
(`self.x = ...`), not other attributes (a `ContextVar`, per thread and asyncio task, read by
the frozen `__setattr__`); once they return, every field must be set and every static value
is checked. Then, as equinox runs them, every `__check_init__` that the instance's class and its
bases define (`run_check_inits`), never at unflatten.

An undecorated subclass is a pytree with its base's fields when it adds none (the builder
adopts it). One that adds fields (itself, or through an undecorated class between it and its
pytree base) is refused when it is constructed, with a message that names them and says to
decorate it (`undecorated_init`).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, NoReturn, cast

from jax_dataclasses._core import messages, static_values
from jax_dataclasses._core.codegen import AnnotationsOf, FunctionSource
from jax_dataclasses._core.record import Layout, layout_of, recorded
from jax_dataclasses._core.static_values import OK_TYPES, check_static_value, warn_once
from jax_dataclasses._field_declarations.scope import class_annotations, is_classvar

# -- permission to assign while constructing ------------------------------------------------

_CONSTRUCTING: ContextVar[list[object] | None] = ContextVar(
    "jax_dataclasses_constructing", default=None
)
"""A one-item list holding the object an own `__init__` is constructing; emptied at the end."""


Construction = tuple[list[object], Token[list[object] | None]]


def begin_construction(obj: object) -> Construction | None:
    """Let the own `__init__` now constructing `obj` assign its fields, until
    `end_construction`. None if an `__init__` further out (`super().__init__`) already does."""
    if is_constructing(obj):
        return None
    cell = [obj]
    return cell, _CONSTRUCTING.set(cell)


def end_construction(started: Construction) -> None:
    cell, token = started
    cell.clear()
    _CONSTRUCTING.reset(token)


def is_constructing(obj: object) -> bool:
    """Whether an own `__init__` is constructing `obj` in this context."""
    constructing = _CONSTRUCTING.get()
    return bool(constructing) and constructing[0] is obj  # type: ignore[index]  # Not empty.


# -- the generated __init__ and own __init__s ----------------------------------------------


class _FactorySentinel:
    def __repr__(self) -> str:
        return "<factory>"


_HAS_DEFAULT_FACTORY = _FactorySentinel()


def is_initvar(f: dataclasses.Field[Any]) -> bool:
    """Whether `f` (from a class's `__dataclass_fields__`) is an `InitVar`, not a field."""
    marker = getattr(dataclasses, "_FIELD_INITVAR", None)
    return marker is not None and getattr(f, "_field_type", None) is marker


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def init_parameters(cls: type) -> list[dataclasses.Field[Any]]:
    """Fields and InitVars that `__init__` takes, in the order `dataclasses` uses."""
    all_fields: dict[str, dataclasses.Field[Any]] = getattr(cls, "__dataclass_fields__")  # noqa: B009
    for f in all_fields.values():
        # Passed to `__post_init__`, it would be a name `dataclasses`' `__init__` never defines
        # (`NameError` at construction); without one, it is nothing, there as here.
        if is_initvar(f) and not f.init and hasattr(cls, "__post_init__"):
            raise TypeError(messages.INITVAR_INIT_FALSE.format(field=f.name, cls=cls.__qualname__))
    params = [
        f for f in all_fields.values() if f.init and (f in dataclasses.fields(cls) or is_initvar(f))
    ]
    positional = [f for f in params if not f.kw_only]
    seen_default = None
    for f in positional:
        if _has_default(f):
            seen_default = f
        elif seen_default is not None:
            raise TypeError(
                f"non-default argument {f.name!r} follows default argument "
                f"{seen_default.name!r} in {cls.__qualname__}"
            )
    return positional + [f for f in params if f.kw_only]


def init_source(
    cls: type,
    statics: tuple[str, ...],
    params: list[dataclasses.Field[Any]] | None = None,
) -> FunctionSource:
    """`cls.__init__`: set every field, check static values, call `__post_init__`. `params`:
    `init_parameters(cls)`, if the caller has them."""
    params = init_parameters(cls) if params is None else params
    fields = dataclasses.fields(cls)
    post_init = hasattr(cls, "__post_init__")
    names = {f.name for f in params} | {f.name for f in fields}
    this = "__dataclass_self__" if "self" in names else "self"
    # Helpers by what the class is (the same when a pending class is decided: `take_code`);
    # every other helper costs compile time.
    helpers: dict[str, object] = {
        "__jdc_setattr": object.__setattr__,
        "__jdc_type": type,
        "__jdc_cls": cls,
        "__jdc_registered": check_constructible,
        "__jdc_check_inits": run_check_inits,
        "__jdc_static_values": static_values,  # Its `OK_TYPES`, by reference.
        "__jdc_check": check_static_value,
    }
    signature = [this]
    body = [f"if __jdc_type({this}) is not __jdc_cls: __jdc_registered({this})"]
    checks = len(body)
    for f in params:
        if f.kw_only and "*" not in signature:
            signature.append("*")
        default = f"__jdc_dflt_{f.name}"
        if f.default_factory is not dataclasses.MISSING:
            helpers[default] = f.default_factory
            helpers["__jdc_factory"] = _HAS_DEFAULT_FACTORY
            signature.append(f"{f.name}=__jdc_factory")
            body.append(f"if {f.name} is __jdc_factory: {f.name} = {default}()")
        elif f.default is not dataclasses.MISSING:
            helpers[default] = f.default
            signature.append(f"{f.name}={default}")
        else:
            signature.append(f.name)
    stored = [f.name for f in fields if f.init]
    for f in fields:
        default = f"__jdc_dflt_{f.name}"
        if f.init:
            continue
        if f.default_factory is not dataclasses.MISSING:
            helpers[default] = f.default_factory
            body.append(f"{f.name} = {default}()")
        elif f.default is not dataclasses.MISSING:
            if inspect.getattr_static(cls, f.name, None) is f.default:
                # As `dataclasses` does: the class attribute holds the value, so `vars(obj)`
                # has only what `__init__` takes (and `cls(**vars(obj))` works).
                if f.name in statics:
                    check_static_value(cls, f.name, f.default)
                continue
            helpers[default] = f.default
            body.append(f"{f.name} = {default}")
        elif not post_init:  # Refused when constructed (a subclass's `__post_init__` may set it).
            helpers["__jdc_unset"] = raise_unset
            body.insert(checks, f"__jdc_unset(__jdc_type({this}), {f.name!r})")
            continue
        else:
            continue
        stored.append(f.name)
    if not post_init:  # Otherwise after `__post_init__`, which may still change them.
        body.extend(
            f"if __jdc_type({name}) not in __jdc_static_values.OK_TYPES: "
            f"__jdc_check(__jdc_type({this}), {name!r}, {name})"
            for name in statics
            if name in stored
        )
    body.extend(f"__jdc_setattr({this}, {name!r}, {name})" for name in stored)
    if post_init:
        # In field order, as `dataclasses` passes them (not parameter order: keyword-only
        # parameters come last there).
        all_fields: dict[str, dataclasses.Field[Any]] = getattr(cls, "__dataclass_fields__")  # noqa: B009
        initvars = "".join(
            f", {f.name}" for f in all_fields.values() if is_initvar(f) and f in params
        )
        derived = tuple(f.name for f in fields if not f.init)
        helpers["__jdc_derived"] = derived
        helpers["__jdc_post_init"] = run_post_init
        body.append(f"__jdc_post_init({this}, __jdc_derived{initvars})")
    if has_check_init(cls):  # Found as the class is built (no cost without one): a subclass
        # that runs this `__init__` and brings its own wraps it (`adopt`, `wrap_own_init`).
        body.append(f"__jdc_check_inits({this})")
    annotations = init_annotations(cls, params)
    return FunctionSource("__init__", signature, body, helpers, annotations, checks)


if sys.version_info >= (3, 14):
    import annotationlib
    from annotationlib import Format

    def init_annotations(cls: type, params: list[dataclasses.Field[Any]]) -> AnnotationsOf:
        """An `__annotate__` function for the generated `__init__`, as `dataclasses` gives its
        own on Python 3.14: the parameters' annotations read from the class bodies in the
        format asked for, so names defined after the class resolve once they exist."""
        names = [f.name for f in params]

        def __annotate__(format: int, /) -> dict[str, object]:
            if format not in (Format.VALUE, Format.FORWARDREF, Format.STRING):
                raise NotImplementedError(format)
            declared: dict[str, object] = {}
            for klass in reversed(cls.__mro__):
                declared.update(annotationlib.get_annotations(klass, format=Format(format)))
            annotations = {name: declared[name] for name in names if name in declared}
            annotations["return"] = "None" if format == Format.STRING else None
            return annotations

        __annotate__.__qualname__ = f"{cls.__qualname__}.__init__.__annotate__"
        return __annotate__

else:

    def init_annotations(cls: type, params: list[dataclasses.Field[Any]]) -> AnnotationsOf:
        """The generated `__init__`'s `__annotations__`: each parameter's as `dataclasses`
        read it (a string under `from __future__ import annotations`)."""
        return {f.name: f.type for f in params} | {"return": None}


def raise_unset(cls: type, name: str) -> NoReturn:
    raise TypeError(messages.UNSET_INIT_FALSE.format(field=name, cls=cls.__qualname__))


def wrap_own_init(init: Callable[..., None]) -> Callable[..., None]:
    """`init` (a class's own, or an inherited one that does not know every field), run with
    permission to assign fields, then checked: every field set, every static value good.

    Called through `super().__init__` from another own `__init__`, it only runs `init`: the
    outermost `__init__` checks, once every field is set.
    """

    @functools.wraps(init)
    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        started = begin_construction(self)
        if started is None:
            init(self, *args, **kwargs)
            return
        try:
            check_constructible(self)
            init(self, *args, **kwargs)
        finally:
            end_construction(started)
        check_fields(self)
        run_check_inits(self)

    return __init__


CHECK_INIT = "__check_init__"


def has_check_init(cls: type) -> bool:
    """Whether `cls` or a base defines equinox's `__check_init__`."""
    return any(CHECK_INIT in klass.__dict__ for klass in cls.__mro__)


def run_check_inits(obj: object) -> None:
    """Run equinox's `__check_init__` as equinox runs it, once an instance is constructed: the
    one of each class in the MRO of `obj`'s class that defines one, the class's own first, on
    the frozen instance (a migrated base's checks keep running for every subclass, without
    `super()`). Not while an own `__init__` further out (`super().__init__`) is still
    constructing `obj`: that one runs them when it returns. JAX's unflatten, `copy_and_mutate`
    and `eqx.tree_at` run none, as in equinox."""
    if is_constructing(obj):
        return
    for klass in type(obj).__mro__:
        check = klass.__dict__.get(CHECK_INIT)
        if check is not None:
            check(obj)


class DerivedFieldWarning(UserWarning):
    """`__post_init__` set an `init=False` field: it is a leaf, not recomputed by JAX.

    jax_dataclasses 1.6 left `init=False` fields out of the tree and ran `__post_init__` again
    when JAX rebuilt an object, so a field computed from others (`inv_mass = 1 / mass`)
    followed them. Now it is a leaf like any field, and unflatten runs no `__post_init__`:
    `jax.grad` does not reach `mass` through it, and after `tree_map` (an optimizer update)
    it keeps its old value. Emitted once per class and field, at construction.

    Make a derived value a `@property` (or compute it where it is used). For a field that
    really is state, silence it for that field:
    `warnings.filterwarnings("ignore", "field 'step' of Counter", jdc.DerivedFieldWarning)`.

    Examples:
        >>> import warnings
        >>> @jdc.pytree_dataclass
        ... class Body:
        ...     mass: float
        ...     inv_mass: float = jdc.field(init=False)
        ...     def __post_init__(self):
        ...         self.inv_mass = 1 / self.mass
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     body = Body(2.0)
        >>> caught[0].category.__name__
        'DerivedFieldWarning'
    """


_UNSET = object()


def run_post_init(obj: object, derived: tuple[str, ...], *initvars: object) -> None:
    """`obj.__post_init__(*initvars)`, with the permission an own `__init__` has: it may assign
    fields (`self.x = ...`), not other attributes. Then check the fields, and warn about the
    `init=False` fields (`derived`) it set."""
    before = [getattr(obj, name, _UNSET) for name in derived] if derived else None
    started = begin_construction(obj)
    if started is None:  # An own `__init__` further out grants, and checks when it returns.
        obj.__post_init__(*initvars)  # type: ignore[attr-defined]  # Only called when defined.
    else:
        try:
            obj.__post_init__(*initvars)  # type: ignore[attr-defined]
        finally:
            end_construction(started)
        check_fields(obj)
    if before is not None:  # Most classes have no init=False field: nothing to compare.
        for name, old in zip(derived, before, strict=True):
            if getattr(obj, name, _UNSET) is not old:
                _warn_derived(type(obj), name)


def _warn_derived(cls: type, name: str) -> None:
    static = name in cast(Layout, layout_of(cls)).statics  # Only registered classes run it.
    what = messages.DERIVED_STATIC if static else messages.DERIVED_CHILD
    message = messages.DERIVED_FIELD.format(field=name, cls=cls.__qualname__, what=what)
    warn_once(cls, name, message, DerivedFieldWarning)


def check_fields(obj: object) -> None:
    """After an own `__init__` or `__post_init__`: every field is set, static values are good."""
    cls = type(obj)
    layout = layout_of(cls)
    if layout is None:
        raise_unregistered(cls)
    for name in layout.fields:
        try:
            value = getattr(obj, name)
        except AttributeError:
            raise TypeError(
                messages.INIT_DID_NOT_SET.format(cls=cls.__qualname__, field=name)
            ) from None
        if name in layout.statics and type(value) not in OK_TYPES:
            check_static_value(cls, name, value)


# -- subclasses -----------------------------------------------------------------------------


def new_fields(sub: type) -> list[str]:
    """Fields an undecorated subclass of a pytree dataclass adds to those of its pytree base:
    annotations that it, or an undecorated class between it and that base, declares (not
    `ClassVar`s, not re-annotated inherited fields), fields of plain dataclass bases, and
    the base's fields when `dataclasses` finds the subclass's fields elsewhere (a plain
    dataclass listed before the pytree base). Only `@pytree_dataclass` can make those part
    of the pytree; each comes with the class that declares it."""
    parent = next(found for base in sub.__mro__[1:] if (found := recorded(base)) is not None)
    known = set(parent.fields)
    inherited = {
        f.name
        for base in sub.__mro__[1:]
        if dataclasses.is_dataclass(base)
        for f in dataclasses.fields(base)
    }
    declared = [
        f"{name!r}" + ("" if klass is sub else f" (declared by {klass.__qualname__})")
        for klass in sub.__mro__
        if issubclass(klass, parent.cls) and recorded(klass) is None
        for name in _annotated_names(klass)
        if name not in known | inherited
    ]
    declared += [repr(name) for name in sorted(inherited - known)]
    resolved = {f.name for f in dataclasses.fields(sub)}
    if not declared and resolved != known:
        owner = next(k for k in sub.__mro__ if "__dataclass_fields__" in k.__dict__)
        declared = [
            f"{name!r} (of {parent.cls.__qualname__}, which dataclasses does not see: it reads "
            f"the fields of {owner.__qualname__}, an earlier base)"
            for name in parent.fields
        ]
    return declared


def _annotated_names(cls: type) -> list[str]:
    """Annotated names a class body declares itself, other than `ClassVar`s."""
    return [
        name for name, annotation in class_annotations(cls).items() if not is_classvar(annotation)
    ]


def raise_unregistered(cls: type) -> NoReturn:
    """Explain why subclass `cls` of a pytree dataclass is not a pytree itself."""
    declared = new_fields(cls)
    decorator = _other_decorator(cls)
    if declared and decorator is not None:
        base = next(b for b in cls.__mro__[1:] if recorded(b) is not None)
        raise TypeError(
            messages.OTHER_DECORATOR.format(
                cls=cls.__qualname__,
                base=base.__qualname__,
                decorator=decorator,
                fields=", ".join(declared),
            )
        )
    if declared:
        raise TypeError(
            messages.UNDECORATED_NEW_FIELDS.format(
                cls=cls.__qualname__, fields=", ".join(declared), name=cls.__name__
            )
        )
    raise TypeError(messages.NEVER_REGISTERED.format(cls=cls.__qualname__))


def other_pytree_maker(cls: type) -> str | None:
    """What else makes `cls` a dataclass or pytree (left over from a migration), with the fix."""
    bases = {f"{base.__module__}.{base.__qualname__}": base for base in cls.__mro__[1:]}
    if any(name.startswith("equinox.") and name.endswith("._module.Module") for name in bases):
        return messages.EQUINOX_BASE
    if cls.__dict__.get("_flax_dataclass"):
        node = bases.get("flax.struct.PyTreeNode")
        if node is not None:
            via = next(base for base in cls.__mro__[1:] if issubclass(base, node))
            through = "" if via is node else f" (through {via.__qualname__})"
            return messages.FLAX_BASE.format(through=through)
        return messages.FLAX_DECORATOR
    params = cls.__dict__.get("__dataclass_params__")
    if params is not None and "__setattr__" in cls.__dict__:
        return messages.FROZEN_DATACLASS
    return None


def _other_decorator(cls: type) -> str | None:
    """The dataclass decorator other than ours that was applied to `cls`, if one was."""
    if cls.__dict__.get("_flax_dataclass"):
        return "@flax.struct.dataclass"
    if "__dataclass_params__" in cls.__dict__:
        return "@dataclasses.dataclass"
    return None


UNDECORATED_ATTR = "__jdc_undecorated__"
"""On an `__init__` that adoption installed on an undecorated subclass: the class's own
`__init__` it stands for (None if the class body defined none), which a decorator that runs
later takes instead."""


def undecorated_init(cls: type, own: Callable[..., None] | None) -> Callable[..., None]:
    """`__init__` for an undecorated subclass `cls` that adds fields, which would not be in the
    pytree: constructing it, or an undecorated subclass of it, raises. A registered subclass
    constructed through it (`super().__init__()`) runs `own`, or the next `__init__` in its
    MRO, as without it. A decorator that runs later on `cls` puts back `own` (kept on it)."""

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        if layout_of(type(self)) is None:
            raise_unregistered(type(self))
        if own is not None:
            own(self, *args, **kwargs)
        else:
            super(cls, self).__init__(*args, **kwargs)  # type: ignore[arg-type]  # mypy wants a class literal

    setattr(__init__, UNDECORATED_ATTR, own)
    if own is not None:  # `dataclasses` follows it to mend `super()` in a `slots=True` copy.
        __init__.__wrapped__ = own  # type: ignore[attr-defined]
    return __init__


def failed_init(cls: type, error: Exception, own: object) -> Callable[..., None]:
    """`__init__` for a subclass whose build as it was created failed with `error`: it raises
    that failure, until a decorator builds the class (keeping `own`, the class's own
    `__init__`, for it)."""
    message = messages.FAILED_AT_CREATION.format(cls=cls.__qualname__, error=str(error).rstrip("."))

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        raise TypeError(message) from error

    setattr(__init__, UNDECORATED_ATTR, own)
    setattr(__init__, FAILED_ATTR, error)
    return __init__


FAILED_ATTR = "__jdc_failed__"
"""On the `__init__` of a class whose build as it was created failed: the failure."""


def abstract_methods(cls: type) -> frozenset[str]:
    """The abstract methods of `cls` that nothing overrides, found as `abc.ABCMeta` finds them,
    for a class `abc.ABCMeta` does not make: a base migrated from `eqx.Module` (an ABC) keeps
    refusing instances (empty for an ABC: `dataclasses` has it recompute its own)."""
    if isinstance(cls, abc.ABCMeta):
        return frozenset()
    names = {name for name, value in cls.__dict__.items() if _is_abstract(value)}
    for base in cls.__mro__[1:]:
        inherited: frozenset[str] = getattr(base, "__abstractmethods__", frozenset())
        names.update(name for name in inherited if _is_abstract(getattr(cls, name, None)))
    return frozenset(names)


def _is_abstract(value: object) -> bool:
    return getattr(value, "__isabstractmethod__", False) is True


def check_constructible(obj: object) -> None:
    """An inherited or own `__init__` is about to construct `obj`: its class must be a
    registered pytree, with its pending annotations decided (`layout_of` decides them)."""
    if layout_of(type(obj)) is None:
        raise_unregistered(type(obj))
