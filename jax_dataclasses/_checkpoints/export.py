"""Pytree dataclasses in `jax.export`'s serialized calling convention (docs/design/checkpoints.md).

An exported function stores the tree structures of its arguments and results; a custom node
is stored under a name, with its aux data (for us: the static field values) as bytes, and is
found again by that name in the process that deserializes it. JAX needs one
`jax.export.register_pytree_node_serialization` call per class for that, with functions that
turn the aux data into bytes and back. `register_export` makes that call for a pytree
dataclass: static values are stored as tagged JSON, so that each comes back exactly as it was
(a tuple as a tuple, `1` as an int, `1.0` as a float, a dtype as a dtype), since JAX compares
them with `==` when the deserialized function is called and puts them in its results. A value
we cannot store is refused when the function is serialized, naming the class and field, and a
field may be given a codec of its own (`static_codecs`).

Registration is explicit, one call per class, not done at decoration: names are a persistent
contract of files that outlive the code (a moved class must keep its old name), users who
already call JAX's function for their classes would break on a second registration, JAX keeps
a name for the life of the process, and a class defined in a function has no stable name.
"""

from __future__ import annotations

import enum
import json
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar, cast, get_origin

import jax.numpy as jnp
import numpy as np

from jax_dataclasses._core.record import Layout, layout_of

T = TypeVar("T")
FORMAT = 1
"""The version of the stored layout (`_store`); a reader refuses a newer one."""
SUPPORTED = (
    "None, bool, int, float, str, tuples of these, NumPy dtypes (`jnp.dtype(...)`; not "
    "structured or subarray ones), NumPy and jax.numpy scalar types (`jnp.float32`, "
    "`jnp.floating`), NumPy scalars of up to 64 bits (`np.int64(3)`) and members of enums "
    "defined at module level"
)
_ABSTRACT_TYPES = (
    np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger,
    np.inexact, np.floating, np.complexfloating, np.flexible, np.character,
)  # fmt: skip
"""NumPy's abstract scalar types (`jnp.floating is np.floating`), stored by name: they have no
dtype (NumPy 2 refuses `np.dtype(np.floating)`, NumPy 1 warns and gives float64)."""
_NAMES: dict[str, type] = {}
"""Each name registered through `register_export`, and its class: a later class of the same
module and qualified name (a notebook cell run again) takes the name over."""
_LOCK = threading.Lock()
"""Held while a class is registered (a check, then JAX's registries and `_NAMES` written)."""


class _Codec(NamedTuple):
    """A field's own way to store its static values (`static_codecs`): `encode` returns a value
    `_encode` can store, `decode` turns it back."""

    encode: Callable[[Any], object]
    decode: Callable[[Any], object]


def register_export(
    cls: type[T],
    name: str | None = None,
    *,
    static_codecs: Mapping[str, tuple[Callable[[Any], object], Callable[[Any], object]]]
    | None = None,
) -> type[T]:
    """Register a pytree dataclass so that `jax.export` can serialize functions that take or
    return it.

    Call it once per class, after the class is defined (in the module that defines it, so that
    a process that deserializes imports the class and its registration together); every class
    in the exported trees needs it, as JAX needs `jax.export.register_pytree_node_serialization`
    for every custom node. It returns the class, so it also works as a decorator above
    `@pytree_dataclass`.

    Static values are stored as JSON and come back exactly (type and value): None, bool,
    int, float, str, tuples of these, NumPy dtypes, NumPy and jax.numpy scalar types, NumPy
    scalars and members of module-level enums. Anything else is refused when the exported
    function is serialized (a `TypeError` naming the class and field), unless its field has a
    codec; so is NaN (a `ValueError`), which the loaded function, comparing static values with
    `==`, would never match.

    Args:
        cls: a pytree dataclass (or adopted subclass); `Model[int]` means `Model`.
        name: the name stored in serialized functions, which the loading process must
            register too. Default: `module.qualname`. Required for a class defined inside a
            function (every class that function makes shares its qualified name). Registering
            a class again under its name (a notebook cell run again, or new codecs) replaces
            the registration: the newest class of that module and qualified name is the one
            deserialized.
        static_codecs: for a static field whose values are not stored as they are, a pair
            `(encode, decode)`: `encode(value)` returns a value of a supported type and
            `decode` turns that back into the value. `decode(encode(v)) == v` is checked when
            the function is serialized.

    Raises:
        TypeError: `cls` is not a pytree dataclass, or a codec is not a pair of functions.
        ValueError: no name can be made for `cls`, the name is another class's, `cls` has
            another name already, or `static_codecs` names a field that is not static.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Scaled:
        ...     x: jax.Array
        ...     factor: jdc.Static[float] = 2.0
        >>> _ = jdc.register_export(Scaled, "docs.Scaled")
        >>> exported = jax.export.export(jax.jit(lambda s: s.x * s.factor))(Scaled(jnp.ones(2)))
        >>> jax.export.deserialize(exported.serialize()).call(Scaled(jnp.ones(2)))
        Array([2., 2.], dtype=float32)
    """
    import jax.export  # Not imported by `import jax` before jax 0.4.37: 15 ms, paid here.

    target: type = get_origin(cls) or cls  # `Model[int]` instances are `Model`s.
    layout = layout_of(target) if isinstance(target, type) else None  # pyright: ignore[reportUnnecessaryIsInstance]  # For callers without a checker.
    if layout is None:
        raise TypeError(
            f"register_export({cls!r}): not a pytree dataclass. Decorate the class with "
            "@jdc.pytree_dataclass; for other pytree nodes use "
            "jax.export.register_pytree_node_serialization."
        )
    name = _default_name(target) if name is None else name
    codecs = _codecs(target, layout, static_codecs or {})

    unflatten = layout.unflatten

    def serialize(aux_data: object, /) -> bytes:
        return _store(target, aux_data, codecs)

    def deserialize(serialized_aux_data: bytes, /) -> object:
        return _load(target, name, serialized_aux_data, codecs)

    def from_children(aux_data: object, children: Sequence[object]) -> object:
        return unflatten(aux_data, children)  # Never `__init__` (docs/design/core.md).

    with _LOCK:
        previous = _NAMES.get(name)
        if next((n for n, c in _NAMES.items() if c is target), name) != name:
            raise _conflict(target, name, previous)  # One name per class.
        if previous is not None and _same_definition(previous, target):
            _replace(target, name, serialize, deserialize, from_children)
        else:
            try:
                jax.export.register_pytree_node_serialization(
                    target,
                    serialized_name=name,
                    serialize_auxdata=serialize,
                    deserialize_auxdata=deserialize,
                    from_children=from_children,
                )
            except ValueError as error:  # JAX's "Duplicate serialization registration".
                raise _conflict(target, name, previous) from error
        _NAMES[name] = target
    return cls


def _default_name(cls: type) -> str:
    """`module.qualname`: stable across processes, unless the class is made by a function."""
    if "<locals>" in cls.__qualname__:
        raise ValueError(
            f"register_export({cls.__qualname__}): the class is defined inside a function, so "
            "its qualified name is shared by every class that function makes and cannot name "
            f"it in a file. Give it a name: jdc.register_export({cls.__name__}, "
            f"name='{cls.__module__}.{cls.__name__}')."
        )
    return f"{cls.__module__}.{cls.__qualname__}"


def _codecs(
    cls: type,
    layout: Layout,
    given: Mapping[str, tuple[Callable[[Any], object], Callable[[Any], object]]],
) -> dict[str, _Codec]:
    """`static_codecs`, checked: static fields only, each a pair of functions."""
    codecs: dict[str, _Codec] = {}
    for field, pair in given.items():
        if field not in layout.statics:
            raise ValueError(
                f"register_export({cls.__qualname__}): static_codecs names {field!r}, which is "
                f"not a static field of {cls.__qualname__} (its static fields: "
                f"{', '.join(layout.statics) or 'none'}). Only static values are stored in the "
                "tree structure; children are the function's array arguments."
            )
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(map(callable, pair))):  # pyright: ignore[reportUnnecessaryIsInstance]  # Checked for callers without a checker.
            raise TypeError(
                f"register_export({cls.__qualname__}): the codec of {field!r} must be a pair of "
                f"functions (encode, decode), got {pair!r}."
            )
        codecs[field] = _Codec(*pair)
    return codecs


def _same_definition(a: type, b: type) -> bool:
    """Whether `b` is `a` defined again (a notebook cell run again), or `a` itself."""
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def _replace(
    cls: type,
    name: str,
    serialize: Callable[[object], bytes],
    deserialize: Callable[[bytes], object],
    from_children: Callable[..., object],
) -> None:
    """Give `name` to `cls` in JAX's registries, which have no public way to replace an entry
    (docs/design/audit.md, private APIs)."""
    from jax._src.export import _export as registries

    registries.serialization_registry[cls] = (name, serialize)
    registries.deserialization_registry[name] = (cls, deserialize, from_children)


def _conflict(cls: type, name: str, previous: type | None) -> ValueError:
    """The error for a registration JAX refused, saying which of the class or name is taken."""
    own = next((n for n, c in _NAMES.items() if c is cls), None)
    if own is not None:
        why = (
            f"{cls.__qualname__} is already registered for export as {own!r}, and JAX keeps one "
            f"name per class. Register it under one name only (files store it)."
        )
    elif previous is not None:
        why = (
            f"the name {name!r} is already registered for export by "
            f"{previous.__module__}.{previous.__qualname__}. Pass another name: "
            f"jdc.register_export({cls.__name__}, name='...')."
        )
    elif any(_same_definition(c, cls) for c in _NAMES.values()):
        taken = next(n for n, c in _NAMES.items() if _same_definition(c, cls))
        why = (
            f"a newer definition of {cls.__qualname__} (a cell run again, a module reloaded) "
            f"took its export name {taken!r}, and JAX keeps that name for this class too. "
            "Register the newer definition, the one files now load as that name."
        )
    else:
        why = (
            f"{cls.__qualname__} or the name {name!r} is already registered with "
            "jax.export.register_pytree_node_serialization. Remove that call: register_export "
            "registers the class itself, or pass another name."
        )
    return ValueError(f"register_export({cls.__qualname__}): {why}")


# -- static values as tagged JSON ------------------------------------------------------------
# A JSON array is a tuple; a JSON object is one of the tagged values below; anything else is
# the JSON value itself (None, bool, int, float, str: the json module keeps their types).


def _store(cls: type, aux: object, codecs: Mapping[str, _Codec]) -> bytes:
    """The bytes JAX stores for one node of `cls`: the field names (checked when loaded, so a
    class that changed since is an error, not fields filled in the wrong order) and the static
    values, each checked to come back as itself."""
    layout = _layout(cls)
    statics: dict[str, object] = {}
    for field, value in zip(layout.statics, layout.static_values(aux), strict=True):
        codec = codecs.get(field)
        stored = _encode_field(cls, field, value, codec)
        back = _decode(json.loads(json.dumps(stored)), cls, field)  # New objects, as loaded.
        back = codec.decode(back) if codec else back
        if not _comes_back_as(value, back):
            if type(back) is type(value) and repr(back) == repr(value):
                raise ValueError(
                    f"{cls.__qualname__}.{field}: its static value {_short(value)} is not equal "
                    "to a copy of itself that prints the same, and a loaded function compares "
                    "the static values it is called with to the stored ones with `==`, so every "
                    "call would fail. NaN is the usual cause (NaN != NaN): keep it out of static "
                    "values (None for 'not set', or make the field a child, an array, if its "
                    "value is data); a class that compares by identity needs an `__eq__`."
                )
            raise TypeError(
                f"{cls.__qualname__}.{field}: its static value {value!r} "
                f"({type(value).__name__}) would come back from a serialized export as "
                f"{back!r} ({type(back).__name__}). "
                + (
                    "Make the codec's decode(encode(value)) equal the value."
                    if codec
                    else "Give the field a codec: jdc.register_export("
                    f"{cls.__name__}, static_codecs={{{field!r}: (encode, decode)}})."
                )
            )
        statics[field] = stored
    document = {"format": FORMAT, "children": list(layout.children), "statics": statics}
    return json.dumps(document, separators=(",", ":")).encode()


def _encode_field(cls: type, field: str, value: object, codec: _Codec | None) -> object:
    """`value` of `cls.field` as JSON, or a `TypeError` naming the field, the part that cannot
    be stored, and the fix."""
    encoded = codec.encode(value) if codec else value
    try:
        return _encode(encoded)
    except _Unsupported as error:
        part = error.args[0]
        where = "" if part is encoded else f", which holds {_short(part)}"
        raise TypeError(
            f"{cls.__qualname__}.{field}: "
            + ("its codec's encode returned " if codec else "its static value is ")
            + f"{_short(encoded)}{where} ({type(part).__module__}.{type(part).__qualname__}), "
            f"which a serialized export cannot store. Stored as they are: {SUPPORTED}. "
            + (
                "Make encode return one of those."
                if codec
                else "Give the field a codec that turns its value into one of those and back: "
                f"jdc.register_export({cls.__name__}, static_codecs={{{field!r}: (encode, "
                "decode)})."
            )
        ) from None


def _load(cls: type, name: str, data: bytes, codecs: Mapping[str, _Codec]) -> object:
    """The aux data of one node of `cls`, from `_store`'s bytes."""
    document = json.loads(data)
    if document.get("format", FORMAT + 1) > FORMAT:
        raise ValueError(
            f"{cls.__qualname__} (exported as {name!r}) was serialized by a newer "
            "jax_dataclasses. Upgrade jax_dataclasses to deserialize it."
        )
    layout = _layout(cls)
    stored: dict[str, object] = document["statics"]
    if (document["children"], list(stored)) != (list(layout.children), list(layout.statics)):
        raise ValueError(
            f"{cls.__qualname__} (exported as {name!r}) has changed since the function was "
            f"exported: it was exported with children {tuple(document['children'])} and static "
            f"fields {tuple(stored)}, and now has children {layout.children} and static fields "
            f"{layout.statics}. Deserialize with the definition that was exported, or export "
            "the function again."
        )
    values: list[object] = []
    for field, value in stored.items():
        decoded = _decode(value, cls, field)
        codec = codecs.get(field)
        values.append(codec.decode(decoded) if codec else decoded)
    return None if not values else values[0] if len(values) == 1 else tuple(values)


def _layout(cls: type) -> Layout:
    """The current layout of a class `register_export` accepted (read at each use: a class
    whose annotations named something not yet defined may have settled since)."""
    return cast(Layout, layout_of(cls))  # register_export checked it; it stays registered.


def _encode(value: Any) -> object:
    """One static value as tagged JSON (`_decode` reverses it); `_Unsupported` for a part that
    has no form here."""
    checked: object = value  # Narrowed by the checks below; `value` stays Any for the reads.
    if value is None or type(checked) in (bool, int, float, str):
        return value
    if type(checked) is tuple:
        return [_encode(item) for item in value]
    if isinstance(checked, enum.Enum):
        owner: type[enum.Enum] = type(checked)
        named = owner.__members__.get(checked.name or "") is checked  # Not a Flag combination.
        if named and _find(owner.__module__, owner.__qualname__) is owner:
            return {"enum": f"{owner.__module__}:{owner.__qualname__}", "name": value.name}
    elif isinstance(checked, np.dtype) and _named_exactly(value):
        return {"dtype": str(value)}
    elif isinstance(checked, type(jnp.float32)):  # jnp.float32: a class of JAX's, not NumPy's.
        return {"jax_numpy_type": value.__name__}
    elif isinstance(checked, type) and issubclass(checked, np.generic):
        return {"numpy_type": value.__name__ if value in _ABSTRACT_TYPES else np.dtype(value).name}
    elif isinstance(checked, np.generic) and value.dtype.kind in "biuf":
        item = value.item()  # A longdouble stays a longdouble: JSON has no form for it.
        if type(item) in (bool, int, float):
            return {"numpy_scalar": value.dtype.name, "value": item}
    raise _Unsupported(value)


def _named_exactly(dtype: np.dtype[Any]) -> bool:
    """Whether `str(dtype)`, as `_decode` reads it, gives `dtype` back: not for a structured or
    subarray dtype (NumPy cannot read their names)."""
    try:
        return bool(np.dtype(str(dtype)) == dtype)
    except (TypeError, ValueError):
        return False


class _Unsupported(Exception):
    """A part of a static value that `_encode` cannot store (`_store` says where it is)."""


def _decode(stored: Any, cls: type, field: str) -> object:
    """The static value `_encode` stored (`cls` and `field` name it in errors)."""
    if isinstance(stored, list):
        return tuple(_decode(item, cls, field) for item in stored)  # pyright: ignore[reportUnknownVariableType]  # JSON.
    if not isinstance(stored, dict):
        return stored
    tagged = cast(dict[str, Any], stored)
    if "dtype" in tagged:
        return np.dtype(tagged["dtype"])
    if "numpy_type" in tagged:
        name = tagged["numpy_type"]
        abstract = [t for t in _ABSTRACT_TYPES if t.__name__ == name]
        return abstract[0] if abstract else np.dtype(name).type
    if "numpy_scalar" in tagged:
        return np.dtype(tagged["numpy_scalar"]).type(tagged["value"])
    if "jax_numpy_type" in tagged:
        return getattr(jnp, tagged["jax_numpy_type"])
    module, _, qualname = tagged["enum"].partition(":")
    owner = _find(module, qualname)
    if owner is None:
        raise ValueError(
            f"{cls.__qualname__}.{field}: the exported static value is a member of the enum "
            f"{module}.{qualname}, which is not defined in this process (its module is not "
            f"imported, or no longer defines it). Import {module} before deserializing."
        )
    if not isinstance(owner, enum.EnumMeta) or tagged["name"] not in owner.__members__:
        raise ValueError(
            f"{cls.__qualname__}.{field}: the exported static value is the member "
            f"{tagged['name']!r} of {module}.{qualname}, which this process's "
            f"{module}.{qualname} does not have (the class changed since the export)."
        )
    return owner[tagged["name"]]


def _find(module: str, qualname: str) -> Any:
    """The object `module.qualname` in an imported module (deserializing never imports), else
    None."""
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def _comes_back_as(a: object, b: object) -> bool:
    """Whether `b` is `a` come back: the same type and equal, item by item, as a loaded function
    compares them (so NaN is not NaN)."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        items, others = cast(tuple[object, ...], a), cast(tuple[object, ...], b)
        return len(items) == len(others) and all(map(_comes_back_as, items, others))
    return bool(a == b)


def _short(value: object) -> str:
    """A repr short enough for a message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
