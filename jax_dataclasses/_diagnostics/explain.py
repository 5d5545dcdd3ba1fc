"""Why `jax.jit` compiles again, in field terms: `jit_diff` (docs/design/diagnostics.md).

`jax.jit` finds a compilation by the arguments' tree structure (classes, container lengths and
keys, and every static value, compared with `==`), each leaf's shape, dtype, weak type and
sharding, and the static arguments. A *record* of a tree keeps exactly that, by key path, and
never an array: shapes, dtypes, shardings and static values (those compared by identity through
weak references, so that a record keeps nothing alive). Two records compare into the
differences, named in the package's terms (`.layers[2].n_heads: 8 → 4`), each static value
that can never hit the cache with its fix (an identity-hashed object, a function made per call,
NaN, an array). A static value's own judgement (unhashable, identity-hashed, an array) is
`_core.static_values.value_problem`, the one construction uses; comparing two values adds what only
a comparison shows (a function made anew, NaN). `_diagnostics.recompiles` records calls with these.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from jax_dataclasses._core.printing import DEFINED_AGAIN, device_ids
from jax_dataclasses._core.static_values import value_problem
from jax_dataclasses._diagnostics.records import (
    ArrayRecord,
    LeafRecord,
    NodeRecord,
    Record,
    StaticRecord,
    by_identity,
    held_text,
    live,
    record,
    text_of,
)


@dataclasses.dataclass(frozen=True)
class JitChange:
    """One difference between two trees that makes `jax.jit` trace or compile again: an item
    of what `jdc.jit_diff` returns.

    Examples:
        >>> (change,) = jdc.jit_diff({"lr": 0.1}, {"lr": jnp.float32(0.1)})
        >>> change.path, change.kind, change.before, change.after
        ("['lr']", 'weak type', 'Python float', 'f32[]')
        >>> change.fix
        'a Python number (and an array made from one, ...) is weakly typed ...'
    """

    path: str
    """Where, as a key path (`.layers[2].n_heads`); for a call, from the argument's name."""
    kind: str
    """"static field", "static argument", "static value", "metadata", "structure", "class",
    "shape", "dtype", "weak type", "sharding", or "value" (a Python number's)."""
    before: str
    after: str
    fix: str = ""
    """Why the value can never hit the cache, and what to do; empty for a plain change."""

    def __str__(self) -> str:
        text = f"{self.path or '(the root)'}: {self.before} → {self.after} ({self.kind})"
        return f"{text}; {self.fix}" if self.fix else text


class JitDiff(tuple[JitChange, ...]):
    """The differences `jdc.jit_diff` found, in key path order: a tuple of `JitChange`s, empty
    (and false) when `jax.jit` would reuse the compilation. Prints one difference per line.

    Examples:
        >>> diff = jdc.jit_diff([jnp.ones(3), jnp.ones(2)], [jnp.ones(4), jnp.ones(2, int)])
        >>> len(diff), bool(jdc.jit_diff(jnp.ones(3), jnp.zeros(3)))
        (2, False)
        >>> print(diff)
        [0]: f32[3] → f32[4] (shape)
        [1]: f32[2] → i32[2] (dtype)
    """

    def __str__(self) -> str:
        if not self:
            return (
                "no difference: same tree structure, static values, shapes, dtypes, weak types "
                "and shardings"
            )
        return "\n".join(map(str, self))


# -- the comparison ------------------------------------------------------------------------


def jit_diff(before: Any, after: Any) -> JitDiff:
    """Every difference between two trees that makes `jax.jit` trace or compile again.

    Named by key path, in the package's terms: a static field of a pytree dataclass by name
    (`.layers[2].n_heads: 8 → 4`), the class or structure of a node (`.layers: list of 3
    items → list of 4 items`, `.cache: None → KVCache`, a dict's keys), a leaf's shape,
    dtype, weak type or sharding. Any pytree: pytree dataclasses inside lists, dicts, optax
    states or other libraries' nodes, whose aux data is compared as a whole. A static value
    that can never hit the cache (an identity-hashed object, a function made per call, NaN,
    an array) comes with the fix. Nothing is constructed: no `__init__` runs.

    To compare two calls' arguments, pass tuples (or dicts) of them. A Python number is
    traced, so a new value does not compile again; a changed one is listed (as a "value")
    only when nothing else differs, in case it is a static argument.

    Args:
        before: A tree (any pytree, or any value), such as an earlier call's argument.
        after: The tree to compare with it.

    Returns:
        The differences, one `JitChange` each (`path`, `kind`, `before`, `after`, `fix`);
        `str()` of it has one line per difference.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Block:
        ...     w: jax.Array
        ...     n_heads: jdc.Static[int]
        >>> old = {"layers": [Block(jnp.ones(4), 8)]}
        >>> new = {"layers": [Block(jnp.ones(3), 4)]}
        >>> print(jdc.jit_diff(old, new))
        ['layers'][0].n_heads: 8 → 4 (static field)
        ['layers'][0].w: f32[4] → f32[3] (shape)
    """
    comparison = Comparison()
    comparison.tree("", record(before), record(after))
    return comparison.result()


class Comparison:
    """One comparison of two records: the differences found, in key path order, and apart
    those of Python numbers' values (listed only when nothing else differs, and only where a
    number may be static)."""

    def __init__(self, numbers: bool = True) -> None:
        self.found: list[JitChange] = []
        self.numbers: list[JitChange] | None = [] if numbers else None

    def result(self) -> JitDiff:
        return JitDiff(self.found or self.numbers or ())

    def tree(self, path: str, old: Record, new: Record, kind: str = "static value") -> None:
        """Two records at `path`, in key path order, at any depth (a stack, not Python's);
        `kind` names what a static value at `path` is (below it, "static value")."""
        work = [(path, old, new, kind)]
        while work:
            path, old, new, kind = work.pop()
            if isinstance(old, LeafRecord) and isinstance(new, LeafRecord):
                self._leaves(path, old, new)
            elif isinstance(old, StaticRecord) and isinstance(new, StaticRecord):
                self._values(path, kind, old, new)
            elif isinstance(old, NodeRecord) and isinstance(new, NodeRecord) and old.cls is new.cls:
                work.extend(reversed(self._nodes(path, old, new)))
            elif (
                isinstance(old, NodeRecord)
                and isinstance(new, NodeRecord)
                and _NONE not in (old.cls, new.cls)
            ):
                fix = _REDEFINED if old.cls.__qualname__ == new.cls.__qualname__ else ""
                self.add(path, "class", _summary(old), _summary(new), fix)
            else:
                self.add(path, "structure", _summary(old), _summary(new))

    def add(self, path: str, kind: str, before: str, after: str, fix: str = "") -> None:
        self.found.append(JitChange(path, kind, before, after, fix))

    def _leaves(self, path: str, old: LeafRecord, new: LeafRecord) -> None:
        if old.shape != new.shape:
            self.add(path, "shape", old.text, new.text)
        elif old.dtype != new.dtype:
            self.add(path, "dtype", old.text, new.text)
        elif old.weak != new.weak:
            self.add(path, "weak type", old.text, new.text, _WEAK)
        elif (
            old.sharding is not None
            and new.sharding is not None
            and not same(old.sharding, new.sharding)
        ):
            before, after = old.text, new.text
            if before == after:  # Not told apart by the summary: say which sharding.
                before, after = _sharding_texts(old.sharding, new.sharding)
            self.add(path, "sharding", before, after)
        elif (
            self.numbers is not None
            and old.number is not None
            and new.number is not None
            and not same(old.number, new.number)
        ):
            fix = _nan(new.number) or _NUMBER
            change = JitChange(path, "value", repr(old.number), repr(new.number), fix)
            self.numbers.append(change)

    def _nodes(
        self, path: str, old: NodeRecord, new: NodeRecord
    ) -> list[tuple[str, Record, Record, str]]:
        """Nodes of one class: their static values by name (when their children's keys are
        the same); returns their children to compare, by key (a dict's kept keys too)."""
        if old.keys != new.keys:
            self.add(path, "structure", _summary(old), _summary(new))
            olds = dict(zip(old.keys, old.records, strict=True))
            news = zip(new.keys, new.records, strict=True)
            return [
                (path + key, olds[key], now, "static value") for key, now in news if key in olds
            ]
        for name, before, after in zip(new.names, old.statics, new.statics, strict=True):
            if not same(before, after):
                kind = "static field" if name else "metadata"
                self._values(path + name, kind, StaticRecord(before), StaticRecord(after))
        pairs = zip(new.keys, old.records, new.records, strict=True)
        return [(path + key, was, now, "static value") for key, was, now in pairs]

    def _values(self, path: str, kind: str, old: StaticRecord, new: StaticRecord) -> None:
        """Two static values; where they are containers of the same keys, at the items that
        differ (`.hparams['schedule']`, another library's aux data `[2]`)."""
        if same(old.held, new.held):
            return
        parts = _parts(old.held, new.held)
        if parts is None:
            self.add(path, kind, *_told_apart(old, new), _never_equal(old, new))
            return
        for key, was, now in parts:
            items = (StaticRecord(held) for held in (was, now))
            self._values(path + key, kind, *items)


_NONE = type(None)
_REDEFINED = f"{DEFINED_AGAIN}: build every value with one definition"
_WEAK = (
    "a Python number (and an array made from one, such as jnp.asarray(1.0)) is weakly typed and "
    "an array of the same dtype is not, and jax.jit compiles each apart: pass the same kind on "
    "every call (jnp.float32(x), or always a Python float)"
)
_NUMBER = (
    "a Python number is traced, so its value alone does not compile again, unless it is a "
    "static argument (static_argnums, static_argnames), where every new value compiles once"
)


def _parts(old: object, new: object) -> list[tuple[str, object, object]] | None:
    """The items of two containers of the same kind and keys (dicts, lists, tuples, named
    tuples, dataclasses) as (key text, old item, new item); None for anything else."""
    kind = type(old)
    if kind is not type(new):
        return None
    if isinstance(old, dict):
        a, b = cast("dict[Any, Any]", cast(object, old)), cast("dict[Any, Any]", new)
        return [(f"[{k!r}]", a[k], b[k]) for k in a] if a.keys() == b.keys() else None
    if isinstance(old, list | tuple):
        a_items, b_items = cast("Sequence[Any]", old), cast("Sequence[Any]", new)
        names: Sequence[str] = getattr(kind, "_fields", ())
        if len(a_items) != len(b_items):
            return None
        keys = [f".{n}" for n in names] or [f"[{i}]" for i in range(len(a_items))]
        return list(zip(keys, a_items, b_items, strict=True))
    if dataclasses.is_dataclass(old) and not isinstance(old, type):
        names = [f.name for f in dataclasses.fields(old) if f.compare]
        return [(f".{n}", getattr(old, n), getattr(new, n)) for n in names]
    return None


def same(old: object, new: object) -> bool:
    """`old == new` as jax.jit decides it (identity first); False where it cannot tell."""
    if old is new:
        return True
    try:
        return bool(old == new)
    except Exception:  # An array's `==`, or a comparison that fails: never a hit.
        return False


def _never_equal(old: StaticRecord, new: StaticRecord) -> str:
    """Why a static value, which replaced `old` and compares unequal to it, may never hit the
    cache, and the fix; empty for a plain change of value."""
    if isinstance(new.held, ArrayRecord) or _holds_array(new.held):
        return (
            "an array as a static value is compared with ==, which raises or never matches: "
            "store a tuple (tuple(array.tolist())) or make the field a child"
        )
    value = live(new.held)
    again = old.text == new.text  # The same function or class, by name (the old may be gone).
    if isinstance(value, types.FunctionType):
        return _PER_CALL if again else ""
    nan = _nan(value)
    if nan is not None:
        return nan
    problem = value_problem(value)  # Unhashable, or hashed by identity (construction's check).
    if problem is not None and problem != "array":
        return f"{problem}: {_BY_VALUE}"
    if again and by_identity(value):
        return (
            f"{_type_name(value)} compares by identity, so every new object compiles "
            f"again: create it once and pass the same object, or {_BY_VALUE}"
        )
    return ""


_PER_CALL = (
    "a function made anew for each call (a lambda or closure defined inside a function) "
    "compares by identity, so every call compiles again: define it once (at module level) and "
    "pass the same function"
)
_BY_VALUE = (
    "use an immutable value that compares by value (a tuple, a frozen dataclass, a string, a "
    "number)"
)


def _type_name(value: object) -> str:
    kind = type(value)
    module = "" if kind.__module__ in ("builtins", "__main__") else f"{kind.__module__}."
    return module + kind.__qualname__


def _nan(value: object) -> str | None:
    if isinstance(value, float | complex | np.floating | np.complexfloating) and value != value:
        return (
            "NaN is never equal to itself, so jax.jit never finds the earlier compilation: use "
            "a value that equals itself (None, a string)"
        )
    return None


def _summary(item: Record) -> str:
    """A node or leaf in a few words: `list of 2 items`, `dict with keys 'a', 'b'`, `None`."""
    if not isinstance(item, NodeRecord):
        return item.text
    cls = item.cls
    if cls is type(None):
        return "None"
    count = len(item.records)
    if issubclass(cls, dict):
        keys = ", ".join(key[1:-1] for key in item.keys[:6])
        more = ", ..." if count > 6 else ""
        return f"{cls.__name__} with keys {keys}{more}" if count else f"empty {cls.__name__}"
    if cls in (list, tuple):
        return f"{cls.__name__} of {count} item{'' if count == 1 else 's'}"
    return local_name(cls.__qualname__)


def local_name(qualname: str) -> str:
    """A qualified name without the functions that define it (`Layer.apply`, not
    `main.<locals>.Layer.apply`)."""
    return qualname.rpartition("<locals>.")[2]


def _holds_array(held: object) -> bool:
    """Whether a held container holds an array, at any depth."""
    if isinstance(held, dict):
        return any(map(_holds_array, cast("dict[object, object]", held).values()))
    if isinstance(held, list | tuple):
        return any(map(_holds_array, cast("Sequence[object]", held)))
    return isinstance(held, ArrayRecord)


def _told_apart(old: StaticRecord, new: StaticRecord) -> tuple[str, str]:
    """The texts of two static values, where `text_of` cut them at a common prefix: from
    shortly before their full texts first differ."""
    if old.text != new.text:
        return old.text, new.text
    before, after = held_text(old.held, limit=10_000), held_text(new.held, limit=10_000)
    start = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), None)
    if start is None or start < 40:
        return old.text, new.text
    return "..." + before[start - 20 : start + 57], "..." + after[start - 20 : start + 57]


def _sharding_texts(old: object, new: object) -> tuple[str, str]:
    """Two shardings whose summaries are the same, told apart: their texts in full, and the
    devices they are on, in their mesh's order, if those are what differs."""
    before, after = text_of(old, limit=1000), text_of(new, limit=1000)
    if before == after:
        before, after = (f"{before} on devices {device_ids(s)}" for s in (old, new))
    return before, after
