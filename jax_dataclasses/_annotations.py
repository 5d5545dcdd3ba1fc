"""`Static[T]` and the rules that decide whether an annotation marks something static.

Shared by dataclass fields and `jit` parameters. Only the outermost part of an annotation
decides, so `Static[Later]` works while `Later` is still undefined; `Static` anywhere else
(`Optional[Static[int]]`) is an error, never a silently dynamic value. Annotations are read as
the standard library reads them on each Python, and a name not defined yet is decided later
(`PendingStatic`). The other marks of static fields live here too: field metadata
(`static_metadata_mark`) and 1.x's `static_field()`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import enum
import inspect
import sys
import threading
import typing
import warnings
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeVar, cast

import typing_extensions

from jax_dataclasses._codegen import module_globals

T = TypeVar("T")


class _StaticMarker:
    """The metadata object that `Static[T]` carries inside `Annotated`.

    It compares and hashes as 1.6's marker string (`LEGACY_STATIC_MARKER`), so that code
    written against 1.6's private `_dataclasses.JDC_STATIC_MARKER` (`marker in
    hint.__metadata__`) sees our `Static` fields as static.
    """

    def __repr__(self) -> str:
        return "jax_dataclasses.Static"

    def __eq__(self, other: object) -> bool:
        return other is self or other == LEGACY_STATIC_MARKER

    def __hash__(self) -> int:
        return hash(LEGACY_STATIC_MARKER)


STATIC_MARKER = _StaticMarker()
LEGACY_STATIC_MARKER = "__jax_dataclasses_static_field__"
"""What jax_dataclasses 1.6 put in `Annotated` metadata and field metadata; still honoured."""


class Mark(enum.Enum):
    """What makes a field static: a layout's `marks`, one per static field, decided once
    (`static_marks`) and read where a message says how to undo it or 1.6's reading matters.
    A metadata mark's value is its field metadata key."""

    ANNOTATION = "Static"
    """`Static[...]` in the field's annotation (it counts first)."""
    STATIC_FIELD = LEGACY_STATIC_MARKER
    """1.6's `static_field()`: its marker in the field metadata."""
    STATIC = "static"
    """Field metadata `static=True`, as equinox spells it."""
    PYTREE_NODE = "pytree_node"
    """Field metadata `pytree_node=False`, as flax spells it."""


_METADATA_MARKS = ((Mark.STATIC_FIELD, True), (Mark.STATIC, True), (Mark.PYTREE_NODE, False))


def static_metadata_mark(metadata: Mapping[str, object]) -> Mark | None:
    """The mark of field metadata that makes a field static (1.6's marker, or `static=True` /
    `pytree_node=False` as other libraries spell it), compared with `==`; else None."""
    for mark, value in _METADATA_MARKS:
        if mark.value in metadata and metadata[mark.value] == value:
            return mark
    return None


Static = Annotated[T, STATIC_MARKER]
Static.__doc__ = """`Static[T]` is `T` to type checkers; on a field or `jit` parameter it marks the value static.

A static value is part of the tree structure (the treedef), not a traced child: Python code
may branch on it under `jax.jit`, equal values reuse a compilation and different values
recompile. It must be hashable and compare by value; arrays are refused (`TypeError`) and
values JAX cannot cache reliably warn (`StaticFieldWarning`). `Static` must be the outermost
part of the annotation (`Static[Optional[int]]`, not `Optional[Static[int]]`); the annotation
is read, not evaluated, so `from __future__ import annotations`, strings and aliases work.

Examples:
    >>> @jdc.pytree_dataclass
    ... class Layer:
    ...     w: jax.Array
    ...     activation: jdc.Static[str] = "tanh"
    >>> leaves, treedef = jax.tree.flatten(Layer(jnp.ones(2)))
    >>> len(leaves), "tanh" in str(treedef)
    (1, True)
"""

_ANNOTATED_ORIGINS: tuple[object, ...] = (typing.Annotated, typing_extensions.Annotated)
_ALIAS_TYPES: tuple[type, ...] = tuple(
    {
        getattr(typing, "TypeAliasType", typing_extensions.TypeAliasType),
        typing_extensions.TypeAliasType,
    }
)
"""`type S = ...` (Python 3.12+) and `typing_extensions.TypeAliasType`: resolved to their value."""
_UNDECIDED = object()
_UNEVALUATED_ALIAS = object()
"""A type alias whose value names something not defined yet: it may or may not be Static."""


class StaticAnnotationError(TypeError):
    """`Static` is used somewhere other than the outermost part of an annotation.

    A `TypeError`, raised when the class is decorated (or the function passed to `jdc.jit`).
    The message names the class and field (or parameter) and shows the fix.

    Examples:
        >>> from typing import Optional
        >>> try:
        ...     @jdc.pytree_dataclass
        ...     class Config:
        ...         depth: Optional[jdc.Static[int]] = None
        ... except jdc.StaticAnnotationError as error:
        ...     print(error)
        Static must be the outermost part of the annotation of field 'depth' of Config, ...
    """


def unalias(obj: object) -> object:
    """What a type alias names (`S` or `S[int]` for `type S[T] = Static[T]`), else `obj`;
    _UNEVALUATED_ALIAS if its value cannot be evaluated yet."""
    while True:
        origin: object = typing.get_origin(obj)
        alias: object = origin if isinstance(origin, _ALIAS_TYPES) else obj
        if not isinstance(alias, _ALIAS_TYPES):
            return obj
        try:
            obj = cast(object, getattr(alias, "__value__"))  # noqa: B009  # untyped attribute
        except NameError:
            return _UNEVALUATED_ALIAS


def _is_static_object(obj: object) -> bool:
    """True for `Static` itself, `Static[X]`, `jdc.Static` aliases, `Annotated[X, marker]`, type
    aliases of these, and `Annotated[<one of these>, ...]`."""
    obj = unalias(obj)
    metadata = getattr(obj, "__metadata__", None)
    if not isinstance(metadata, tuple):
        return False
    if any(
        m is STATIC_MARKER or m == LEGACY_STATIC_MARKER
        for m in cast("tuple[object, ...]", metadata)
    ):
        return True
    origin: object = getattr(obj, "__origin__", None)  # `Annotated[S, "doc"]` with S an alias
    return origin is not None and origin is not obj and _is_static_object(origin)


Namespaces = tuple[Mapping[str, Any], ...]
_LITERAL_ORIGINS: tuple[object, ...] = (Literal, typing_extensions.Literal)


def _lookup(node: ast.expr, namespaces: Namespaces) -> object:
    """Resolve a dotted name (`Static`, `jdc.Static`) without running code; else _UNDECIDED."""
    if isinstance(node, ast.Name):
        for namespace in namespaces:
            if node.id in namespace:
                return namespace[node.id]
        return _UNDECIDED
    if isinstance(node, ast.Attribute):
        base = _lookup(node.value, namespaces)
        if base is _UNDECIDED:
            return _UNDECIDED
        return getattr(base, node.attr, _UNDECIDED)
    return _UNDECIDED


def spelled(node: ast.expr, name: str) -> bool:
    """Whether `node` is the name `name`, bare or as an attribute (`Static`, `jdc.Static`)."""
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )


TYPE_THEN_METADATA = "__jdc_type_then_metadata__"
"""True on an annotation form that, as `Annotated`, holds a type and then metadata
(`jdc.Sharded[T, "embed"]`: its axis names are not types)."""


def _type_parts(tree: ast.AST, namespaces: Namespaces) -> Iterator[ast.AST]:
    """The nodes of an annotation's source that are types, strings among them parsed as code:
    not the values of `Literal[...]`, nor the metadata of `Annotated[T, ...]` (or of another
    form with `TYPE_THEN_METADATA`)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            with contextlib.suppress(SyntaxError):  # Not code: a string like any other.
                stack.append(ast.parse(node.value, mode="eval").body)
            continue
        if isinstance(node, ast.Subscript):
            head = _lookup(node.value, namespaces)
            if head in _LITERAL_ORIGINS or spelled(node.value, "Literal"):
                yield node.value
                continue
            if (
                head in _ANNOTATED_ORIGINS
                or getattr(head, TYPE_THEN_METADATA, False)
                or spelled(node.value, "Annotated")
                or (head is _UNDECIDED and spelled(node.value, "Sharded"))
            ):
                items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                stack.extend((node.value, items[0]))
                continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _scan_source(tree: ast.AST, namespaces: Namespaces) -> tuple[bool, bool]:
    """(whether a type in the source is Static, whether a name in it is not defined yet)."""
    mentions = unresolved = False
    for node in _type_parts(tree, namespaces):
        if isinstance(node, ast.Name | ast.Attribute):
            found = _lookup(node, namespaces)
            mentions = mentions or _is_static_object(found)
            unresolved = unresolved or (isinstance(node, ast.Name) and found is _UNDECIDED)
    return mentions, unresolved


def _scan_object(annotation: object, namespaces: Namespaces) -> tuple[bool, bool]:
    """`_scan_source` for an evaluated annotation, which may hold strings and `ForwardRef`s
    (Python 3.14 keeps the names it cannot resolve yet as `ForwardRef`s inside real objects)."""
    if isinstance(annotation, typing.ForwardRef):
        namespaces = _with_extra_names(annotation, namespaces)
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        try:
            return _scan_source(ast.parse(annotation, mode="eval"), namespaces)
        except SyntaxError:
            return False, False
    if _is_static_object(annotation):
        return True, False
    value = unalias(annotation)
    if value is not annotation and value is not _UNEVALUATED_ALIAS:
        return _scan_object(value, namespaces)
    origin = typing.get_origin(annotation)
    if origin in _LITERAL_ORIGINS:
        return False, False
    args: tuple[object, ...] = typing.get_args(annotation)
    if origin in _ANNOTATED_ORIGINS:
        args = args[:1]
    mentions = unresolved = False
    for arg in args:
        arg_mentions, arg_unresolved = _scan_object(arg, namespaces)
        mentions, unresolved = mentions or arg_mentions, unresolved or arg_unresolved
    return mentions, unresolved


def _decide_source(expr: ast.expr, namespaces: Namespaces) -> object:
    """True/False if the outermost part of `expr` is (not) Static, else _UNDECIDED."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        try:
            return _decide_source(ast.parse(expr.value, mode="eval").body, namespaces)
        except SyntaxError:
            return _UNDECIDED
    head = expr.value if isinstance(expr, ast.Subscript) else expr
    if not isinstance(head, ast.Name | ast.Attribute):
        return False  # `int | None`, literals, calls: never Static at the top.
    obj = unalias(_lookup(head, namespaces))
    if obj is _UNDECIDED or obj is _UNEVALUATED_ALIAS:
        return obj
    if _is_static_object(obj):
        return True
    if obj in _ANNOTATED_ORIGINS and isinstance(expr, ast.Subscript):
        # Annotated[Static[int], "doc"] flattens to Annotated[int, marker, "doc"].
        args = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        legacy = any(isinstance(a, ast.Constant) and a.value == LEGACY_STATIC_MARKER for a in args)
        return legacy or _decide_source(args[0], namespaces)
    return False


def _with_extra_names(ref: typing.ForwardRef, namespaces: Namespaces) -> Namespaces:
    """Python 3.14 writes the parts of an annotation it could evaluate as placeholder names
    in a `ForwardRef`'s text, and keeps their objects in `__extra_names__`."""
    extra: Mapping[str, Any] | None = getattr(ref, "__extra_names__", None)
    return (extra, *namespaces) if extra else namespaces


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


def pseudo_field_kind(annotation: object) -> str | None:
    """ "ClassVar" or "InitVar" if `annotation` declares one (not a field: `dataclasses` gives
    neither a field's default checks), from the object or its source; else None."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):  # `ClassVar[int]`, `typing.ClassVar`, `dataclasses.InitVar[T]`
        head = annotation.split("[", 1)[0].strip().rpartition(".")[2]
        return head if head in ("ClassVar", "InitVar") else None
    if annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar:
        return "ClassVar"
    if annotation is dataclasses.InitVar or isinstance(annotation, dataclasses.InitVar):
        return "InitVar"
    return None


def defining_scope(
    qualname: str, module: str, globalns: Mapping[str, Any] | None = None
) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """The global and local names that the annotations of the class or function `qualname`
    (its `__qualname__`, defined in `module`, or in the namespace `globalns` when known) see.

    The locals are those of the enclosing scopes, innermost first, read from their running
    frames: `{}` at module level; None when an enclosing function is no longer running, so its
    names cannot be known. The frames are found by their code's `co_qualname` and globals,
    whatever sits between them and us on the stack (a user's wrapper around our decorator),
    so annotations see the scope that defines the class, not the one that called us.
    """
    parts = qualname.split(".")[:-1]
    scopes = [
        ".".join(parts[:end]) for end in range(len(parts), 0, -1) if parts[end - 1] != "<locals>"
    ]
    functions = {".".join(parts[:end]) for end, part in enumerate(parts) if part == "<locals>"}
    if not scopes and globalns is not None:
        return globalns, {}
    found: dict[str, dict[str, Any]] = {}
    frame: FrameType | None = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
    while frame is not None:
        # A class's `__module__` is its globals' `__name__`, else builtins' (`exec` into a dict).
        ours = (
            frame.f_globals is globalns
            if globalns is not None
            else frame.f_globals.get("__name__", "builtins") == module
        )
        name = frame.f_code.co_qualname
        if ours and name in scopes and name not in found:
            found[name] = dict(frame.f_locals)
            globalns = frame.f_globals
        elif ours and frame.f_code.co_name == "<module>" and not scopes:
            globalns = frame.f_globals
            break
        if len(found) == len(scopes) and scopes:
            break
        frame = frame.f_back
    if globalns is None:
        globalns = module_globals(module)
    if not functions <= found.keys():
        return globalns, None
    return globalns, ChainMap(*(found[scope] for scope in scopes if scope in found))


def static_decision(
    annotation: object,
    where: str,
    globalns: Mapping[str, Any],
    localns: Mapping[str, Any] | None,
    classns: Mapping[str, Any] | None = None,
) -> bool | None:
    """Whether `annotation` is `Static[...]` at its outermost level; None while it names
    something not defined yet, which could still make it Static (or nest a Static): the
    caller decides again later (`PendingStatic`).

    `where` names the field or parameter for error messages ("field 'x' of class Model").
    Names resolve as in `typing.get_type_hints`: in `classns` (the class body's namespace),
    then `localns` (the enclosing scopes, `defining_scope`; None if they cannot be known),
    `globalns`, the builtins. Raises `StaticAnnotationError` when `Static` appears nested,
    when the annotation spells `Static` but its outermost part cannot be resolved, or when
    its outermost name is not a global and the enclosing function's names cannot be known.
    """
    namespaces: Namespaces = (
        *((classns,) if classns is not None else ()),
        localns or {},
        globalns,
        vars(builtins),
        vars(typing),
    )
    if isinstance(annotation, typing.ForwardRef):
        namespaces = _with_extra_names(annotation, namespaces)
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        try:
            expr = ast.parse(annotation, mode="eval").body
        except SyntaxError:
            return False  # Not ours to judge; dataclasses and checkers report it.
        decision = _decide_source(expr, namespaces)
        mentions, unresolved = _scan_source(expr, namespaces)
        if decision is _UNDECIDED and not mentions:
            # Nothing resolves (say, the module alias is unknown here): go by the spelling.
            mentions = _spells_static(expr)
    else:
        decision = _is_static_object(annotation) or (
            _UNEVALUATED_ALIAS if unalias(annotation) is _UNEVALUATED_ALIAS else False
        )
        mentions, unresolved = _scan_object(annotation, namespaces)
    if decision is True:
        return True
    if decision is _UNDECIDED and localns is None:
        raise StaticAnnotationError(
            f"cannot tell whether the annotation {annotation!r} of {where} is Static: its "
            "outermost name is not a global, and the function that defines it has returned, "
            "so its local names cannot be read. Decorate it inside that function, or define "
            "the name at module level."
        )
    if decision is _UNEVALUATED_ALIAS:
        raise StaticAnnotationError(
            f"cannot tell whether the annotation {_show(annotation)} of {where} is Static: it is "
            "a type alias whose value names something not defined yet where the class or "
            "function is created. Define the alias after the names it uses, or write the "
            "annotation out (Static[...] around the whole type if it is static)."
        )
    if mentions:
        shown = _show(annotation)
        if decision is _UNDECIDED:
            problem = (
                f"cannot tell whether the annotation {shown} of {where} is Static: its "
                "outermost name is not defined yet where the class or function is created"
            )
        else:
            problem = f"Static must be the outermost part of the annotation of {where}, got {shown}"
        raise StaticAnnotationError(
            f"{problem}. Write Static[...] around the whole type, for example "
            "Static[Optional[int]] instead of Optional[Static[int]]."
        )
    return None if decision is _UNDECIDED or unresolved else False


class PendingStatic:
    """A field or parameter whose annotation named something not defined when it was read.

    `settle()` reads the annotation again, as late as it can matter (the first construction,
    flatten or call): if the name now makes it Static, or nests a Static, that is an error
    (the field was made a child, and instances may already exist); a name still undefined
    (imported under `TYPE_CHECKING` only) makes it not static, for good.
    """

    def __init__(
        self,
        name: str,
        where: str,
        read: Callable[[], object],
        scope: tuple[Mapping[str, Any], Mapping[str, Any] | None, Mapping[str, Any] | None],
    ) -> None:
        self.name = name
        self.where = where
        self._read = read
        self._scope = scope
        self.settled = False

    def settle(self) -> None:
        """Decide for good; raises `StaticAnnotationError` if the annotation is Static now."""
        with SETTLE_LOCK:  # One decision, even when threads construct at once.
            if self.settled:
                return
            annotation = self._read()
            globalns, localns, classns = self._scope
            if static_decision(annotation, self.where, globalns, localns, classns):
                raise StaticAnnotationError(
                    f"the annotation {_show(annotation)} of {self.where} is Static, but what makes it "
                    "Static was not defined yet when it was read, so it was made a child "
                    "(not static). Define the alias (say, `MyStatic = jdc.Static[int]`) before "
                    "the class or function that uses it, or write Static[...] in the "
                    "annotation itself."
                )
            self.settled = True


SETTLE_LOCK = threading.RLock()
"""Held while a `PendingStatic` decides, and while a class that had one drops its checks
(`_dataclass`): each is a check and a set."""


def _spells_static(tree: ast.AST) -> bool:
    return any(spelled(node, "Static") for node in ast.walk(tree) if isinstance(node, ast.expr))


def _show(annotation: object) -> str:
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    if isinstance(annotation, str):
        return annotation
    return repr(annotation).replace(repr(STATIC_MARKER), "Static").replace("typing.", "")


# -- the decision for each field of a class --------------------------------------------------


if TYPE_CHECKING:  # Defining a Protocol at import costs what the rest of the module does.

    class Decided(Protocol):
        """A registered class's decisions (its `Layout`), which a subclass's fields inherit."""

        @property
        def statics(self) -> tuple[str, ...]: ...
        @property
        def marks(self) -> tuple[Mark, ...]: ...
        @property
        def pending(self) -> tuple[PendingStatic, ...]: ...


def static_marks(
    cls: type, decided: Mapping[type, Decided]
) -> tuple[dict[str, Mark], tuple[PendingStatic, ...]]:
    """What makes each static field of dataclass `cls` static (the layout's `marks`), decided
    here once, and the fields whose annotations name something not defined yet
    (`PendingStatic`: children until settled, which may only confirm that).

    An annotation `Static[...]` counts first (1.6 saw it too), then field metadata. A field
    inherited from a pytree dataclass keeps that class's decision (`decided[base]`: the
    layouts of the class's registered bases); annotations are read in the scope that defines
    the class that declared the field.
    """
    marks: dict[str, Mark] = {}
    pending: list[PendingStatic] = []
    scopes: dict[type, tuple[Mapping[str, Any], Mapping[str, Any] | None, Mapping[str, Any]]] = {}
    for f in dataclasses.fields(cls):
        owner = _defining_class(cls, f)
        owner_layout = decided.get(owner)
        if owner_layout is not None:
            if f.name in owner_layout.statics:
                marks[f.name] = owner_layout.marks[owner_layout.statics.index(f.name)]
            pending.extend(p for p in owner_layout.pending if p.name == f.name and not p.settled)
            continue
        key = static_metadata_mark(f.metadata)
        where = f"field {f.name!r} of {cls.__qualname__}"
        try:
            if owner not in scopes:
                scopes[owner] = (
                    *defining_scope(owner.__qualname__, owner.__module__),
                    class_namespace(owner),
                )
            decision = static_decision(f.type, where, *scopes[owner])
        except StaticAnnotationError:
            if key is None:
                raise
            decision = False
        if decision:
            marks[f.name] = Mark.ANNOTATION
        elif key is not None:
            marks[f.name] = key
        elif decision is None:
            pending.append(
                PendingStatic(f.name, where, _annotation_reader(owner, f), scopes[owner])
            )
    return marks, tuple(pending)


def class_namespace(cls: type) -> Mapping[str, Any]:
    """The names a class body's annotations see besides the enclosing scopes: its own
    attributes and its type parameters (`class Box[T]`)."""
    params: tuple[Any, ...] = getattr(cls, "__type_params__", ())
    own: Mapping[str, Any] = vars(cls)
    return {**{p.__name__: p for p in params}, **own} if params else own


def _annotation_reader(owner: type, f: dataclasses.Field[Any]) -> Callable[[], object]:
    """Reads the annotation of `f` again, as `dataclasses` would read it now."""
    return lambda: class_annotations(owner).get(f.name, f.type)


def _defining_class(cls: type, f: dataclasses.Field[Any]) -> type:
    """The class whose annotation created field `f` (fields are inherited as the same object)."""
    owner = cls
    for base in cls.__mro__[1:]:
        if base.__dict__.get("__dataclass_fields__", {}).get(f.name) is f:
            owner = base
    return owner


# -- static_field(), 1.x's spelling --------------------------------------------------------
# `static_field()`: the jax_dataclasses 1.x way to mark a field static, kept for existing code.


def static_field(**kwargs: Any) -> Any:
    """Deprecated: `dataclasses.field(**kwargs)` with field metadata that marks it static.

    Takes exactly the arguments of `dataclasses.field`, and emits a `DeprecationWarning`.
    Type checkers see it as `dataclasses.field`. Annotate the field `jdc.Static[T]` instead.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", DeprecationWarning)
        ...     @jdc.pytree_dataclass
        ...     class Old:
        ...         x: jax.Array
        ...         n: int = jdc.static_field(default=3)
        >>> jax.tree.leaves(Old(jnp.zeros(2)))  # `n` is static: not a leaf
        [Array([0., 0.], dtype=float32)]
    """
    warnings.warn(
        "jdc.static_field() is deprecated: annotate the field as jdc.Static[T] instead "
        "(for example `n: jdc.Static[int] = 3`).",
        DeprecationWarning,
        stacklevel=2,
    )
    # `static=True` as other libraries spell it, and 1.6's own marker, which 1.6 checkpoints
    # depend on: a field 1.6 saw as static was not saved (`_serialization.saved_by_1_6`).
    metadata: dict[str, Any] = {
        **(kwargs.pop("metadata", None) or {}),
        "static": True,
        LEGACY_STATIC_MARKER: True,
    }
    return dataclasses.field(metadata=metadata, **kwargs)
