"""A report on each new compilation of a jitted function: `explain_recompiles`, and
`jdc.jit(explain_recompiles=...)` (docs/design/diagnostics.md).

The wrapper runs each call with a `ContextVar` holding a list for the call, and one
`jax.monitoring` listener, registered when the first function is wrapped, appends to that list
when JAX traces, lowers or compiles during it: exactly the calls that cost a compilation, not
those that only missed the dispatch cache (a NumPy array where a JAX array was, which traces
nothing). Such a call is recorded (`_diagnostics.explain.record`: shapes, dtypes, shardings and static
values, never arrays, and JAX's tracing context) and compared with the nearest of the last
`HISTORY` signatures, and the differences go to `warnings` or `logging`. A call that adds an
entry to the jitted function's dispatch cache without compiling, and the first call, are
recorded too, without a report, so that the next compilation is compared with them: JAX's
caches belong to the Python function, so a `jax.jit` of it called before it was wrapped, or
another `jax.jit` of it, compiles what this one then reuses. A call that reuses a compilation
costs the context-variable set and reset and two reads of the cache's size.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import logging
import threading
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeGuard, TypeVar, cast

import jax
from jax._src import config as _config
from jax._src import source_info_util

from jax_dataclasses._core.static_values import warn_at_user
from jax_dataclasses._diagnostics.explain import Comparison, JitDiff, local_name, same
from jax_dataclasses._diagnostics.records import Record, record, static, text_of

_F = TypeVar("_F", bound=Callable[..., Any])
Report = Literal["warn", "log"]
HISTORY = 32
"""How many earlier compilations of one function are kept to compare a new one with."""
_LOGGER = logging.getLogger("jax_dataclasses")
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_EVENTS = frozenset(
    {
        _TRACE,
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)
"""What JAX records when it traces, lowers and compiles (the same in jax 0.4.36 to 0.10.2)."""
_SEEN: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("_SEEN", default=None)
"""The JAX events seen during the explained call in progress, in this thread or task."""
_listening = False
_LISTEN_LOCK = threading.Lock()
LINES = 20
"""How many differences a report lists; it counts the others."""


class RecompileWarning(UserWarning):
    """A function wrapped by `jdc.explain_recompiles` (or made by
    `jdc.jit(explain_recompiles="warn")`) was traced or compiled again.

    The message names what changed in the arguments against the nearest earlier call that
    compiled. Emitted once per new compilation, at the line that called the function. Make it
    an error in a test with `warnings.simplefilter("error", jdc.RecompileWarning)`.

    Examples:
        >>> import warnings
        >>> @jdc.jit(explain_recompiles="warn")
        ... def tile(x: jax.Array, times: jdc.Static[int]) -> jax.Array:
        ...     return jnp.tile(x, times)
        >>> _ = tile(jnp.ones(2), 2)
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("error", jdc.RecompileWarning)
        ...     try:
        ...         _ = tile(jnp.ones(2), 3)
        ...     except jdc.RecompileWarning as warning:
        ...         print(str(warning).splitlines()[1])
          times: 2 → 3 (static argument)
    """


def explain_recompiles(jitted: _F, /, *, report: Report = "warn") -> _F:
    """`jitted` (made by `jax.jit` or `jdc.jit`), reporting each call that compiles it again.

    The report names what changed in the arguments against the nearest earlier call that
    compiled, as `jit_diff` names it, from the argument's name (`state.layers[2].n_heads: 8
    → 4`), with the counts of traces and compilations so far; the first compilation is not
    reported. A call that reuses a compilation costs about a microsecond more. Only
    shapes, dtypes, shardings and static values of the last 32 compilations are kept, never
    an array. `jdc.jit(..., explain_recompiles=report)` does the same, knowing which
    arguments are static; here a static argument that is a Python number is named (as a
    "value") only when nothing else changed.

    The result calls `jitted`, binds as a method as it does, and forwards every other
    attribute to it (`lower`, `trace`, `eval_shape`, `clear_cache`); `traces` and
    `compilations` are its counts so far.

    Args:
        jitted: The jitted function.
        report: `"warn"`: a `jdc.RecompileWarning` at the caller's line; `"log"`: a warning
            on the `"jax_dataclasses"` logger.

    Returns:
        The reporting function, typed as `jitted`.

    Raises:
        TypeError: `jitted` is not a jitted function.
        ValueError: `report` is neither `"warn"` nor `"log"`.

    Examples:
        >>> import warnings
        >>> def double(x):
        ...     return 2 * x
        >>> step = jdc.explain_recompiles(jax.jit(double))
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     _ = step(jnp.ones(3))
        ...     _ = step(jnp.ones(4))
        >>> print(caught[0].message)
        jax.jit traced double again (2 traces, 2 compilations); its arguments differ from the nearest earlier compilation (the 1st) in:
          x: f32[3] → f32[4] (shape)
    """
    if not callable(getattr(jitted, "lower", None)):
        raise TypeError(
            f"explain_recompiles expects a function made by jax.jit or jdc.jit, got "
            f"{text_of(jitted)}: write jdc.explain_recompiles(jax.jit(f)), or "
            "@jdc.jit(explain_recompiles='warn') above its def."
        )
    return cast(_F, explained(jitted, report))


def explained(
    jitted: Callable[..., Any],
    report: object,
    statics: tuple[Sequence[int], Sequence[str]] | None = None,
) -> Callable[..., Any]:
    """`jitted`, reporting its compilations; `statics` are the numbers and names of the
    arguments it takes as static (`jdc.jit` knows them: static arguments are then compared as
    values, and a Python number elsewhere is traced, never a cause), None where unknown."""
    qualname = str(getattr(jitted, "__qualname__", None) or getattr(jitted, "__name__", jitted))
    name = local_name(qualname)
    if not _is_report(report):
        raise ValueError(
            f"explain_recompiles of {name}: report must be 'warn' (a jdc.RecompileWarning) or "
            f"'log' (a warning on the 'jax_dataclasses' logger), got {report!r}."
        )
    _listen()
    known = None if statics is None else (frozenset(statics[0]), frozenset(statics[1]))
    return _Explained(jitted, name, report, known)


def _is_report(value: object) -> TypeGuard[Report]:
    return value in ("warn", "log")


def _on_event(event: str, duration_secs: float, **kwargs: str | int) -> None:
    """JAX's monitoring listener: note a trace, lowering or compilation in the call running."""
    seen = _SEEN.get()
    if seen is not None and event in _EVENTS:
        seen.append(event)


def _listen() -> None:
    """Register `_on_event` with `jax.monitoring`, once per process, and this module with JAX's
    source information, so that what JAX says of a call (`jax_explain_cache_misses`) names the
    user's line, not the wrapper's."""
    global _listening
    with _LISTEN_LOCK:
        if not _listening:
            jax.monitoring.register_event_duration_secs_listener(_on_event)
            source_info_util.register_exclusion(__file__)
            _listening = True


class _Explained:
    """A jitted function that records each call that compiled it, and reports the differences
    from the nearest earlier one."""

    def __init__(
        self,
        jitted: Callable[..., Any],
        name: str,
        report: Report,
        statics: tuple[frozenset[int], frozenset[str]] | None,
    ) -> None:
        functools.update_wrapper(self, jitted)
        self._jitted = jitted
        self._name = name
        self._report = report
        self._static = statics or (frozenset[int](), frozenset[str]())
        self._numbers = statics is None
        """Whether a Python number may be a static argument (of a `jax.jit` we did not make)."""
        self._history: list[tuple[_Call, int]] = []
        """Earlier signatures and the number of their compilation (0: compiled elsewhere)."""
        self._names = _parameter_names(jitted)
        size = getattr(jitted, "_cache_size", None)
        self._cache_size = cast("Callable[[], int]", size) if callable(size) else _no_size
        self._lock = threading.Lock()
        self.traces = 0
        self.compilations = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        seen: list[str] = []
        entries = self._cache_size()
        token = _SEEN.set(seen)
        try:
            result = self._jitted(*args, **kwargs)
        finally:
            _SEEN.reset(token)
        if seen or not self._history or self._cache_size() > entries:
            try:
                self._compiled(seen, args, kwargs)
            except Exception as error:  # Our bug, or a user's value we cannot read: the
                # call has run, and its result is the user's.
                warn_at_user(
                    f"explain_recompiles could not explain why {self._name} compiled again: "
                    f"{type(error).__name__}: {error}",
                    RecompileWarning,
                )
        return result

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jitted, name)

    def __repr__(self) -> str:
        return f"<explain_recompiles of {self._jitted!r}>"

    def _compiled(self, seen: list[str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Record a call that compiled (`seen` holds JAX's events) or that added an entry to
        the dispatch cache without compiling, and report the first kind."""
        call = self._record(args, kwargs)
        traced = _TRACE in seen
        with self._lock:
            self.traces += traced
            self.compilations += bool(seen)
            number, earlier = (self.compilations if seen else 0), self._history
            self._history = [*earlier[1 - HISTORY :], (call, number)]
            counts = f"{_count(self.traces, 'trace')}, {_count(self.compilations, 'compilation')}"
        if not earlier or not seen:
            return
        nearest, against = min(
            ((_call_differences(old, call, self._numbers), n) for old, n in earlier), key=_distance
        )
        which = f"the {_ordinal(against)}" if against else _ELSEWHERE_COMPILED
        head = f"jax.jit {'traced' if traced else 'compiled'} {self._name} again ({counts}); "
        if not nearest:
            message = head + _OUTSIDE.format(which=which) + _FLAG
        elif all(change.kind == "context" for change in nearest):
            message = head + _OUTSIDE.format(which=which) + _CONTEXT + _capped(nearest, LINES)
        else:
            message = (
                f"{head}its arguments differ from the nearest earlier compilation ({which}) in:"
                + _capped(nearest, LINES)
            )
        if self._report == "warn":
            warn_at_user(message, RecompileWarning)
        else:
            _LOGGER.warning(message)

    def _record(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        """The call's arguments by name (a parameter's, `args[i]` past them), each as passed;
        a static argument as its value."""
        positional, star = self._names
        argnums, argnames = self._static
        arguments: list[tuple[str, str, Record]] = []
        for index, value in enumerate(args):
            extra = index - len(positional)
            name = positional[index] if extra < 0 else f"{star}[{extra}]"
            arguments.append((name, "by position", (static if index in argnums else record)(value)))
        for key, value in kwargs.items():
            arguments.append((key, "by keyword", (static if key in argnames else record)(value)))
        return _Call(tuple(arguments), tuple(_TRACE_CONTEXT()))


@dataclasses.dataclass(frozen=True)
class _Call:
    """The arguments of one call: each by name, how it was passed, and its record; and JAX's
    tracing context during it (what its trace cache keys by besides the arguments: the config
    options and context managers that change a trace, such as `jax.default_matmul_precision`)."""

    arguments: tuple[tuple[str, str, Record], ...]
    context: tuple[object, ...]


_TRACE_CONTEXT = cast("Callable[[], Iterable[object]]", _config.trace_context)  # pyright: ignore[reportUnknownMemberType]  # jaxlib: no stubs
_TRACE_CONTEXT_NAMES = cast(
    "Callable[[], Iterable[str]] | None", getattr(_config, "trace_context_names", None)
)


def _call_differences(before: _Call, after: _Call, numbers: bool) -> JitDiff:
    """The differences between two calls' arguments, by name (passed by position and by
    keyword are different trees to jit), then their tracing contexts' (kind "context"); a
    Python number's value only where `numbers` says it may be a static argument."""
    comparison = Comparison(numbers)
    old = {name: (how, item) for name, how, item in before.arguments}
    for name, how, item in after.arguments:
        old_how, old_item = old.pop(name, ("not passed", None))
        if old_item is None or old_how != how:
            comparison.add(name, "structure", _passed(old_how), _passed(how))
        else:
            comparison.tree(name, old_item, item, "static argument")
    for name, (how, _) in old.items():
        comparison.add(name, "structure", _passed(how), "not passed")
    if before.context != after.context and len(before.context) == len(after.context):
        names = _context_names(len(after.context))
        for name, was, now in zip(names, before.context, after.context, strict=True):
            if not same(was, now):
                comparison.add(name, "context", text_of(was), text_of(now), _CHANGED_CONTEXT)
    return comparison.result()


def _passed(how: str) -> str:
    return how if how == "not passed" else f"passed {how}"


def _context_names(count: int) -> Sequence[str]:
    """The names of the `count` items of JAX's tracing context, where JAX names them (newer
    jaxlibs), else their positions."""
    try:
        names = list(_TRACE_CONTEXT_NAMES()) if _TRACE_CONTEXT_NAMES else []
    except NotImplementedError:  # A jax newer than its jaxlib.
        names = []
    return names if len(names) == count else [f"trace context [{i}]" for i in range(count)]


def _capped(diff: JitDiff, lines: int) -> str:
    """The first `lines` differences, one per line each after a newline, and how many more."""
    shown = "".join(f"\n  {change}" for change in diff[:lines])
    more = len(diff) - lines
    return shown + (f"\n  ... and {more} more (jdc.jit_diff lists them all)" if more > 0 else "")


def _parameter_names(function: Callable[..., Any]) -> tuple[list[str], str]:
    """The names of `function`'s positional parameters, and of its `*args` ("args" if none)."""
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        params = []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p.name for p in params if p.kind in kinds]
    return positional, next((p.name for p in params if p.kind is p.VAR_POSITIONAL), "args")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"


def _no_size() -> int:
    """The cache size of a jitted function that does not tell it: no call is learnt."""
    return 0


def _distance(found: tuple[JitDiff, int]) -> tuple[int, int, bool, int]:
    """How far an earlier signature is: its structure's differences first, then the others,
    then whether it compiled elsewhere, then how long ago (the latest of equals is nearest)."""
    diff, number = found
    structural = sum(change.kind in ("structure", "class") for change in diff)
    return structural, len(diff), number == 0, -number


_ELSEWHERE_COMPILED = (
    "one this function reused, compiled before it was wrapped or by another jax.jit of the same "
    "function"
)
_OUTSIDE = (
    "its arguments match an earlier compilation ({which}) in tree structure, static values, "
    "shapes, dtypes, weak types and shardings, so the cause is outside the arguments"
)
_FLAG = (
    ", and JAX's tracing context (its config options and context managers) is the same: a "
    "global value the function reads, or a cache that was cleared (jax.clear_caches()) or "
    "full. jax.config.update('jax_explain_cache_misses', True) logs JAX's own reason."
)
_CHANGED_CONTEXT = "call the function under the same settings every time"
_CONTEXT = ", in JAX's tracing context (its config options and context managers):"


def _ordinal(number: int) -> str:
    """`1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`."""
    teen = 10 <= number % 100 <= 20
    return f"{number}{'th' if teen else {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th')}"
