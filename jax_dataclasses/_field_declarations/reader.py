"""What a field declares, read once: static or child (`Static[T]`, field metadata), sharding
axes (`Sharded[T, *axes]`), not trained (`Frozen[T]`) and the rest of its `Annotated` metadata.

This is the one reader of annotations. The class builder calls `declare` for each field when
the class is decorated, and every feature reads the `Declaration`s stored with the class
(sharding, export, checkpoints, training masks, printing, `jdc.jit`'s parameters through
`read`, the deprecated mixin). Only the outermost part of an annotation declares:
`Static[Later]` works while `Later` is not defined, and `Static`, `Sharded` or `Frozen`
anywhere else (`Optional[Static[int]]`) is an error, never a silently dynamic, replicated or
trained value. Strings are read, not evaluated as a whole: each dotted name is looked up in
the `Scope` that defines the class, `Literal` values and metadata are values. An annotation
whose outermost part names something not defined yet is `pending`: at the class's first use
the builder decides it (`Pending.decide`), looking up only the names that were undefined; every
name defined at decoration keeps the value it had then (`Names`), so a loop's next iteration or
a name bound again in between cannot re-decide what was read.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import keyword
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Literal, NamedTuple, NoReturn, cast

import typing_extensions

from jax_dataclasses._field_declarations import messages
from jax_dataclasses._field_declarations.forms import (
    FROZEN_MARKER,
    LEGACY_STATIC_MARKER,
    STATIC_MARKER,
    Axes,
    AxisEntry,
    Mark,
    Sharded,
    ShardingDeclarationError,
    StaticAnnotationError,
    axes_of,
    metadata_mark,
)
from jax_dataclasses._field_declarations.scope import Namespaces, Scope

# -- what one field declares ----------------------------------------------------------------


class Declaration(NamedTuple):
    """What one field declares, decided once, when its class is built."""

    name: str
    owner: str
    """The qualified name of the class whose annotation declared the field (for messages)."""
    static: Mark | None = None
    """What makes the field static; None for a child."""
    axes: tuple[AxisEntry, ...] | None = None
    """The sharding axes `Sharded[T, *axes]` declares; None: undeclared."""
    metadata: tuple[object, ...] = ()
    """The rest of the outermost `Annotated` metadata (the deprecated mixin's shape, dtype)."""
    legacy_static: bool = False
    """Whether jax_dataclasses 1.6 saw the field as static, and so did not save it in
    checkpoints: its own marker, or `Static` found through a module-level name (its
    `typing.get_type_hints` never saw names local to a function)."""
    frozen: bool = False
    """Whether `Frozen[T]` marks the field as not trained (a child all the same)."""

    @property
    def where(self) -> str:
        return f"field {self.name!r} of {self.owner}"


class Reading(NamedTuple):
    """What an annotation declares at its outermost part (`read`)."""

    static: bool
    axes: tuple[AxisEntry, ...] | None
    metadata: tuple[object, ...]
    pending: bool
    """A name in it is not defined yet, and could change the answer or make it an error."""
    local: bool
    """`Static` was found through a name local to an enclosing function or class body."""
    frozen: bool = False


@dataclasses.dataclass(frozen=True)
class Unreadable:
    """`Annotated` metadata that names something still not defined when a pending field was
    decided for good: an error for whoever needs the value (the deprecated mixin). Not a
    tuple, so that nothing takes it for a value."""

    source: str
    error: str


Names = dict[str, tuple[object, bool]]
"""The names a reading resolved: each one's value, and whether an enclosing function or class
body held it (`_Reader.lookup`). A pending annotation's decision reads them as they were."""


class Pending(NamedTuple):
    """A field or parameter whose annotation named something not defined when it was read:
    the annotation as read then, and the `names` that resolved then; `decide` looks up only
    the others, in the same scope, as it is now."""

    name: str
    where: str
    annotation: object
    scope: Scope
    names: Names
    mark: Mark | None = None
    """The field's metadata mark, if any (it decides when the annotation does not)."""
    owner: str = ""
    """The qualified name of the class that declared the field ("" for a parameter)."""

    def decide(self) -> Reading:
        """The annotation's reading now. A name still undefined (imported under
        `TYPE_CHECKING` only) cannot make it Static: such a field is a child, for good."""
        return read(self.annotation, self.where, self.scope, final=True, names=dict(self.names))

    def declaration(self) -> Declaration:
        """The field's declaration, decided now (`decide`)."""
        return from_reading(self.name, self.owner, self.decide(), self.mark)


def declare(
    name: str, owner: type, annotation: object, metadata: Mapping[str, object], scope: Scope
) -> tuple[Declaration, Pending | None]:
    """The declaration of field `name` that class `owner` declares with `annotation` (as
    `dataclasses` read it) and field `metadata`, its names resolving in `scope`; and a
    `Pending` if a name not defined yet may still change it (the declaration is then the
    one its metadata makes, until decided)."""
    where = f"field {name!r} of {owner.__qualname__}"
    mark = metadata_mark(metadata)
    names: Names = {}
    try:
        reading = read(annotation, where, scope, names=names)
    except StaticAnnotationError:
        if mark is None:
            raise
        reading = Reading(False, None, (), False, False)  # The metadata decides, as in 1.6.
    declared = from_reading(name, owner.__qualname__, reading, mark)
    if not reading.pending:
        return declared, None
    return declared, Pending(name, where, annotation, scope, names, mark, owner.__qualname__)


def from_reading(name: str, owner: str, reading: Reading, mark: Mark | None) -> Declaration:
    """The declaration a reading makes (with the field's metadata mark)."""
    static = Mark.ANNOTATION if reading.static else mark
    where = f"field {name!r} of {owner}"
    if static is not None and reading.frozen:
        raise StaticAnnotationError(messages.STATIC_AND_FROZEN.format(where=where))
    if static is not None and reading.axes is not None:
        raise ShardingDeclarationError(
            messages.STATIC_AND_SHARDED.format(where=where, axes=reading.axes)
        )
    legacy = mark is Mark.STATIC_FIELD or (static is Mark.ANNOTATION and not reading.local)
    return Declaration(name, owner, static, reading.axes, reading.metadata, legacy, reading.frozen)


# -- reading one annotation -----------------------------------------------------------------

_ANNOTATED_ORIGINS: tuple[object, ...] = (typing.Annotated, typing_extensions.Annotated)
_LITERAL_ORIGINS: tuple[object, ...] = (Literal, typing_extensions.Literal)
_ALIAS_TYPES: tuple[type, ...] = tuple(
    {
        getattr(typing, "TypeAliasType", typing_extensions.TypeAliasType),
        typing_extensions.TypeAliasType,
    }
)
"""`type S = ...` (Python 3.12+) and `typing_extensions.TypeAliasType`: resolved to their value."""
_TYPE_THEN_METADATA: tuple[object, ...] = (Sharded,)
"""Forms that, as `Annotated`, hold a type and then metadata (`jdc.Sharded[T, "embed"]`: its
axis names are not types)."""


class _Undefined:
    """A name not defined (yet) where the annotation is read."""


_UNDEFINED = _Undefined()
_UNEVALUATED_ALIAS = object()
"""A type alias whose value names something not defined yet: it may or may not be Static."""


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


def _is_marker(item: object) -> bool:
    """Whether `Annotated` metadata `item` marks a value static (ours, or 1.6's string)."""
    return item is STATIC_MARKER or (isinstance(item, str) and item == LEGACY_STATIC_MARKER)


class _Outer(NamedTuple):
    """What an annotation's outermost part declares."""

    static: bool | None
    """None: a name not defined yet decides (it may be a `Static` alias)."""
    axes: tuple[Axes, ...] = ()
    others: tuple[object, ...] = ()
    """The other metadata."""
    local: bool = False
    """What makes it Static was found through a name local to an enclosing scope."""
    undefined: bool = False
    """A name not defined yet is part of it (under a declaration that decides without it)."""
    frozen: int = 0
    """How many `Frozen` markers it holds (`Frozen[Frozen[T]]` is Frozen too)."""

    def around(self, metadata: tuple[object, ...], local: bool) -> _Outer:
        """This, inside `Annotated[<this>, *metadata]` whose head `local` says where it was."""
        static = any(map(_is_marker, metadata))
        axes = self.axes + tuple(item for item in metadata if isinstance(item, Axes))
        frozen = self.frozen + sum(item is FROZEN_MARKER for item in metadata)
        others = self.others + tuple(
            item
            for item in metadata
            if not _is_marker(item) and not isinstance(item, Axes) and item is not FROZEN_MARKER
        )
        if static:
            undefined = self.undefined or self.static is None
            return _Outer(True, axes, others, local, undefined, frozen)
        if self.static is None and (axes or frozen):  # `Sharded[Later, "a"]`, `Frozen[Later]`:
            return _Outer(False, axes, others, False, True, frozen)  # a child (or an error).
        return _Outer(self.static, axes, others, self.local, self.undefined, frozen)


_PLAIN = _Outer(False)


def _outermost(obj: object) -> _Outer | None:
    """What an evaluated annotation's outermost `Annotated` declares (through type aliases,
    and `Annotated[Alias, ...]`); None without one."""
    obj = unalias(obj)
    metadata: object = getattr(obj, "__metadata__", None)
    if not isinstance(metadata, tuple):
        return None
    origin: object = getattr(obj, "__origin__", None)  # `Annotated[S, "doc"]` with S an alias
    inner = _outermost(origin) if origin is not None and origin is not obj else None
    return (inner or _PLAIN).around(cast("tuple[object, ...]", metadata), False)


class _Reader:
    """One reading of one annotation: the outermost part's declaration, then a scan of every
    other part for a nested `Static` or `Sharded` and for names not defined yet."""

    def __init__(self, where: str, scope: Scope, final: bool, names: Names | None) -> None:
        self.where = where
        self.scope = scope
        self.final = final
        self.names: Names = {} if names is None else names  # Found first, as first found.
        self.namespaces: Namespaces = scope.namespaces()
        self.local = scope.locals_between()
        self.module_at = len(self.namespaces) - 2  # The module's, then the builtins.
        self.unbound: frozenset[str] = scope.unbound() if self.local else frozenset()
        self.undefined: list[str] = []  # Outermost names not defined, in the order met.

    # -- names and values --

    def lookup(self, node: ast.expr) -> tuple[object, bool]:
        """A dotted name's object, without running code (_UNDEFINED if not found), and
        whether it was found in an enclosing function or class body."""
        if isinstance(node, ast.Name):
            if node.id in self.names:  # Decided when first read.
                return self.names[node.id]
            for index, namespace in enumerate(self.namespaces):
                if index == self.module_at and node.id in self.unbound:
                    return _UNDEFINED, False  # A local of an enclosing function, bound later.
                if node.id in namespace:
                    return self.names.setdefault(node.id, (namespace[node.id], index in self.local))
            return _UNDEFINED, False
        if isinstance(node, ast.Attribute):
            base, local = self.lookup(node.value)
            if base is _UNDEFINED:
                return base, local
            return getattr(base, node.attr, _UNDEFINED), local
        return _UNDEFINED, False

    def value(self, node: ast.expr) -> object:
        """The value of a metadata or axis expression; _UNDEFINED if it names something
        not defined yet (`Unreadable` in the last reading)."""
        with contextlib.suppress(ValueError, TypeError, SyntaxError, MemoryError):
            return ast.literal_eval(node)
        code = compile(ast.Expression(node), f"<annotation of {self.where}>", "eval")
        try:
            # Its names as `__getitem__` finds them (`eval` asks a namespace for nothing else).
            return eval(code, {}, cast("Mapping[str, object]", self))
        except NameError as error:
            return Unreadable(ast.unparse(node), str(error)) if self.final else _UNDEFINED

    def __getitem__(self, name: str) -> object:
        """A name's value, for `eval` (the reader is its local namespace): found as `lookup`
        finds it, so that a local bound later is not the module's; else a `NameError`."""
        found, _ = self.lookup(ast.Name(name))
        if found is _UNDEFINED:
            raise NameError(f"name {name!r} is not defined")
        return found

    # -- the outermost part --

    def outer(self, expr: ast.expr) -> _Outer:
        """What the source's outermost part declares."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):  # A string in one.
            return self.outer(self.parse(expr.value))
        head = expr.value if isinstance(expr, ast.Subscript) else expr
        if not isinstance(head, ast.Name | ast.Attribute):
            return _PLAIN  # `int | None`, literals, calls: never Static at the top.
        found, local = self.lookup(head)
        found = unalias(found)
        if found is _UNEVALUATED_ALIAS:
            self.unevaluated_alias()
        if found is _UNDEFINED:
            self.undefined.append(ast.unparse(head))
            return _Outer(None)
        if not isinstance(expr, ast.Subscript):
            declared = _outermost(found)
            return _PLAIN if declared is None else declared._replace(local=local)
        items = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        if found in _ANNOTATED_ORIGINS or found in _TYPE_THEN_METADATA:
            values = tuple(self.value(item) for item in items[1:])
            if any(value is _UNDEFINED for value in values):
                return _Outer(None)
            if found not in _ANNOTATED_ORIGINS:  # `Sharded[T, *axes]`
                unread = [value for value in values if isinstance(value, Unreadable)]
                if unread:
                    raise ShardingDeclarationError(
                        messages.UNREAD_AXES.format(
                            where=self.where, source=unread[0].source, error=unread[0].error
                        )
                    )
                values = (axes_of(ast.unparse(items[0]), values, self.where),)
            return self.outer(items[0]).around(values, local)
        declared = _outermost(found)
        if declared is None:
            return _PLAIN
        if getattr(found, "__parameters__", ()):  # `Static[T]`: the type goes in for T.
            metadata = cast("tuple[object, ...]", getattr(found, "__metadata__", ()))
            return self.outer(items[0]).around(metadata, local)
        return declared._replace(local=local)

    def outer_object(self, obj: object) -> _Outer:
        if unalias(obj) is _UNEVALUATED_ALIAS:
            self.unevaluated_alias()
        return _outermost(obj) or _PLAIN

    def source(self, annotation: typing.ForwardRef | str) -> ast.expr:
        """A string or `ForwardRef` annotation, parsed. The names Python 3.14 wrote into a
        `ForwardRef`'s text for the parts it could evaluate (its `__extra_names__`) resolve to
        those values."""
        if isinstance(annotation, typing.ForwardRef):
            extra: Mapping[str, Any] = getattr(annotation, "__extra_names__", None) or {}
            self.names.update((name, (value, False)) for name, value in extra.items())
            annotation = annotation.__forward_arg__
        return self.parse(annotation)

    def parse(self, source: str) -> ast.expr:
        parts = source.split(".")
        if all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
            node: ast.expr = ast.Name(parts[0])  # `jax.Array`: most annotations, parsed 5x faster.
            for part in parts[1:]:
                node = ast.Attribute(node, part)
            return node
        # `*Ts` (PEP 646, a string under the future import) is read as `typing` reads it.
        text = f"({source},)[0]" if source.startswith("*") else source
        try:
            return ast.parse(text, mode="eval").body
        except SyntaxError as error:
            raise SyntaxError(
                messages.NOT_PYTHON.format(source=source, where=self.where, error=error.msg)
            ) from None

    def unevaluated_alias(self) -> NoReturn:
        raise StaticAnnotationError(messages.UNEVALUATED_ALIAS.format(where=self.where))

    # -- every part --

    def type_parts(self, tree: ast.expr) -> Iterator[ast.expr]:
        """The names in an annotation's source that are types (a dotted name is one), strings
        among them parsed as code: not the values of `Literal[...]`, nor the metadata of
        `Annotated[T, ...]` (or of another form in `_TYPE_THEN_METADATA`)."""
        stack = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name | ast.Attribute):
                yield node
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, str):
                    with contextlib.suppress(SyntaxError):  # Not code: a string like any other.
                        stack.append(self.parse(node.value))
            elif isinstance(node, ast.Subscript):
                head = self.lookup(node.value)[0]
                if head in _LITERAL_ORIGINS or _spelled(node.value, "Literal"):
                    yield node.value
                    continue
                if (
                    head in _ANNOTATED_ORIGINS
                    or head in _TYPE_THEN_METADATA
                    or _spelled(node.value, "Annotated")
                    or (head is _UNDEFINED and _spelled(node.value, "Sharded"))
                ):
                    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                    stack.extend((node.value, items[0]))
                else:
                    stack.extend((node.value, node.slice))
            elif isinstance(node, ast.Tuple | ast.List):
                stack.extend(node.elts)
            elif isinstance(node, ast.BinOp):
                stack.extend((node.left, node.right))
            else:  # Anything else an annotation may hold (`*Ts`, a call): its parts.
                stack.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.expr))

    def scan(self, tree: ast.expr) -> _Parts:
        """Every type part of the source: how many declare, and whether a name in it is not
        defined yet."""
        parts = _NONE
        for node in self.type_parts(tree):
            if isinstance(node, ast.Name | ast.Attribute):
                found = self.lookup(node)[0]
                if found in _TYPE_THEN_METADATA:
                    parts = parts.plus(_Parts(sharded=1))
                    continue
                undefined = isinstance(node, ast.Name) and found is _UNDEFINED
                parts = parts.plus(
                    _Parts.of(None if found is _UNDEFINED else _outermost(found), undefined)
                )
        return parts

    def scan_object(self, obj: object) -> _Parts:
        """`scan` for an evaluated annotation, which may hold strings and `ForwardRef`s."""
        if isinstance(obj, typing.ForwardRef | str):
            return self.scan(self.source(obj))
        parts = _Parts.of(_outermost(obj), False)
        value = unalias(obj)
        if value is not obj and value is not _UNEVALUATED_ALIAS:
            return parts.plus(self.scan_object(value))
        origin = typing.get_origin(obj)
        if origin in _LITERAL_ORIGINS:
            return parts
        args: tuple[object, ...] = typing.get_args(obj)
        if origin in _ANNOTATED_ORIGINS:
            args = args[:1]
        for arg in args:
            parts = parts.plus(self.scan_object(arg))
        return parts


class _Parts(NamedTuple):
    """What the type parts of an annotation declare (`_Reader.scan`): how many are Static,
    Sharded and Frozen, and whether a name in them is not defined yet."""

    statics: int = 0
    sharded: int = 0
    frozen: int = 0
    undefined: bool = False

    @classmethod
    def of(cls, declared: _Outer | None, undefined: bool) -> _Parts:
        if declared is None:
            return cls(undefined=undefined)
        return cls(bool(declared.static), bool(declared.axes), declared.frozen, undefined)

    def plus(self, more: _Parts) -> _Parts:
        return _Parts(
            self.statics + more.statics,
            self.sharded + more.sharded,
            self.frozen + more.frozen,
            self.undefined or more.undefined,
        )


_NONE = _Parts()
_STATIC_ONLY = _Parts(statics=1)
"""Inside `Static[...]` nothing else declares, or waits: a value, not an array."""


def _spelled(node: ast.expr, name: str) -> bool:
    """Whether `node` is the name `name`, bare or as an attribute (`Static`, `jdc.Static`)."""
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )


def read(
    annotation: object,
    where: str,
    scope: Scope,
    final: bool = False,
    names: Names | None = None,
) -> Reading:
    """What `annotation` declares at its outermost part, its names resolving in `scope`.

    `where` names the field or parameter in messages ("field 'x' of Model"). With `final`, a
    name still undefined cannot make it Static any more (the last reading of a pending one).
    `names`: the names an earlier reading resolved, taken as they were (not looked up again);
    the reading adds those it resolves.
    Raises `StaticAnnotationError` when `Static` is nested, or its outermost part cannot be
    told apart from Static; `ShardingDeclarationError` when `Sharded` is nested or given
    twice; `SyntaxError` for a string that is not Python.
    """
    if isinstance(annotation, typing.ForwardRef | str):
        reader = _Reader(where, scope, final, names)
        expr = reader.source(annotation)
        outer = reader.outer(expr)
        parts = _STATIC_ONLY if outer.static else reader.scan(expr)
        if outer.static is None and not parts.statics:  # Nothing resolves: go by the spelling.
            spelled = any(_spelled(n, "Static") for n in ast.walk(expr) if isinstance(n, ast.expr))
            parts = parts._replace(statics=int(spelled))
    else:
        reader = _Reader(where, scope, final, names)
        outer = reader.outer_object(annotation)
        parts = _STATIC_ONLY if outer.static else reader.scan_object(annotation)
    if outer.static is None:
        if parts.statics:
            _nested_static(annotation, where, reader.undefined[0] if reader.undefined else "")
        if final:  # Still undefined: not Static (a name for type checkers only, say).
            axes = outer.axes[0].names if outer.axes else None
            return Reading(False, axes, outer.others, False, False, outer.frozen > 0)
        if not scope.complete:
            raise StaticAnnotationError(
                messages.LOCALS_GONE.format(shown=_show(annotation), where=where)
            )
        return Reading(False, None, (), True, False)
    if not outer.static and parts.statics:
        _nested_static(annotation, where, None)
    if len(outer.axes) > 1:
        twice = ", ".join(map(repr, outer.axes))
        raise ShardingDeclarationError(messages.SHARDED_TWICE.format(where=where, axes=twice))
    if parts.sharded > len(outer.axes):
        raise ShardingDeclarationError(
            messages.SHARDED_INSIDE.format(where=where, shown=_show(annotation))
        )
    if parts.frozen > outer.frozen:
        raise StaticAnnotationError(
            messages.FROZEN_INSIDE.format(where=where, shown=_show(annotation))
        )
    pending = (parts.undefined or outer.undefined) and not outer.static and not final
    axes = outer.axes[0].names if outer.axes else None
    local = outer.local and outer.static
    return Reading(outer.static, axes, outer.others, pending, local, outer.frozen > 0)


def _nested_static(annotation: object, where: str, undefined: str | None) -> NoReturn:
    """`Static` where it cannot decide; `undefined`: the outermost name not defined yet."""
    shown = _show(annotation)
    if undefined is not None:
        named = f" {undefined}" if undefined else ""
        problem = messages.STATIC_UNDECIDED.format(shown=shown, where=where, undefined=named)
    else:
        problem = messages.STATIC_NOT_OUTERMOST.format(where=where, shown=shown)
    raise StaticAnnotationError(messages.STATIC_INSIDE.format(problem=problem))


def _show(annotation: object) -> str:
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    if isinstance(annotation, str):
        return annotation
    return repr(annotation).replace(repr(STATIC_MARKER), "Static").replace("typing.", "")
