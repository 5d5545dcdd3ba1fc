"""Readable text for pytrees: `pformat`, `pprint`, and the repr of pytree dataclasses.

Arrays print as their dtype and shape (`f32[1000,1000]`, `key<fry>[2]`), never their values,
so printing a model copies nothing to the host; the mesh axes an array is sharded along follow
its dimensions, as `jax.typeof(x).str_short()` writes them (`f32[8@data,4]`); an array of at
most `SMALL_ARRAY` elements also shows its values (`f32[](0.5)`), so a scalar state still reads
as numbers. Nodes (our
classes and other dataclasses, lists, tuples, named tuples, dicts) go on one line when it
fits the width, else one child per line, indented. A node met again inside itself prints as
`...`. A field its class declares `Frozen` prints as `Frozen(...)` around its value, so a model,
its gradients and its masks show what is not trained.
"""

from __future__ import annotations

import dataclasses
import re
import reprlib
import types
from collections.abc import Callable, Iterable
from typing import Any, cast

import numpy as np
from jax import Array, core
from jax.sharding import NamedSharding

from jax_dataclasses._core.codegen import FILENAME_PREFIX
from jax_dataclasses._core.record import layout_of

SMALL_ARRAY = 8
"""Arrays with at most this many elements print their values (when they have values)."""
DEFINED_AGAIN = (
    "the class was defined again (a notebook cell or module run twice, importlib.reload), and "
    "instances of the old and the new class are different pytree nodes"
)
"""Why two classes of one name are not one, where a message meets them."""
_INDENT = 4
_DTYPE_PREFIXES = (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i"), ("complex", "c"))


def pformat(tree: Any, *, width: int = 80, short_arrays: bool = True) -> str:
    """`tree` (any pytree, or any value) as text, at most `width` columns where it can.

    Arrays print by dtype and shape (`f32[1000,1000]`), with their values when they have at
    most 8 elements (`f32[2](0.5, 1.0)`); large arrays are never copied to the host. Pytree
    dataclasses, lists, tuples, dicts and named tuples are indented when a line would be too
    long. A class with its own `__repr__` keeps it.

    Args:
        tree: Any pytree, or any value.
        width: The line width to fit in.
        short_arrays: With `False`, arrays show all their values (NumPy's formatting).

    Returns:
        The text.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Dense:
        ...     w: jax.Array
        ...     b: jax.Array
        >>> print(jdc.pformat({"layers": [Dense(jnp.ones((64, 64)), jnp.zeros(2))]}, width=30))
        {
            'layers': [
                Dense(
                    w=f32[64,64],
                    b=f32[2](0.0, 0.0),
                ),
            ],
        }
    """
    return _Printer(width, short_arrays).format(tree, 0)


def pprint(tree: Any, *, width: int = 80, short_arrays: bool = True) -> None:
    """Print `pformat(tree, width=width, short_arrays=short_arrays)`.

    Examples:
        >>> jdc.pprint({"w": jnp.ones((3, 3)), "scale": jnp.float32(0.5)})
        {'w': f32[3,3], 'scale': f32[](0.5)}
    """
    print(pformat(tree, width=width, short_arrays=short_arrays))


def array_summary(array: Any) -> str:
    """`f32[3,4]`, `key<fry>[]`, `f32[8@data,4]`: an array's dtype and shape, and the mesh axes
    it is sharded along, read without touching its data."""
    dtype = array.dtype
    name = str(dtype)
    if isinstance(dtype, np.dtype) and dtype.fields is not None:
        name = "float0"  # The dtype of gradients with respect to integers.
    elif isinstance(dtype, np.dtype):
        for long, short in _DTYPE_PREFIXES:
            if name.startswith(long) and name[len(long) :].isdigit():
                name = short + name[len(long) :]
                break
    dims = [str(size) for size in array.shape]
    for dim, entry in enumerate(_sharded_axes(array)[: len(dims)]):
        if isinstance(entry, str):
            dims[dim] += f"@{entry}"
        elif entry:
            dims[dim] += f"@({','.join(entry)})"
    return f"{name}[{','.join(dims)}]"


def _sharded_axes(array: Any) -> tuple[Any, ...]:
    """The entries of the `PartitionSpec` an array is placed by (a traced one: of its type,
    which has one under explicit mesh axes); () for any other sharding, or none."""
    traced = isinstance(array, core.Tracer)
    owner: object = getattr(cast(object, array), "aval", None) if traced else array
    sharding = getattr(owner, "sharding", None)
    return tuple(sharding.spec) if isinstance(sharding, NamedSharding) else ()


def device_ids(sharding: object) -> list[int]:
    """The ids of a sharding's devices: in its mesh's order where it has one, else sorted."""
    try:
        devices = np.asarray(getattr(getattr(sharding, "mesh", None), "devices", None))
    except Exception:  # An abstract mesh has no devices.
        devices = np.asarray(None)
    if devices.dtype == object and devices.size > 0 and devices.flat[0] is not None:
        return [getattr(d, "id", -1) for d in devices.flat]
    found: Iterable[object] = getattr(sharding, "device_set", ())
    return sorted(getattr(d, "id", -1) for d in found)


class _Printer:
    """One `pformat` call: the width, the array style, and the nodes on the current path."""

    def __init__(self, width: int, short_arrays: bool, own: object = None) -> None:
        self.width = width
        self.short_arrays = short_arrays
        self.path: set[int] = set()
        self.own = own
        """The object whose generated `__repr__` prints: a node, whatever `__repr__` its class
        has now (a decorator's wrapper around ours, which calls ours)."""

    def format(self, value: Any, indent: int, used: int | None = None) -> str:
        """`value` on one line if it fits, else over several, closing at `indent`. `used`: the
        columns its first line already has (the indent, and a label such as `field=`)."""
        flat = self.flat(value, self.width - (indent if used is None else used))
        if flat is not None:
            return flat
        node = self._node(value)
        if node is None:  # A leaf longer than the line: as it is.
            return self._leaf(value)
        opener, entries, closer = node
        inner = indent + _INDENT
        self.path.add(id(value))
        lines: list[str] = []  # A loop, not a comprehension: one frame per level of nesting.
        for label, child in entries:
            lines.append(
                f"{' ' * inner}{label}{self.format(child, inner, inner + len(label) + 1)},"
            )
        self.path.discard(id(value))
        return "\n".join([opener, *lines, " " * indent + closer])

    def flat(self, value: Any, budget: int) -> str | None:
        """`value` on one line if that takes at most `budget` columns, else None."""
        node = self._node(value)
        if node is None:
            text = self._leaf(value)
            return text if len(text) <= budget else None
        if id(value) in self.path:
            return "..."
        opener, entries, closer = node
        trailing = "," if opener == "(" and len(entries) == 1 else ""  # A 1-tuple.
        budget -= len(opener) + len(closer) + len(trailing)
        parts: list[str] = []
        self.path.add(id(value))
        try:
            for label, child in entries:
                part = self.flat(child, budget - len(label))
                if part is None:
                    return None
                parts.append(label + part)
                budget -= len(parts[-1]) + 2
                if budget < -2:  # The last entry has no ", " after it.
                    return None
        finally:
            self.path.discard(id(value))
        return f"{opener}{', '.join(parts)}{trailing}{closer}"

    def _node(self, value: object) -> tuple[str, list[tuple[str, Any]], str] | None:
        """How to print a node: opener, (label, child) entries, closer; None for a leaf."""
        kind = type(value)
        if kind is _FrozenField:
            return "Frozen(", [("", cast(_FrozenField, value).value)], ")"
        if kind is list:
            return "[", [("", child) for child in cast("list[Any]", value)], "]"
        if issubclass(kind, dict):  # dict, and the subclasses JAX also treats as nodes
            pairs = cast("dict[Any, Any]", value).items()
            entries = [(f"{key!r}: ", child) for key, child in pairs]
            if kind is dict:
                return "{", entries, "}"
            return f"{kind.__qualname__}({{", entries, "})"
        if issubclass(kind, tuple):
            items = cast("tuple[Any, ...]", value)
            fields = cast("tuple[str, ...] | None", getattr(value, "_fields", None))
            if fields is not None:  # A named tuple.
                entries = [(f"{name}=", getattr(items, name)) for name in fields]
                return f"{kind.__qualname__}(", entries, ")"
            return "(", [("", child) for child in items], ")"
        if dataclasses.is_dataclass(value) and (value is self.own or _generated_repr(kind)):
            # The fields of the class whose repr it is, as in the standard library: a subclass
            # with `repr=False` prints as its base does.
            owner = next(klass for klass in kind.__mro__ if _repr_is_own(klass))
            layout = layout_of(kind)
            frozen = layout.frozen if layout is not None else ()
            shown: list[tuple[str, Any]] = []
            for f in dataclasses.fields(owner):
                if f.repr:
                    child: object = getattr(value, f.name, "<unset>")
                    shown.append((f"{f.name}=", _FrozenField(child) if f.name in frozen else child))
            return f"{kind.__qualname__}(", shown, ")"
        return None

    def _leaf(self, value: object) -> str:
        if not isinstance(value, Array | np.ndarray | core.Tracer):
            return repr(value)
        array = cast(Any, value)
        summary = array_summary(array)
        if (
            isinstance(array, core.Tracer)
            or not _has_values(array.dtype)
            or not getattr(array, "is_fully_addressable", True)
        ):
            # No values to show (traced, a PRNG key, float0), or not here to fetch: an array
            # spanning several processes (fetching it raises; other processes hold parts).
            return summary
        if not self.short_arrays:
            return f"{summary}({_values(np.asarray(array))})"
        if array.size <= SMALL_ARRAY:  # `str` of NumPy scalars: float32 0.1 is "0.1".
            return f"{summary}({', '.join(map(str, np.asarray(array).ravel()))})"
        return summary


class _FrozenField:
    """The value of a field declared `Frozen`, as printed: `Frozen(<value>)`."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _has_values(dtype: object) -> bool:
    return isinstance(dtype, np.dtype) and dtype.fields is None  # float0 is a structured dtype


def _repr_is_own(cls: type) -> bool:
    """Whether `cls` has a repr of its own: it holds one, or it is a dataclass with `repr=True`
    (a class cloudpickled by value by an earlier version, which gave every class the same
    function, lost its own as inherited)."""
    params = cls.__dict__.get("__dataclass_params__")
    return "__repr__" in cls.__dict__ or bool(getattr(params, "repr", False))


def _generated_repr(cls: type) -> bool:
    """Whether `cls` prints with our repr or the one `dataclasses` generates (so its fields can
    be laid out here), rather than a `__repr__` of its own (or none: `repr=False`)."""
    code = getattr(cast(Any, cls).__repr__, "__code__", None)
    if code is None:
        return False
    # A copy's code is the same (even unpickled: cloudpickle copies a class's methods' code);
    # a class pickled by value by the previous version holds a compiled one.
    ours = code.co_name == _pytree_dataclass_repr.__name__ or (
        code.co_name == "__repr__" and code.co_filename.startswith(FILENAME_PREFIX)
    )
    return ours or code.co_filename in _GENERATED_REPR_FILES


def _values(array: np.ndarray[Any, Any]) -> str:
    return re.sub(r"\s+", " ", np.array2string(array, separator=", ", threshold=2**31))


_GENERATED_REPR_FILES = frozenset({dataclasses.__file__, reprlib.__file__})
"""Where the `__repr__` that `dataclasses` generates is defined (a wrapper, on every version)."""


def _pytree_dataclass_repr(self: object) -> str:
    """The `__repr__` of a pytree dataclass: `pformat(self)`, laid out by the fields of the
    class whose repr it is, even where a decorator wrapped it (as a leaf, it would call the
    wrapper, which calls this again)."""
    return _Printer(80, True, self).format(self, 0)


# The names of this repr in earlier versions, which classes they pickled by value reference:
# jax_dataclasses._printing.dataclass_repr (as the `__repr__` of every class), then
# jax_dataclasses._core.printing._generated_text (as what a compiled `__repr__` called).
dataclass_repr = _generated_text = _pytree_dataclass_repr


def repr_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """`__repr__` and IPython's `_repr_pretty_` for `cls`, which does not define its own: each
    class holds its own copy (a new function of the same code, as cheap as a closure), as
    `dataclasses` generates a `__repr__` per class. A tool that copies classes (cloudpickle,
    by value) omits a method a class shares with its base as inherited, and the printer lays
    out the fields of the first class in the MRO holding a repr: a subclass holding its
    base's function would print as its base."""
    return {
        "__repr__": _method_copy(cls, "__repr__", _pytree_dataclass_repr),
        "_repr_pretty_": _method_copy(cls, "_repr_pretty_", repr_pretty),
    }


def _method_copy(cls: type, name: str, template: Callable[..., Any]) -> Callable[..., Any]:
    method = types.FunctionType(template.__code__, template.__globals__, name)
    method.__module__ = cls.__module__
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    method.__doc__ = template.__doc__
    return method


_IPYTHON_PRINTER = ("output_width", "buffer", "group_queue", "_break_one_group", "indent")
"""What `repr_pretty` uses of IPython's printer (some of it private): without it, the repr."""


def repr_pretty(self: object, printer: Any, cycle: bool) -> None:
    """IPython's `_repr_pretty_`: the text of `repr`, fitted to the column IPython is at.

    Inside a list or dict that IPython prints, the object starts at some column: it gets the
    rest of the line's width, and its continuation lines are indented from that column. An
    object that needs several lines first breaks the groups around it (a list then puts one
    item per line), as `pprint` does, and is fitted again where that leaves it. A printer
    other than IPython's gets the plain repr.
    """
    if cycle:
        printer.text("...")
        return
    if not all(hasattr(printer, name) for name in _IPYTHON_PRINTER):
        printer.text(pformat(self))
        return
    column = printer.output_width + printer.buffer_width
    text = pformat(self, width=max(printer.max_width - column, 1))
    if "\n" in text and printer.buffer:  # Pending separators would stay spaces: break them.
        while (group := printer.group_queue.deq()) is not None:
            printer._break_one_group(group)  # IPython's own step for this (its break_).
        printer.flush()
        column = printer.output_width
        text = pformat(self, width=max(printer.max_width - column, 1))
    first, *rest = text.split("\n")
    printer.text(first)
    with printer.indent(column - printer.indentation):
        for line in rest:
            printer.break_()
            printer.text(line)
