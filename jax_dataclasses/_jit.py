"""`jit`: `jax.jit` whose static arguments come from `Static[...]` annotations (docs/design/features.md).

The result is `jax.jit`'s own object (wrapped in `staticmethod`/`classmethod` when given one),
so calls dispatch exactly as fast as a hand-written `jax.jit(..., static_argnames=...)`: all the
work happens once, when the function is decorated.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from inspect import Parameter
from types import MethodType
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    TypedDict,
    TypeVar,
    cast,
    overload,
)

import jax
from jax.stages import Lowered, Traced
from typing_extensions import ParamSpec, Unpack

from jax_dataclasses._field_declarations.forms import StaticAnnotationError
from jax_dataclasses._field_declarations.reader import Names, Pending, read
from jax_dataclasses._field_declarations.scope import defining_scope, signature_of

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

_jax_jit = cast("Callable[..., Any]", jax.jit)  # pyright: ignore[reportUnknownMemberType]  # jaxlib: no stubs
_POSITIONAL = (Parameter.POSITIONAL_ONLY, Parameter.POSITIONAL_OR_KEYWORD)
_NAMED = (Parameter.POSITIONAL_OR_KEYWORD, Parameter.KEYWORD_ONLY)
_VARIADIC = (Parameter.VAR_POSITIONAL, Parameter.VAR_KEYWORD)


class JitOptions(TypedDict, total=False):
    """The keywords of `jax.jit`; any other keyword the installed JAX accepts is passed on too."""

    in_shardings: Any
    out_shardings: Any
    static_argnums: int | Sequence[int] | None
    static_argnames: str | Iterable[str] | None
    donate_argnums: int | Sequence[int] | None
    donate_argnames: str | Iterable[str] | None
    keep_unused: bool
    device: Any  # A `jax.Device`; typed `Any` because jaxlib ships no stubs for it.
    backend: str | None
    inline: bool
    compiler_options: dict[str, Any] | None
    explain_recompiles: Literal["warn", "log"] | None
    """Ours, not `jax.jit`'s: report each new compilation (`explain_recompiles`)."""


class JitDecorator(Protocol):
    """What `jit(**options)` returns: a decorator with the same typing as `jit(fn)`.

    A jitted function is typed as the function itself (its own type, as in 1.6): so it is bound
    by both mypy and pyright exactly like the function it replaces, as a method (including
    `Self` return types), under `@staticmethod` and above `@classmethod`, and keeps every
    overload of an overloaded function. Its
    `lower`, `trace` and `eval_shape` exist at run time but are not visible to checkers.
    """

    @overload
    def __call__(self, fn: staticmethod[_P, _R], /) -> staticmethod[_P, _R]: ...

    @overload
    def __call__(self, fn: classmethod[_T, _P, _R], /) -> classmethod[_T, _P, _R]: ...

    @overload
    def __call__(self, fn: _F, /) -> _F: ...


@overload
def jit(fn: staticmethod[_P, _R], /, **options: Unpack[JitOptions]) -> staticmethod[_P, _R]: ...


@overload
def jit(
    fn: classmethod[_T, _P, _R], /, **options: Unpack[JitOptions]
) -> classmethod[_T, _P, _R]: ...


@overload
def jit(fn: _F, /, **options: Unpack[JitOptions]) -> _F: ...


@overload
def jit(*, fun: _F, **options: Unpack[JitOptions]) -> _F: ...


@overload
def jit(fn: None = None, /, **options: Unpack[JitOptions]) -> JitDecorator: ...


def jit(fn: Any = None, /, **options: Any) -> Any:
    """`jax.jit` with static arguments read from `Static[...]` parameter annotations.

    Use as `@jit` or `@jit(**options)`, where `options` are `jax.jit`'s keywords (passed on;
    explicit `static_argnums`/`static_argnames` are merged with the annotations). Accepts
    functions, methods, `staticmethod`s and `classmethod`s (whose `cls` is static; put
    `@jit` above `@classmethod`). Positional-only static parameters become
    `static_argnums`, the others `static_argnames`. For a function, method or staticmethod,
    the result is `jax.jit`'s own object (with `explain_recompiles`, a wrapper that
    forwards to it), with `lower`, `trace` and `eval_shape`; a classmethod comes back as a
    classmethod around it. To type checkers, the result is the function itself.

    Args:
        fn: The function, when used without parentheses.
        **options: Keywords of `jax.jit` (`donate_argnums`, `in_shardings`, ...), and
            `explain_recompiles="warn"` or `"log"`: report each new compilation, naming what
            changed in the arguments (`jdc.explain_recompiles`); off by default.

    Returns:
        The jitted function (or, with parentheses, a decorator that makes one).

    Raises:
        StaticAnnotationError: `Static` nested inside a parameter's annotation, or on
            `*args`/`**kwargs`.
        ValueError: a parameter that is both static and donated.

    Examples:
        >>> @jdc.jit
        ... def tile(x: jax.Array, times: jdc.Static[int]) -> jax.Array:
        ...     return jnp.tile(x, times)  # `times` is a Python int here
        >>> tile(jnp.ones(2), 3).shape
        (6,)
    """
    if fn is None and "fun" in options:  # 1.6's keyword: `jit(fun=f)`.
        fn = options.pop("fun")
    if fn is None:
        return cast(JitDecorator, functools.partial(_jit, options=options))
    return _jit(fn, options=options)


def _jit(fn: object, *, options: dict[str, Any]) -> object:
    if isinstance(fn, staticmethod | classmethod):
        func = cast("Callable[..., Any]", fn.__func__)  # pyright: ignore[reportUnknownMemberType]
        if isinstance(fn, staticmethod):
            return staticmethod(_jit_callable(func, options, static_first=False))
        return classmethod(_jit_callable(func, options, static_first=True))
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, MethodType) and isinstance(owner, type) and _is_classmethod_of(owner, fn):
        # `getattr(cls, name)` of a classmethod: stay a classmethod so `setattr` restores one.
        jitted = _jit_callable(fn.__func__, options, static_first=True)
        return _JitClassMethod(jitted, owner)
    if not callable(fn):
        raise TypeError(
            f"jit expects a function, method, staticmethod or classmethod, got {fn!r}. "
            "Write @jdc.jit (or @jdc.jit(...)) directly above a def."
        )
    return _jit_callable(fn, options, static_first=False)


def _jit_callable(
    fn: Callable[..., Any],
    options: Mapping[str, Any],
    *,
    static_first: bool,
) -> Any:
    """`jax.jit(fn, ...)` with annotated statics merged into `static_argnums`/`static_argnames`.

    `static_first` makes the first positional argument static (a classmethod's `cls`).
    """
    try:
        signature = signature_of(fn)  # What jax.jit itself reads; follows `__wrapped__`.
    except (TypeError, ValueError):
        signature = None
    params: Mapping[str, Parameter] = signature.parameters if signature else {}
    where = getattr(fn, "__qualname__", repr(fn))
    opts = dict(options)
    explain = opts.pop("explain_recompiles", None)
    static = _selected(
        params, where, "static", opts.pop("static_argnums", None), opts.pop("static_argnames", None)
    )
    donated = _selected(
        params, where, "donate", opts.get("donate_argnums"), opts.get("donate_argnames")
    )
    annotated, pending = _annotated_statics(fn, params, where)
    static |= annotated
    if static_first:
        static |= _selected(params, where, "static", 0, None)
    both = [repr(name) for name in params if name in static & donated]
    both += [repr(key) for key in sorted(static & donated, key=str) if key not in params]
    if both:
        raise ValueError(
            f"jit of {where}: argument {', '.join(both)} is both static (a Static[...] "
            "annotation, static_argnums or static_argnames) and donated (donate_argnums or "
            "donate_argnames). A static argument has no buffer to donate: remove it from the "
            "donation, or make it dynamic."
        )
    kinds = {name: p.kind for name, p in params.items()}
    positional = [name for name, kind in kinds.items() if kind in _POSITIONAL]
    argnums = [i for i, name in enumerate(positional) if name in static]
    argnums += sorted(key for key in static if isinstance(key, int))
    argnames = [name for name, kind in kinds.items() if kind in _NAMED and name in static]
    # Names jax.jit must judge itself: `**kwargs` entries, or a misplaced `*args` name.
    argnames += sorted(
        key for key in static if isinstance(key, str) and kinds.get(key) in (None, *_VARIADIC)
    )
    if pending and signature is not None:
        fn = _deciding_first(fn, pending, signature)
    jitted = _jax_jit(fn, static_argnums=tuple(argnums), static_argnames=tuple(argnames), **opts)
    if explain is None:
        return jitted
    from jax_dataclasses._diagnostics.recompiles import explained  # Imported when first asked for.

    return explained(jitted, explain, (argnums, argnames))


def _deciding_first(
    fn: Callable[..., Any], pending: list[Pending], signature: inspect.Signature
) -> Callable[..., Any]:
    """`fn`, deciding the parameters whose annotations named something not defined yet when
    it is first traced (before any compilation): one that is `Static` now is an error, since
    `jax.jit` was told it is not. The wrapper carries `fn`'s signature as read here, so that
    `jax.jit` does not evaluate the annotations again (Python 3.14 would fail on the name)."""

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        while pending:
            item = pending[0]
            if item.decide().static:
                raise StaticAnnotationError(
                    f"the annotation of {item.where} is Static, but what makes it Static was "
                    "not defined yet when the function was jitted, so jax.jit was told it is "
                    "not static. Define the alias (say, `MyStatic = jdc.Static[int]`) before "
                    "the function, or write Static[...] in the annotation itself."
                )
            pending.remove(item)
        return fn(*args, **kwargs)

    traced.__signature__ = signature  # type: ignore[attr-defined]
    return traced


def _selected(
    params: Mapping[str, Parameter],
    where: str,
    option: str,
    argnums: object,
    argnames: object,
) -> set[str | int]:
    """The parameters that `<option>_argnums`/`<option>_argnames` select, by name; positions
    past the named parameters (into `*args`) stay numbers, unknown names (`**kwargs`) names."""
    positional = [name for name, p in params.items() if p.kind in _POSITIONAL]
    selected: set[str | int] = set()
    for index in _items(argnums, int, f"{option}_argnums", where):
        selected.add(positional[index] if 0 <= index < len(positional) else index)
    selected.update(_items(argnames, str, f"{option}_argnames", where))
    return selected


def _items(value: object, kind: type[_T], option: str, where: str) -> tuple[_T, ...]:
    """`value` as a tuple of `kind`: jax.jit takes one item, an iterable of them, or None."""
    if value is None:
        return ()
    items = (value,) if isinstance(value, int | str) else value
    result = tuple(cast(Iterable[object], items)) if isinstance(items, Iterable) else None
    if result is None or not all(
        isinstance(item, kind) and not isinstance(item, bool) for item in result
    ):
        raise TypeError(
            f"jit of {where}: {option} must be one {kind.__name__} or a sequence of them, "
            f"got {value!r}"
        )
    return cast(tuple[_T, ...], result)


def _annotated_statics(
    fn: Callable[..., Any],
    params: Mapping[str, Parameter],
    where: str,
) -> tuple[set[str | int], list[Pending]]:
    """The parameters annotated `Static`, and those whose annotations name something not
    defined yet (decided when the function is first traced)."""
    inner = _innermost(fn)
    globalns: Mapping[str, Any] = getattr(inner, "__globals__", {})
    qualname = getattr(inner, "__qualname__", "")
    scope = defining_scope(qualname, getattr(inner, "__module__", ""), globalns)
    static: set[str | int] = set()
    pending: list[Pending] = []
    for name, param in params.items():
        if param.annotation is Parameter.empty:
            continue
        described = f"parameter {name!r} of {where}"
        names: Names = {}
        reading = read(param.annotation, described, scope, names=names)
        if reading.pending:
            pending.append(Pending(name, described, param.annotation, scope, names))
        if reading.static:
            if param.kind in _VARIADIC:
                star = "*" if param.kind is Parameter.VAR_POSITIONAL else "**"
                raise StaticAnnotationError(
                    f"Static cannot mark {star}{name} ({described}): jax.jit makes arguments "
                    "static one position or name at a time. Give the static value its own "
                    "parameter, or pass static_argnums/static_argnames to jit explicitly."
                )
            static.add(name)
    return static, pending


def _innermost(fn: object) -> object:
    """The function whose annotations `fn` has: the innermost one behind `functools.wraps`,
    bound methods and `functools.partial`, or a callable object's `__call__`."""
    seen: set[int] = set()
    inner: object = fn
    while inner is not None and id(inner) not in seen:
        seen.add(id(inner))
        fn, inner = inner, _inner(inner)
    if not hasattr(fn, "__globals__") and not isinstance(fn, type):
        fn = type(fn).__call__  # A callable object: its class's `__call__`.
    return fn


def _inner(fn: object) -> object:
    """The callable behind a `functools.wraps` wrapper, bound method or partial, else None."""
    if isinstance(fn, functools.partial):
        return cast("functools.partial[object]", fn).func
    return getattr(fn, "__wrapped__", None) or getattr(fn, "__func__", None)


def _is_classmethod_of(owner: type, method: MethodType) -> bool:
    """Whether `method` is a classmethod of `owner` (its own or inherited), bound to `owner`."""
    return any(
        getattr(attr, "__func__", None) is method.__func__ and isinstance(attr, classmethod)
        for klass in owner.__mro__
        for attr in vars(klass).values()
    )


if TYPE_CHECKING:
    _ClassMethod = classmethod[Any, ..., Any]
else:
    _ClassMethod = classmethod  # Not subscriptable at runtime.


class _JitClassMethod(_ClassMethod):
    """`jit(Model.create)` of a classmethod: a classmethod again, so that storing it on a class
    keeps subclasses binding `cls` to themselves, and also callable (with `lower`, `trace`,
    `eval_shape`) like the bound method it was made from."""

    def __init__(self, jitted: Any, owner: type) -> None:
        super().__init__(jitted)
        self._jitted = jitted
        self._owner = owner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._jitted(self._owner, *args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        lowered: Lowered = self._jitted.lower(self._owner, *args, **kwargs)
        return lowered

    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        traced: Traced = self._jitted.trace(self._owner, *args, **kwargs)
        return traced

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        return self._jitted.eval_shape(self._owner, *args, **kwargs)
