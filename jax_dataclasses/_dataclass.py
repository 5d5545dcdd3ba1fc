"""`pytree_dataclass`: a frozen standard-library dataclass registered as a JAX pytree node.

`_process_class` reads top to bottom, like CPython's `dataclasses._process_class`: check the
class, let `dataclasses` collect its fields, decide which are static, generate the methods,
install them in one place, register the class with JAX. Undecorated subclasses go through
`_adopt` (from the `__init_subclass__` we install), which reuses the same steps.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, cast

import numpy as np
from jax import Array

from jax_dataclasses._annotations import (
    class_annotations,
    pseudo_field_kind,
    signature_of,
    static_marks,
)
from jax_dataclasses._codegen import make_functions
from jax_dataclasses._construct import (
    UNDECORATED_ATTR,
    init_parameters,
    init_source,
    settler,
    subclass_hook,
    wrap_own_init,
)
from jax_dataclasses._frozen import MUTABILITY_ATTR, Mutability, frozen_delattr, frozen_setattr
from jax_dataclasses._printing import dataclass_repr, repr_pretty
from jax_dataclasses._registry import install, layout_of, register, tree_sources

_RESERVED_PREFIX = "__jdc_"  # The generated code's helpers.


_OPTIONS: Mapping[str, bool] = MappingProxyType(
    {
        # The keywords of `dataclasses.dataclass`, with its defaults (a test compares them on
        # each Python). Each reaches `dataclasses` as given, except where `_dataclass_options`
        # says otherwise: our `__init__`, frozen always, a hash by fields unless the class has
        # its own.
        "init": True,
        "repr": True,
        "eq": True,
        "order": False,
        "unsafe_hash": False,
        "frozen": True,
        "match_args": True,
        "kw_only": False,
        "slots": False,
        "weakref_slot": False,
    }
)


def pytree_dataclass(cls: type | None = None, /, **options: bool) -> Any:
    """Make `cls` a frozen dataclass registered as a JAX pytree node.

    Use as `@pytree_dataclass` or `@pytree_dataclass(...)`. Fields annotated `Static[T]` (or
    with field metadata `static=True` / `pytree_node=False`) are static: stored in the tree
    structure, so `jax.jit` caches on them. Every other field is a child, flattened by JAX
    under its name (`GetAttrKey`). Unflattening rebuilds an instance field by field, without
    running `__init__` or `__post_init__`.

    The keyword arguments are those of `dataclasses.dataclass` (`init`, `repr`, `eq`, `order`,
    `unsafe_hash`, `frozen`, `match_args`, `kw_only`, `slots`, `weakref_slot`), with its
    defaults, and mean the same, except `frozen`: instances are always frozen, and
    `frozen=False` is refused.

    Args:
        cls: The class, when used without parentheses.
        options: `dataclasses.dataclass`'s keyword arguments.

    Returns:
        The class, registered with JAX (or a decorator that makes it so, with parentheses).

    Raises:
        TypeError: `frozen=False`; an undecorated subclass with new fields, when instantiated;
            an array in a static field, at construction.
        StaticAnnotationError: `Static` nested inside an annotation (`Optional[Static[int]]`).
        ValueError: a NumPy array as a field default (it is mutable; a JAX array is fine).

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Particle:
        ...     position: jax.Array
        ...     mass: jdc.Static[float] = 1.0
        >>> p = Particle(jnp.zeros(3))
        >>> jax.tree_util.keystr(jax.tree_util.tree_flatten_with_path(p)[0][0][0])
        '.position'
        >>> jax.jit(lambda p: p.position + p.mass)(p)
        Array([1., 1., 1.], dtype=float32)
    """
    unknown = sorted(options.keys() - _OPTIONS.keys())
    if unknown:
        raise TypeError(f"pytree_dataclass() got an unexpected keyword argument {unknown[0]!r}")
    options = {**_OPTIONS, **options}
    if options["frozen"] is not True:
        raise TypeError(
            "pytree_dataclass(frozen=False) is not supported: instances are always frozen, "
            "because JAX may share and cache them. Edit a copy with jdc.copy_and_mutate(obj) "
            "or jdc.replace(obj, ...)."
        )

    def wrap(target: type) -> type:
        return _process_class(target, options)

    return wrap if cls is None else wrap(cls)


pytree_dataclass.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # For help() and IDEs at run time.
    [inspect.Parameter("cls", inspect.Parameter.POSITIONAL_ONLY, default=None)]
    + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d in _OPTIONS.items()]
)


def _process_class(target: object, options: dict[str, bool]) -> type:
    cls = _check_decoratable(target)
    own_init = cls.__dict__.get("__init__")
    own_repr = "__repr__" in cls.__dict__
    if hasattr(own_init, UNDECORATED_ATTR):  # Installed by `_adopt` before this decorator ran.
        own_init = getattr(own_init, UNDECORATED_ATTR)
    dataclass_options = _dataclass_options(cls, options)
    own_doc = cls.__doc__ is not None
    hidden, stand_ins = _hide_array_defaults(cls)
    if not own_doc:  # `dataclasses` would make one from the signature of an `__init__` to come.
        stand_ins["__doc__"] = _DOC_PLACEHOLDER
    install(cls, stand_ins)
    try:
        # cast: checkers cannot pick an overload of `dataclass` for `**kwargs`.
        made = cast(type, dataclasses.dataclass(cls, **dataclass_options))
    except BaseException:  # `dataclasses` refused the class: leave it as it was.
        install(cls, _restore_array_defaults(cls, hidden) | ({} if own_doc else {"__doc__": None}))
        raise
    cls = made
    restored = _restore_array_defaults(cls, hidden)
    if restored:
        install(cls, restored)

    names = [f.name for f in dataclasses.fields(cls)]
    reserved = [name for name in names if name.startswith(_RESERVED_PREFIX)]
    if reserved:
        raise TypeError(f"{cls.__qualname__} may not have a field named {reserved[0]!r}")
    for f in dataclasses.fields(cls):
        if callable(f.metadata.get("converter")):
            raise TypeError(
                f"field {f.name!r} of {cls.__qualname__} has a converter (equinox's "
                "field(converter=...)), which pytree_dataclass does not run: the value would "
                "be stored unconverted. Remove it and convert in __init__ or __post_init__ "
                f"(self.{f.name} = jnp.asarray(self.{f.name}))."
            )
    registered = {base: layout for base in cls.__mro__[1:] if (layout := layout_of(base))}
    marks, pending = static_marks(cls, registered)
    children = tuple(n for n in names if n not in marks)
    static_fields = tuple(n for n in names if n in marks)

    methods: dict[str, object] = {
        "__setattr__": frozen_setattr,
        "__delattr__": frozen_delattr,
        "__init_subclass__": subclass_hook(cls),
    }
    sources = tree_sources(cls, children, static_fields, bool(pending))
    if options["init"] and own_init is None:
        sources.append(init_source(cls, static_fields, bool(pending)))
    else:
        if options["init"]:  # Field order errors, as `dataclasses` raises them then.
            init_parameters(cls)
        # The class's own `__init__`, or (init=False) the one it inherits, which knows only
        # the base's fields: either way, check the fields once it has run.
        init = own_init or next(
            klass.__dict__["__init__"] for klass in cls.__mro__[1:] if "__init__" in klass.__dict__
        )
        if init is not object.__init__:
            methods["__init__"] = wrap_own_init(init)
    if dataclass_options["unsafe_hash"]:  # `dataclasses` generated a hash of the fields.
        methods["__hash__"] = _hash_naming_the_field(cls.__dict__["__hash__"])
    if options["repr"] and not own_repr:
        methods["__repr__"] = dataclass_repr
        methods["_repr_pretty_"] = repr_pretty
    if not hasattr(cls, MUTABILITY_ATTR):  # What 1.6 code reads on any instance.
        methods[MUTABILITY_ATTR] = Mutability.FROZEN
    if options["slots"] and not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        # `dataclasses` gives only frozen slots classes pickle support that skips __setattr__.
        methods["__getstate__"] = _slots_getstate
        methods["__setstate__"] = _slots_setstate
    functions = make_functions(cls, sources)  # One compile for all of them.
    methods.update((name, functions[name]) for name in ("__init__",) if name in functions)
    marks_of_statics = tuple(marks[name] for name in static_fields)
    settle = (
        settler(cls, children, static_fields, marks_of_statics, pending, functions.get("__init__"))
        if pending
        else None
    )
    register(cls, children, static_fields, marks_of_statics, functions, pending, settle)
    if not own_doc:  # As `dataclasses` makes it, from the `__init__` the class now has.
        methods["__doc__"] = cls.__name__ + _text_signature(cls, methods.get("__init__"))
    install(cls, methods)
    return cls


_DOC_PLACEHOLDER = "(to be generated)"


def _text_signature(cls: type, init: object) -> str:
    try:
        signature = signature_of(init if callable(init) else cls)
    except (TypeError, ValueError):
        return ""
    if callable(init):  # The unbound `__init__`: drop `self`.
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return str(signature).replace(" -> None", "")


def _check_decoratable(cls: object) -> type:
    if not isinstance(cls, type):
        raise TypeError(
            f"pytree_dataclass decorates classes, got {cls!r}. Write @pytree_dataclass (or "
            "@pytree_dataclass(...)) directly above a class statement."
        )
    if cls.__dict__.get("__setattr__") is frozen_setattr:
        raise TypeError(f"{cls.__qualname__} is already a pytree dataclass: decorate it once.")
    leftover = _other_pytree_maker(cls)
    if leftover is not None:
        raise TypeError(f"{cls.__qualname__} {leftover}")
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} defines {name}, which pytree_dataclass must own to keep "
                "instances frozen. Remove it; use jdc.copy_and_mutate to edit copies."
            )
    return cls


def _other_pytree_maker(cls: type) -> str | None:
    """What else makes `cls` a dataclass or pytree (left over from a migration), with the fix."""
    bases = {f"{base.__module__}.{base.__qualname__}": base for base in cls.__mro__[1:]}
    if any(name.startswith("equinox.") and name.endswith("._module.Module") for name in bases):
        return (
            "subclasses equinox.Module, which makes every subclass a dataclass registered with "
            "JAX itself. Remove the eqx.Module base and keep @jdc.pytree_dataclass (see "
            "'Migrating from equinox' in the docs)."
        )
    if cls.__dict__.get("_flax_dataclass"):
        node = bases.get("flax.struct.PyTreeNode")
        if node is not None:
            via = next(base for base in cls.__mro__[1:] if issubclass(base, node))
            through = "" if via is node else f" (through {via.__qualname__})"
            return (
                f"subclasses flax.struct.PyTreeNode{through}, which makes every subclass a flax "
                "dataclass registered with JAX. Remove that base and keep @jdc.pytree_dataclass "
                "(for TrainState, see 'Migrating from flax.struct' in the docs)."
            )
        return (
            "is already a flax dataclass registered with JAX: remove @flax.struct.dataclass "
            "and keep @jdc.pytree_dataclass (flax's field(pytree_node=False) still works)."
        )
    params = cls.__dict__.get("__dataclass_params__")
    if params is not None and "__setattr__" in cls.__dict__:
        return (
            "is already a frozen dataclass: remove @dataclasses.dataclass(frozen=True) and "
            "keep @jdc.pytree_dataclass, which makes the dataclass (with the same options)."
        )
    return None


def _dataclass_options(cls: type, options: dict[str, bool]) -> dict[str, bool]:
    """The arguments for `dataclasses.dataclass`: our `__init__`, `__setattr__` and hash."""
    explicit_hash = "__hash__" in cls.__dict__ and not (
        cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__
    )
    # Frozen to `dataclasses` too (so frozen plain dataclasses can be bases and subclasses,
    # and slots classes get its pickle support), unless a base is a non-frozen dataclass,
    # which `dataclasses` would refuse to combine. Our `__setattr__` does the freezing.
    frozen = all(
        getattr(base, "__dataclass_params__").frozen  # noqa: B009
        for base in cls.__mro__[1:]
        if getattr(base, "__dataclass_fields__", None) is not None
    )
    # Hash like a frozen dataclass (by fields) unless the class brings its own.
    unsafe_hash = options["unsafe_hash"] or (options["eq"] and not explicit_hash)
    return dict(options, init=False, frozen=frozen, unsafe_hash=unsafe_hash)


def _hash_naming_the_field(generated: Callable[[object], int]) -> Callable[[object], int]:
    """The hash `dataclasses` generated, whose error for an unhashable field (an array) says
    which field, and why something hashed the instance."""

    @functools.wraps(generated)
    def __hash__(self: object) -> int:
        try:
            return generated(self)
        except TypeError:
            raise TypeError(_unhashable_message(self)) from None

    return __hash__


def _unhashable_message(obj: object) -> str:
    cls = type(obj)
    field = next(
        (
            f.name
            for f in dataclasses.fields(obj)  # type: ignore[arg-type]
            if (f.hash or (f.hash is None and f.compare)) and not _hashable(getattr(obj, f.name))
        ),
        "?",
    )
    value = type(getattr(obj, field, None)).__name__
    return (
        f"cannot hash {cls.__qualname__}: field {field!r} holds a value of type {value}, which "
        "is unhashable "
        "(a pytree dataclass hashes its fields, as a frozen dataclass does). Given to jax.jit "
        "as the function to compile (jax.jit(model)), an instance is hashed: compile its "
        "method instead, jax.jit(type(model).__call__)(model, ...), or decorate the method "
        "with @jdc.jit. As a static value, hold hashable values in it."
    )


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _slots_getstate(self: object) -> list[object]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]  # type: ignore[arg-type]


def _slots_setstate(self: object, state: list[object]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=True):  # type: ignore[arg-type]
        object.__setattr__(self, f.name, value)


class _SharedArrayDefault:
    """Stands in for a JAX array default while `dataclasses` checks for mutable defaults.

    JAX arrays are immutable, so one default can be shared by every instance; the standard
    library only rejects them because they are unhashable.
    """

    def __init__(self, array: object) -> None:
        self.array = array


Hidden = dict[str, tuple[object, "dataclasses.Field[object] | None"]]
"""Each JAX-array default hidden from `dataclasses`: the array, and the user's `Field` holding it."""


def _hide_array_defaults(cls: type) -> tuple[Hidden, dict[str, object]]:
    """Hide each JAX-array default of `cls` from `dataclasses`: in the user's `Field`s here,
    and in the class attributes returned (stand-ins, by name) for the caller to install."""
    hidden: Hidden = {}
    stand_ins: dict[str, object] = {}
    for name, annotation in class_annotations(cls).items():
        value: object = getattr(cls, name, None)  # Inherited too, as `dataclasses` reads them.
        field = cast("dataclasses.Field[object]", value) if _is_field(value) else None
        default = value if field is None else field.default
        if isinstance(default, np.ndarray) and pseudo_field_kind(annotation) is None:
            raise ValueError(
                f"field {name!r} of {cls.__qualname__} has a NumPy array as its default, which "
                "is mutable and would be shared by every instance. Use a JAX array "
                f"(jnp.asarray(...)) or field(default_factory=lambda: np.array(...))."
            )
        if isinstance(default, Array):
            hidden[name] = (default, field)
            if field is not None:
                field.default = _SharedArrayDefault(default)
            else:
                stand_ins[name] = _SharedArrayDefault(default)
    return hidden, stand_ins


def _is_field(value: object) -> bool:
    return isinstance(value, dataclasses.Field)


def _restore_array_defaults(cls: type, hidden: Hidden) -> dict[str, object]:
    """Put the arrays back in the fields `dataclasses` made of `cls` (if it did) and the
    user's `Field`s; the class attributes to put back (by name) are returned, to install."""
    made: dict[str, dataclasses.Field[object]] = cls.__dict__.get("__dataclass_fields__", {})
    attributes: dict[str, object] = {}
    for name, (array, field) in hidden.items():
        for holder in (field, made.get(name)):
            if holder is not None:
                holder.default = array
        if isinstance(cls.__dict__.get(name), _SharedArrayDefault):
            attributes[name] = array
    return attributes
