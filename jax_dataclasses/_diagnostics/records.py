"""Records of calls: what `jax.jit`'s caches key a tree by, kept without its arrays
(docs/design/diagnostics.md).

A record keeps, by key path, each leaf's shape, dtype, weak type and sharding, the tree's
structure, and every static value (those compared by identity through weak references, so that
a record keeps nothing alive). Leaves of one type and sharding share one record, nodes of one
class their key and name tuples, so a record allocates a few objects per node, not per leaf.
`_diagnostics.explain` compares two.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import types
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import jax
import numpy as np
from jax import core, dtypes

from jax_dataclasses._core.printing import array_summary
from jax_dataclasses._core.record import layout_of
from jax_dataclasses._tree_api import flatten_one_level, keyed_level, keystr, type_of


@dataclasses.dataclass(slots=True)
class LeafRecord:
    """An array-like leaf: what `jax.jit` traces it as (`shape`, canonical `dtype`, `weak`
    type), and where it lives (a device array's `sharding`, a traced one's type's, or None).
    `given`: the dtype as given (`float64`), for the text, made when a report shows it;
    `number`: a Python number's value (a static argument of a `jax.jit` we did not make?)."""

    shape: tuple[int, ...]
    dtype: object
    weak: bool
    sharding: object
    given: object = None
    number: object = None
    _text: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        if self._text is None:
            shown = types.SimpleNamespace(
                shape=self.shape, dtype=self.given, sharding=self.sharding
            )
            self._text = (
                f"Python {type(self.number).__name__}"
                if self.given is None  # A Python number.
                else array_summary(shown) + (" (weakly typed)" if self.weak else "")
            )
        return self._text


@dataclasses.dataclass(slots=True)
class StaticRecord:
    """A value compared with `==`, as `jax.jit` compares static values, as `_held` keeps it;
    its text is made when a report shows it (an identity-compared object's, when held)."""

    held: object
    _text: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = held_text(self.held)
        return self._text


class WeakRecord:
    """An identity-compared value, held by weak reference: equal to a `WeakRecord` of the same
    object while it lives."""

    __slots__ = ("ref", "text")

    def __init__(self, value: object) -> None:
        self.ref = weakref.ref(value)
        self.text = text_of(value)

    def __eq__(self, other: object) -> bool:
        alive = self.ref()
        return isinstance(other, WeakRecord) and alive is not None and alive is other.ref()


class ArrayRecord:
    """An array in a static value, as its summary: equal to nothing (`==` on arrays never
    finds a compilation)."""

    __slots__ = ("text",)

    def __init__(self, value: object) -> None:
        self.text = f"array {array_summary(value)}"


class NodeRecord:
    """A pytree node: its class, its static values (`names`: named fields of our classes, or
    the aux data of others under ""), each as `_held` keeps it, and its children under their
    keys' texts (`.w`, `[0]`, `['a']`). Nodes of one of our classes share their `names` and
    `keys` tuples, and a node is one object with two tuples: a record of a large tree stays a
    few objects per node, so that it sets off few garbage collections."""

    __slots__ = ("cls", "keys", "names", "records", "statics")

    def __init__(
        self,
        cls: type,
        names: tuple[str, ...],
        statics: tuple[object, ...],
        keys: tuple[str, ...],
        records: tuple[Record, ...],
    ) -> None:
        self.cls, self.names, self.statics, self.keys, self.records = (
            cls,
            names,
            statics,
            keys,
            records,
        )


Record = LeafRecord | StaticRecord | NodeRecord
_GONE = object()
_SCALARS: Mapping[type, type] = types.MappingProxyType(
    {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}
)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_PLAIN = frozenset({str, int, float, bool, type(None)})  # Kept as they are, read first.


class _Building:
    """A node whose children are being recorded (`record` keeps a stack, not Python's)."""

    __slots__ = ("cls", "into", "keys", "names", "records", "statics")

    def __init__(
        self,
        into: list[Record],
        cls: type,
        names: tuple[str, ...],
        statics: tuple[object, ...],
        keys: tuple[str, ...],
    ) -> None:
        self.into, self.cls, self.names, self.statics, self.keys = into, cls, names, statics, keys
        self.records: list[Record] = []


_OTHERS = ("",)
"""The name of another library's node's one static value, its aux data."""


def record(tree: object) -> Record:
    """What `jax.jit`'s cache keeps of `tree` (no arrays), at any depth (`jax.jit` takes
    trees deeper than Python's recursion limit). Leaves of the same type and sharding share
    one `LeafRecord`, and nodes of one class their names and keys."""
    result: list[Record] = []
    work: list[tuple[object, list[Record]] | _Building] = [(tree, result)]
    texts: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # Per class, made once.
    leaves: dict[object, LeafRecord] = {}
    while work:
        item = work.pop()
        if isinstance(item, _Building):
            item.into.append(
                NodeRecord(item.cls, item.names, item.statics, item.keys, tuple(item.records))
            )
            continue
        value, into = item
        cls = type_of(value)
        layout = layout_of(cls)
        if layout is not None:
            children, aux = layout.flatten(value)
            statics = tuple(map(_held, layout.static_values(aux)))
            names_keys = texts.get(cls)
            if names_keys is None:
                names = tuple(f".{name}" for name in layout.statics)
                keys = tuple(keystr((key,)) for key, _ in layout.flatten_with_keys(value)[0])
                names_keys = texts[cls] = (names, keys)
            names, keys = names_keys
        else:
            level = flatten_one_level(value)
            if level is None:
                into.append(_leaf(value, leaves))
                continue
            # Another library's node (or a container): its aux data as one value.
            names, statics = _OTHERS, (_held(level[1]),)
            keyed = keyed_level(value)[0]
            keys, children = tuple(keystr(path) for path, _ in keyed), tuple(c for _, c in keyed)
        building = _Building(into, cls, names, statics, keys)
        work.append(building)
        work.extend((child, building.records) for child in reversed(children))
    return result[0]


def _leaf(value: object, shared: dict[object, LeafRecord]) -> LeafRecord | StaticRecord:
    """A leaf's record; a JAX array's or tracer's is the one in `shared` for its type and
    sharding, if there is one (most leaves of a model share a few)."""
    kind = type(value)
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        canonical = dtypes.canonicalize_dtype(scalar)
        return LeafRecord((), canonical, kind is not bool, None, number=value)
    aval: object = getattr(value, "aval", None)  # A JAX array's or tracer's type: the fast read.
    typed = value if aval is None else aval
    shape, dtype = getattr(typed, "shape", None), getattr(typed, "dtype", None)
    if shape is None or dtype is None:
        return static(value)  # Not an array: jax.jit takes it only as a static value.
    sharding = getattr(aval if isinstance(value, core.Tracer) else value, "sharding", None)
    key = (aval, sharding)
    try:
        found = shared.get(key) if aval is not None else None
    except TypeError:  # An unhashable type or sharding: not shared.
        aval = None
        found = None
    if found is not None:
        return found
    weak = getattr(typed, "weak_type", False)
    given: object = dtype
    if isinstance(dtype, np.dtype):
        dtype = dtypes.canonicalize_dtype(dtype)
    made = LeafRecord(tuple(cast("Iterable[int]", shape)), dtype, bool(weak), sharding, given)
    if aval is not None:
        shared[key] = made
    return made


def static(value: object) -> StaticRecord:
    return StaticRecord(_held(value))  # A static value as a record keeps it.


def _held(value: object) -> object:
    """`value` as a record keeps it, keeping nothing alive that `jax.jit` lets go of: an array
    as its summary (`ArrayRecord`), an identity-compared object by weak reference (`WeakRecord`), in
    tuples, lists and dicts too; any other value as it is."""
    if type(value) in _PLAIN:
        return value
    if _is_array(value):
        return ArrayRecord(value)
    items = _items_mapped(value, _held)
    if items is not _GONE:
        return items
    if by_identity(value):
        with contextlib.suppress(TypeError):  # Not weakly referable: kept, as jax.jit keeps it.
            return WeakRecord(value)
    return value


def live(held: object) -> object:
    """The value `held` stands for (`_held` undone): `_GONE` for an object no longer alive,
    an `ArrayRecord` for an array."""
    if isinstance(held, WeakRecord):
        alive = held.ref()
        return _GONE if alive is None else alive
    items = _items_mapped(held, live)
    return held if items is _GONE else items


def _items_mapped(value: object, function: Callable[[object], object]) -> object:
    """A dict, list, tuple or named tuple of `function` of each item; `_GONE` for any other
    value (and a named tuple with a constructor of its own)."""
    kind = type(value)
    if kind is dict:
        return {k: function(v) for k, v in cast("dict[object, object]", value).items()}
    if kind is list or kind is tuple:
        mapped = [function(item) for item in cast("Sequence[object]", value)]
        return mapped if kind is list else tuple(mapped)
    if isinstance(value, tuple) and hasattr(kind, "_make"):  # A named tuple.
        with contextlib.suppress(Exception):
            return cast(Any, kind)._make(map(function, cast("Sequence[object]", value)))
    return _GONE


def _is_array(value: object) -> bool:
    return isinstance(value, jax.Array | np.ndarray)


def by_identity(value: object) -> bool:
    """Whether `==` on `value` is identity (the type keeps `object.__eq__`)."""
    return type(value).__eq__ is object.__eq__ and not isinstance(value, type)


def text_of(value: object, limit: int = 80) -> str:
    """A value in a few words (at most `limit` characters), without memory addresses (which
    differ on every run)."""
    if isinstance(value, types.FunctionType):
        return f"<function {value.__qualname__}>"
    if by_identity(value) and type(value).__repr__ is object.__repr__:
        return f"<{type(value).__qualname__} object>"
    try:
        text = _ADDRESS.sub("", repr(value))
    except Exception:  # A repr that fails: a report must not.
        return f"<{type(value).__qualname__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def held_text(held: object, limit: int = 80) -> str:
    if isinstance(held, WeakRecord | ArrayRecord):
        return held.text
    return text_of(live(held), limit)
