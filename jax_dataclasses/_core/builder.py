"""The class builder: every pytree dataclass is built here, in one flow.

`_decorate` reads as a sequence of named steps, like CPython's `dataclasses._process_class`:
check the class, let `dataclasses` collect its fields, declare every field (the one reading of
its annotations, `_field_declarations`), choose its methods, compile its generated functions
once, install them once, register it (`_core.record.register`). Its record, the `Layout`,
holds everything decided. The other entry points take the same steps: an undecorated subclass
(`adopt`), names not yet defined at decoration (`_Deferral.settle`, at the first use, through
the generated functions' one trampoline, `waiting`), and a class cloudpickle rebuilds (`reload`).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

from jax_dataclasses._core import messages
from jax_dataclasses._core.codegen import make_functions, take_code
from jax_dataclasses._core.construct import (
    FAILED_ATTR,
    UNDECORATED_ATTR,
    abstract_methods,
    failed_init,
    has_check_init,
    init_parameters,
    init_source,
    new_fields,
    other_pytree_maker,
    undecorated_init,
    wrap_own_init,
)
from jax_dataclasses._core.defaults import (
    hide_array_defaults,
    refuse_numpy_defaults,
    restore_array_defaults,
)
from jax_dataclasses._core.frozen import (
    MUTABILITY_ATTR,
    Mutability,
    frozen_delattr,
    frozen_setattr,
    hash_naming_the_field,
    slots_getstate,
    slots_setstate,
)
from jax_dataclasses._core.options import (
    OPTIONS,
    checked_options,
    dataclass_options,
    record_options,
)
from jax_dataclasses._core.printing import repr_methods
from jax_dataclasses._core.record import (
    LAYOUT_ATTR,
    Changes,
    Layout,
    inherited_evolution,
    layout_of,
    recorded,
    register,
    tree_sources,
    waiting,
)
from jax_dataclasses._field_declarations.evolution import declared_evolution
from jax_dataclasses._field_declarations.forms import NO_EVOLUTION, Evolution, refuse_dropped_frozen
from jax_dataclasses._field_declarations.reader import (
    Declaration,
    Pending,
    declare,
)
from jax_dataclasses._field_declarations.scope import (
    Scope,
    class_scope,
    declaring_class,
    signature_of,
)

_RESERVED_PREFIX = "__jdc_"  # The generated code's helpers.


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
    checked = checked_options(options)

    def wrap(target: type) -> type:
        return _decorate(target, checked)

    return wrap if cls is None else wrap(cls)


pytree_dataclass.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # For help() and IDEs at run time.
    [inspect.Parameter("cls", inspect.Parameter.POSITIONAL_ONLY, default=None)]
    + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d in OPTIONS.items()]
)


def _decorate(
    target: object, options: dict[str, bool], written: Mapping[str, object] | None = None
) -> type:
    """Build a decorated class, step by step: check it, let `dataclasses` collect its fields,
    check them, declare every field (the one reading of its annotations), choose its methods,
    generate and compile its functions once, install them once, register it. `written`: the
    namespace as written of a class built as it is created (`_subclass_hook`); what the build
    changes is recorded (`Layout.built`), for a decorator that comes after to take back."""
    cls = _check_decoratable(target)
    own = _Written.of(cls)
    cls = _run_dataclasses(cls, dataclass_options(cls, options), own.doc)
    all_fields = _check_fields(cls)
    declarations, pending, inherited = _declare(cls, all_fields)
    evolution = declared_evolution(cls, declarations, inherited_evolution(cls))
    params = _init_parameters(cls, options, written)
    methods = _methods(cls, options, own.init)
    record_options(cls, options)
    generate_init = options["init"] and own.init is None
    if options["repr"] and not own.repr:
        methods |= repr_methods(cls)
    deferral = _Deferral.of(cls, pending, inherited)
    layout = _compile(cls, declarations, deferral, generate_init, evolution, params)
    _install(cls, _with_generated(cls, methods, layout.init, own))
    register(layout if written is None else layout.replace(built=_changes(cls, written)))
    return cls


class _Written(NamedTuple):
    """What a class defines itself, read before `dataclasses` adds its own."""

    init: Callable[..., None] | None
    repr: bool
    doc: bool

    @classmethod
    def of(cls, target: type) -> _Written:
        init = target.__dict__.get("__init__")
        init = getattr(init, UNDECORATED_ATTR, init)  # Installed by `adopt` before we ran.
        return cls(init, "__repr__" in target.__dict__, target.__doc__ is not None)


def _check_fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The class's fields, as `dataclasses` collected them, refusing those we cannot keep."""
    all_fields = dataclasses.fields(cls)
    for f in all_fields:
        if f.name.startswith(_RESERVED_PREFIX):
            raise TypeError(f"{cls.__qualname__} may not have a field named {f.name!r}")
        if callable(f.metadata.get("converter")):
            raise TypeError(messages.CONVERTER.format(field=f.name, cls=cls.__qualname__))
    return all_fields


def _init_parameters(
    cls: type, options: dict[str, bool], written: Mapping[str, object] | None
) -> list[dataclasses.Field[Any]] | None:
    """`__init__`'s parameters (with `init=True`), refusing field order errors as `dataclasses`
    raises them then; a class built as it is created is first put back as `written`, since
    `kw_only=True` may mend it, and a decorator may come (`_NeedsOptions`)."""
    try:
        return init_parameters(cls) if options["init"] else None
    except TypeError as error:
        if written is not None:
            _undo(cls, _changes(cls, written))
            raise _NeedsOptions(error) from error
        raise


def _methods(
    cls: type, options: dict[str, bool], own_init: Callable[..., None] | None
) -> dict[str, object]:
    """The methods and attributes every class gets, apart from the generated functions."""
    methods: dict[str, object] = {
        "__setattr__": frozen_setattr,
        "__delattr__": frozen_delattr,
        "__init_subclass__": _subclass_hook(cls),
    }
    if not options["init"] or own_init is not None:
        # The class's own `__init__`, or (init=False) the one it inherits, which knows only
        # the base's fields: either way, check the fields once it has run.
        init = own_init or next(
            klass.__dict__["__init__"] for klass in cls.__mro__[1:] if "__init__" in klass.__dict__
        )
        if init is not object.__init__:
            methods["__init__"] = wrap_own_init(init)
    if "__hash__" in cls.__dict__ and cls.__dataclass_params__.unsafe_hash:  # type: ignore[attr-defined]
        methods["__hash__"] = hash_naming_the_field(cls.__dict__["__hash__"])
    if not hasattr(cls, MUTABILITY_ATTR):  # What 1.6 code reads on any instance.
        methods[MUTABILITY_ATTR] = Mutability.FROZEN
    if options["slots"] and not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        # `dataclasses` gives only frozen slots classes pickle support that skips __setattr__.
        methods["__getstate__"] = slots_getstate
        methods["__setstate__"] = slots_setstate
    abstract = abstract_methods(cls)
    if abstract:  # Refused at construction, as an `abc.ABC` is (`object.__new__` checks).
        methods["__abstractmethods__"] = abstract
    return methods


def _with_generated(
    cls: type, methods: dict[str, object], init: Callable[..., None] | None, own: _Written
) -> dict[str, object]:
    """`methods` and the generated `__init__`, each the class's own: copied with it
    (cloudpickle, `copy`), never inherited; and the docstring `dataclasses` would make, from
    the `__init__` the class now has."""
    if init is not None:
        methods = methods | {"__init__": init}
    if not own.doc:
        methods["__doc__"] = cls.__name__ + _text_signature(cls, methods.get("__init__"))
    return methods


def _run_dataclasses(cls: type, dataclass_options: dict[str, bool], own_doc: bool) -> type:
    """`dataclasses.dataclass(cls, ...)`, with JAX-array defaults hidden from its mutable-default
    check (and a NumPy array default refused with our message), and without the docstring
    it would make from an `__init__` not there yet. A refused class is left as it was."""
    hidden, stand_ins = hide_array_defaults(cls)
    if not own_doc:
        stand_ins["__doc__"] = _DOC_PLACEHOLDER
    _install(cls, stand_ins)
    try:
        # cast: checkers cannot pick an overload of `dataclass` for `**kwargs`.
        made = cast(type, dataclasses.dataclass(cls, **dataclass_options))
        refuse_numpy_defaults(made, hidden)
    except BaseException:  # `dataclasses` (or we) refused the class: leave it as it was.
        _install(cls, restore_array_defaults(cls, hidden) | ({} if own_doc else {"__doc__": None}))
        raise
    _install(made, restore_array_defaults(made, hidden))
    return made


def _declare(
    cls: type, all_fields: tuple[dataclasses.Field[Any], ...]
) -> tuple[tuple[Declaration, ...], tuple[Pending, ...], dict[str, type]]:
    """Every field's declaration: read from the annotation of the class that declared it, in
    the scope that defines that class, or taken from the registered base that declared it.
    Also the fields still pending, and those inherited from a base with pending names."""
    declarations: list[Declaration] = []
    pending: list[Pending] = []
    inherited: dict[str, type] = {}
    scopes: dict[type, Scope] = {}
    for f in all_fields:
        owner = declaring_class(cls, f)
        base = recorded(owner) if owner is not cls else None
        if base is not None:
            declarations.append(base.declaration(f.name))
            if base.pending:
                inherited[f.name] = owner
            continue
        if owner not in scopes:
            scopes[owner] = class_scope(owner)
        declared, waiting = declare(f.name, owner, f.type, f.metadata, scopes[owner])
        if waiting is None:  # A pending one is checked as it is decided (`_Deferral`).
            _check_keeps_frozen(owner, declared)
        declarations.append(declared)
        if waiting is not None:
            pending.append(waiting)
    return tuple(declarations), tuple(pending), inherited


def _check_keeps_frozen(cls: type, declared: Declaration) -> None:
    """Refuse a child of `cls` that re-declares without `Frozen` a field that the nearest
    registered base having it declares `Frozen` (as recorded: no use of the base). A static
    value is never trained, so re-declaring it static stays allowed."""
    for base in cls.__mro__[1:]:
        layout = recorded(base)
        if layout is not None and declared.name in layout.fields:
            inherited = layout.declaration(declared.name)
            if inherited.frozen and not declared.frozen and declared.static is None:
                refuse_dropped_frozen(declared.name, declared.owner, inherited.owner)
            return


def _compile(
    cls: type,
    declarations: tuple[Declaration, ...],
    deferral: _Deferral | None,
    generate_init: bool,
    evolution: Evolution = NO_EVOLUTION,
    params: list[dataclasses.Field[Any]] | None = None,
    built: Changes | None = None,
) -> Layout:
    """The class's layout, with its generated functions compiled in one go."""
    children = tuple(d.name for d in declarations if d.static is None)
    statics = tuple(d.name for d in declarations if d.static is not None)
    sources = tree_sources(cls, children, statics)
    if generate_init:
        sources.append(init_source(cls, statics, params))
    sources = [waiting(source) for source in sources] if deferral is not None else sources
    functions = make_functions(cls, sources)
    settle = deferral.settle if deferral is not None else None
    return Layout(cls, declarations, functions, reload, settle, evolution, built)


class _Deferral:
    """The one deferral: names that a class's annotations used before they were defined are
    decided at the class's first use (each generated function is the trampoline `waiting`,
    which calls `settle` first, as does everything that reads the declarations): only those
    names are looked up, in the scope that defines the class as it is then; every other name
    keeps the value it had at decoration (`Pending.names`). Then the class is built again, and
    its functions take the new code in place: it then costs what any class costs. A field
    whose name is still undefined (imported under `TYPE_CHECKING` only) is a child, for good."""

    def __init__(self, cls: type, pending: tuple[Pending, ...], inherited: dict[str, type]):
        self.cls = cls
        self.pending = {p.name: p for p in pending}
        self.inherited = inherited
        """Fields taken from a base with pending names: its decisions, once it has made them."""
        self.lock = threading.Lock()

    @classmethod
    def of(
        cls, owner: type, pending: tuple[Pending, ...], inherited: dict[str, type]
    ) -> _Deferral | None:
        return cls(owner, pending, inherited) if pending or inherited else None

    def settle(self) -> None:
        with self.lock:  # One decision, even when threads construct at once.
            layout = recorded(self.cls)
            if layout is None or not layout.pending:  # Decided by another thread.
                return
            declarations = tuple(self._decide(d) for d in layout.declarations)
            evolution = declared_evolution(  # Checked as decided.
                self.cls, declarations, inherited_evolution(self.cls)
            )
            init = layout.init
            rebuilt = _compile(
                self.cls, declarations, None, init is not None, evolution, built=layout.built
            )  # What an automatic build changed stays its record.
            # `__init__` first: once the record is no longer pending, a call that decides
            # finds nothing to wait for and calls `__init__` again, which must be decided.
            # (Until then a new `__init__` may meet the old flatten, which waits, then calls
            # the decided one.)
            if init is not None and rebuilt.init is not None:
                take_code(init, rebuilt.init)
                rebuilt = rebuilt.replace(functions={"__init__": init})  # The class holds it.
            register(rebuilt)

    def _decide(self, declared: Declaration) -> Declaration:
        waiting = self.pending.get(declared.name)
        if waiting is not None:
            decided = waiting.declaration()
            _check_keeps_frozen(self.cls, decided)
            return decided
        base = self.inherited.get(declared.name)
        if base is None:
            return declared
        return cast(Layout, layout_of(base)).declaration(declared.name)  # Decided first.


def reload(
    cls: type,
    declarations: tuple[Declaration, ...],
    evolution: Evolution = NO_EVOLUTION,
    init: Callable[..., None] | None = None,
) -> Layout:
    """Register a class cloudpickle rebuilds, as it unpickles the class's attributes, with our
    `__init__` as decided in the pickling process (`Layout.__reduce__`). A pickle made before
    classes had an `Evolution` has none."""
    layout = _compile(cls, declarations, None, False, evolution)
    register(layout if init is None else layout.replace(functions={"__init__": init}))
    return cast(Layout, recorded(cls))


# -- undecorated subclasses -----------------------------------------------------------------


def _subclass_hook(cls: type) -> classmethod[Any, Any, None]:
    """`__init_subclass__` for `cls`: its own (or the inherited one), then `adopt`.

    Every decorated class has one, and each calls the next through `super()`, so a subclass
    with several decorated classes above it (levels, or several bases) meets several: only
    the one of its nearest decorated base (first in its MRO) adopts it, so adoption runs
    once per class. Below a base that also carries `typing.dataclass_transform` (as type
    checkers read it: its subclasses are dataclasses), a subclass is built as a pytree
    dataclass, with the dataclass options among its class keywords (`class Sub(Base,
    kw_only=True)`).
    """
    own = cls.__dict__.get("__init_subclass__")

    def __init_subclass__(sub: type, /, **kwargs: Any) -> None:
        nearest = _nearest_decorated_base(sub) is cls
        automatic = nearest and _makes_pytree_subclasses(sub)
        options = {name: kwargs.pop(name) for name in OPTIONS if automatic and name in kwargs}
        if own is not None:
            own.__func__(sub, **kwargs)
        else:
            super(cls, sub).__init_subclass__(**kwargs)  # type: ignore[arg-type]  # mypy wants a class literal; cls is one at run time
        if automatic:
            _build_automatically(sub, options)
        elif nearest:
            adopt(sub)

    return classmethod(__init_subclass__)


def _makes_pytree_subclasses(sub: type) -> bool:
    """Whether a pytree dataclass above `sub` carries `typing.dataclass_transform`."""
    return any(
        "__dataclass_transform__" in base.__dict__ and recorded(base) is not None
        for base in sub.__mro__[1:]
    )


def _build_automatically(sub: type, options: dict[str, object]) -> None:
    """Build a subclass as it is created. A build that fails where options could help (fields
    in an order only `kw_only=True` allows) leaves the class as it was, with an `__init__`
    that raises the failure, since a decorator that comes next may build it again with them;
    a class below such a class is refused (its fields would be missing). Any other failure is
    raised as the class is created."""
    unknown = [name for name in ("slots", "weakref_slot") if options.get(name)]
    if unknown:
        raise TypeError(
            messages.SLOTS_KEYWORD.format(
                cls=sub.__qualname__, keyword=unknown[0], name=sub.__name__
            )
        )
    for base in sub.__mro__[1:]:  # Its fields would not be fields of `sub` either.
        failed: BaseException | None = getattr(base.__dict__.get("__init__"), FAILED_ATTR, None)
        if failed is not None:
            raise TypeError(
                messages.FAILED_BASE.format(
                    cls=sub.__qualname__,
                    base=base.__qualname__,
                    failed=failed,
                    base_name=base.__name__,
                )
            ) from failed
    try:
        _decorate(sub, checked_options(options), _as_written(sub))
    except _NeedsOptions as needs:  # The class is as it was (`_decorate` took its work back).
        own = sub.__dict__.get("__init__")
        _install(sub, {"__init__": failed_init(sub, needs.error, own)})


class _NeedsOptions(Exception):
    """An automatic build that options may mend (`kw_only=True` for the field order)."""

    def __init__(self, error: TypeError) -> None:
        super().__init__(str(error))
        self.error = error


_HOOK_CODE = _subclass_hook(object).__func__.__code__


def _nearest_decorated_base(sub: type) -> type | None:
    """The first base of `sub` in its MRO that `@pytree_dataclass` decorated: the one whose
    own `__init_subclass__` a `_subclass_hook` made (all of them share one code object)."""
    for base in sub.__mro__[1:]:
        function = getattr(base.__dict__.get("__init_subclass__"), "__func__", None)
        if getattr(function, "__code__", None) is _HOOK_CODE:
            return base
    return None


def adopt(sub: type) -> None:
    """Register an undecorated subclass with its pytree base's fields, so its instances are
    pytrees too. (A decorator that runs later, on it or on the `slots=True` copy `dataclasses`
    makes of it, registers it again with its own fields.)

    One that adds fields is not registered, and gets an `__init__` that says to decorate it
    (keeping its own for the decorator), since a decorator that runs later (ours, or
    `dataclasses`', which keeps an `__init__` it finds) may not come."""
    if recorded(sub) is not None:
        return
    if new_fields(sub):
        _install(sub, {"__init__": undecorated_init(sub, sub.__dict__.get("__init__"))})
        return
    parent = next(found for base in sub.__mro__[1:] if (found := recorded(base)) is not None)
    # The `__init__` that runs first: the subclass's own, or a plain mixin's, knows nothing of
    # our rules: wrap it. A pytree dataclass's `__init__` checks for itself, and runs the
    # `__check_init__`s where its class has one: wrapped, where only the subclass brings one.
    methods: dict[str, object] = {}
    owner = next(klass for klass in sub.__mro__ if "__init__" in klass.__dict__)
    own_checks = has_check_init(sub) and not has_check_init(owner)
    if owner is not object and (owner is sub or recorded(owner) is None or own_checks):
        wrapped = wrap_own_init(owner.__dict__["__init__"])
        setattr(wrapped, UNDECORATED_ATTR, sub.__dict__.get("__init__"))
        methods["__init__"] = wrapped
    abstract = abstract_methods(sub)
    if abstract:
        methods["__abstractmethods__"] = abstract
    _install(sub, methods)
    inherited = {d.name: parent.cls for d in parent.declarations} if parent.pending else {}
    deferral = _Deferral.of(sub, (), inherited)
    register(_compile(sub, parent.declarations, deferral, False, parent.evolution))


# -- the methods every class gets, and how they are installed -------------------------------


def _changes(cls: type, before: Mapping[str, object]) -> Changes:
    """What a build changed on `cls`, whose namespace was `before`: for each attribute, its
    name, its value before (`_GONE`: none) and the one the build left (`Layout.built`). The
    record apart: its registration with JAX stays (a build that follows gives JAX's
    functions new code)."""
    names = [*before, *(name for name in cls.__dict__ if name not in before)]
    return tuple(
        (name, before.get(name, _GONE), cls.__dict__.get(name, _GONE))
        for name in names
        if name != LAYOUT_ATTR and cls.__dict__.get(name, _GONE) is not before.get(name, _GONE)
    )


def _as_written(cls: type) -> dict[str, object]:
    """The namespace of `cls` before a build, each `Field` in it copied: `dataclasses` fills
    them in (`kw_only` among them), and a decorator that follows must find them as written."""
    fields = [name for name, value in cls.__dict__.items() if isinstance(value, dataclasses.Field)]
    return {**cls.__dict__, **{name: copy.copy(cls.__dict__[name]) for name in fields}}


def _undo(cls: type, changes: Changes) -> None:
    """Take back a build's `changes` where the class still holds what the build left. What
    another decorator did since (an attribute it added, a method it wrapped) stays, as the
    standard library keeps every decorator's work: never a namespace put back whole."""
    ours = [(name, was) for name, was, left in changes if cls.__dict__.get(name, _GONE) is left]
    for name, was in ours:
        if was is _GONE:
            delattr(cls, name)
    _install(cls, {name: was for name, was in ours if was is not _GONE})


_GONE = object()


def _install(cls: type, attributes: Mapping[str, object]) -> None:
    """Set each of `attributes` on `cls`: the one place where the package sets attributes on a
    user's class (the layout apart, which `register` keeps there)."""
    for name, value in attributes.items():
        setattr(cls, name, value)


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
        raise TypeError(messages.NOT_A_CLASS.format(target=cls))
    layout = recorded(cls)
    if layout is not None and layout.built is not None:  # Built as it was created.
        _undo(cls, layout.built)
    elif cls.__dict__.get("__setattr__") is frozen_setattr:
        raise TypeError(f"{cls.__qualname__} is already a pytree dataclass: decorate it once.")
    leftover = other_pytree_maker(cls)
    if leftover is not None:
        raise TypeError(f"{cls.__qualname__} {leftover}")
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            raise TypeError(messages.OWNS_SETATTR.format(cls=cls.__qualname__, method=name))
    return cls
