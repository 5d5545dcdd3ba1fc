"""Where the names in an annotation resolve, and how annotations are read on each Python.

A class's annotations are read as `dataclasses` reads them (`class_annotations`): evaluated
objects, strings under `from __future__ import annotations`, and on Python 3.14 (PEP 649) a
`ForwardRef` for a name not defined yet. A name in a string or `ForwardRef` resolves where
Python itself would resolve it where the class is defined: the class body, the enclosing class
bodies and functions (innermost first), the module, the builtins (`Scope`). The enclosing
scopes are the running frames that define the class, found once, when the class is decorated,
by their code's qualified name: never whatever frame happens to run later (a recursive
function's other calls, a caller). A scope kept for a later reading reads those frames again,
so names bound after the class (an alias defined further down the same function) are seen.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import sys
import typing
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

Namespaces = tuple[Mapping[str, Any], ...]
_BUILTINS: Mapping[str, Any] = vars(builtins)


class Scope:
    """The namespaces an annotation's names resolve in, innermost first, read when asked.

    `own` is the class body's namespace (its attributes and type parameters), `frames` the
    running frames of the enclosing class bodies and functions, innermost first, `globalns`
    the module's. `complete` is False when an enclosing function is no longer running: its
    names cannot be read, and a name not found may be one of them.
    """

    __slots__ = ("_defined", "_frames", "_globals", "_own", "complete")

    def __init__(
        self,
        own: Mapping[str, Any] | None,
        frames: tuple[FrameType, ...],
        globalns: Mapping[str, Any],
        complete: bool,
        defined: Mapping[str, Any] | None = None,
    ) -> None:
        self._own = own
        self._frames = frames
        self._globals = globalns
        self.complete = complete
        self._defined = defined
        """The name being defined (a class's own name, before the class statement binds it:
        `children: tuple[Node, ...]` inside `Node`), after the enclosing scopes."""

    def namespaces(self) -> Namespaces:
        """The namespaces as they are now (the frames' locals read again), innermost first:
        the class body, the enclosing scopes, the name being defined, the module, the
        builtins."""
        found: list[Mapping[str, Any]] = [] if self._own is None else [self._own]
        found.extend(frame.f_locals for frame in self._frames)
        if self._defined is not None:
            found.append(self._defined)
        return (*found, self._globals, _BUILTINS)

    def locals_between(self) -> range:
        """The indices in `namespaces()` of the enclosing functions' and class bodies'."""
        first = int(self._own is not None)
        return range(first, first + len(self._frames))

    def unbound(self) -> frozenset[str]:
        """The names the enclosing functions declare, bound or not yet: one not bound yet is
        not the module's name of the same spelling (Python's scopes), but not defined yet."""
        names: set[str] = set()
        for frame in self._frames:
            code = frame.f_code
            if code.co_flags & inspect.CO_OPTIMIZED:  # A function's frame, not a class body's.
                names.update(code.co_varnames, code.co_cellvars, code.co_freevars)
        return frozenset(names)


def module_globals(name: str) -> dict[str, Any]:
    """The namespace of the module called `name`, or `{}` when none is imported under that
    name (a class made by `exec` or `type()` may name a module that does not exist)."""
    module = sys.modules.get(name)
    return vars(module) if module is not None else {}


def class_scope(cls: type) -> Scope:
    """Where the annotations of class `cls` resolve: its body, then `defining_scope`, with
    the class's own name (not bound yet while its decorator runs) meaning the class."""
    params: tuple[Any, ...] = getattr(cls, "__type_params__", ())
    own: Mapping[str, Any] = vars(cls)
    if params:  # `class Box[T]`: the type parameters, then the body's names.
        own = {**{p.__name__: p for p in params}, **own}
    return defining_scope(cls.__qualname__, cls.__module__, own=own, defined={cls.__name__: cls})


def declaring_class(cls: type, f: dataclasses.Field[Any]) -> type:
    """The class whose annotation created field `f` of `cls` (a field is inherited as the same
    object, so a plain mixin's bare annotation of the same name is not it)."""
    owner = cls
    for base in cls.__mro__[1:]:
        if base.__dict__.get("__dataclass_fields__", {}).get(f.name) is f:
            owner = base
    return owner


def module_scope(cls: type) -> Scope:
    """Where the annotations of a class read after its creation resolve: its body, its own
    name, its module (the frames that defined it are gone, or are another call's by now)."""
    return Scope(vars(cls), (), module_globals(cls.__module__), True, {cls.__name__: cls})


def defining_scope(
    qualname: str,
    module: str,
    globalns: Mapping[str, Any] | None = None,
    own: Mapping[str, Any] | None = None,
    defined: Mapping[str, Any] | None = None,
) -> Scope:
    """The scope that defines the class or function `qualname` (its `__qualname__`, defined in
    `module`, or in the namespace `globalns` when known), around its own namespace `own`.

    `defined` holds the name being defined, seen after the enclosing scopes. The enclosing
    class bodies and functions are found among the running frames by their
    code's `co_qualname` and globals, innermost call first, whatever sits between them and us
    on the stack (a user's wrapper around our decorator). Call it while the class or function
    is being defined: later, a frame of that name may be another call's.
    """
    parts = qualname.split(".")[:-1]
    scopes = [
        ".".join(parts[:end]) for end in range(len(parts), 0, -1) if parts[end - 1] != "<locals>"
    ]
    functions = {".".join(parts[:end]) for end, part in enumerate(parts) if part == "<locals>"}
    found: dict[str, FrameType] = {}
    if scopes or globalns is None:
        frame: FrameType | None = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
        while frame is not None:
            # A class's `__module__` is its globals' `__name__`, else builtins' (`exec` into a
            # dict).
            ours = (
                frame.f_globals is globalns
                if globalns is not None
                else frame.f_globals.get("__name__", "builtins") == module
            )
            name = frame.f_code.co_qualname
            if ours and name in scopes and name not in found:
                found[name] = frame
                globalns = frame.f_globals
            elif ours and frame.f_code.co_name == "<module>" and not scopes:
                globalns = frame.f_globals
                break
            if scopes and len(found) == len(scopes):
                break
            frame = frame.f_back
    if globalns is None:
        globalns = module_globals(module)
    frames = tuple(found[scope] for scope in scopes if scope in found)
    return Scope(own, frames, globalns, functions <= found.keys(), defined)


if sys.version_info >= (3, 14):
    from annotationlib import Format, get_annotations

    def class_annotations(cls: type) -> dict[str, object]:
        """The annotations the body of `cls` declares, as `dataclasses` reads them: evaluated
        where possible, a `ForwardRef` (or one inside a real object) for a name not defined
        yet (Python 3.14 evaluates annotations lazily, PEP 649)."""
        return get_annotations(cls, format=Format.FORWARDREF)

    def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
        """`inspect.signature(fn)`, its annotations read as `class_annotations` reads them."""
        return inspect.signature(fn, annotation_format=Format.FORWARDREF)

else:

    def class_annotations(cls: type) -> dict[str, object]:
        """The annotations the body of `cls` declares, as `dataclasses` reads them (strings
        under `from __future__ import annotations`)."""
        return inspect.get_annotations(cls)

    def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
        """`inspect.signature(fn)`: annotations as they were evaluated (or strings)."""
        return inspect.signature(fn)


def is_classvar(annotation: object) -> bool:
    """Whether `annotation` declares a `ClassVar` (not a field), from the object or its
    source: for classes `dataclasses` has not processed (undecorated subclasses)."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):  # `ClassVar[int]`, `typing.ClassVar`
        return annotation.split("[", 1)[0].strip().rpartition(".")[2] == "ClassVar"
    return annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar
