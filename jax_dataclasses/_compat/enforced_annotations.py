"""`EnforcedAnnotationsMixin`: shape and dtype checks from `Annotated[...]` field annotations.

Kept for existing users of jax_dataclasses 1.x; new code should use jaxtyping. The checks run
in `__post_init__`, that is when a user constructs an instance, never when JAX rebuilds one by
unflattening (inside `vmap`, `jacfwd`, `jit`), where leaves may be batched or abstract. So
`get_batch_axes()` recomputes the batch axes from the fields instead of storing them.

The shape and dtype come from each child field's declaration (`_field_declarations.reader`: the metadata of
its `Annotated[...]` annotation, read once with the class's other declarations; a name defined
after the class is read at its first use), turned into checks at the first construction of
each class. Like 1.x, a field whose type cannot be resolved (a name imported under
`TYPE_CHECKING`) is still checked by its metadata, and a field without metadata is not.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from jax_dataclasses._core.record import layout_of
from jax_dataclasses._core.static_values import warn_at_user
from jax_dataclasses._field_declarations.reader import (
    Declaration,
    Unreadable,
    declare,
)
from jax_dataclasses._field_declarations.scope import declaring_class, module_scope
from jax_dataclasses._validate import PYTHON_SCALARS

Shape = tuple[int, ...]


class AnnotationMismatchError(AssertionError):
    """A field's value does not match the shape or dtype in its `Annotated[...]` annotation.

    Raised at construction by classes using the deprecated `EnforcedAnnotationsMixin`. An
    `AssertionError`, as the checks of jax_dataclasses 1.x were; the message names the field
    and what it should have (the example of `EnforcedAnnotationsMixin` shows one).

    Examples:
        >>> issubclass(jdc.AnnotationMismatchError, AssertionError)  # What 1.x code catches.
        True
    """


class _FieldSpec(NamedTuple):  # A NamedTuple: much cheaper to define at import than a dataclass.
    """The shape and dtype one field's annotation asks for."""

    name: str
    prefix: Shape | None
    """Axes before the `...` (all of them if there is no `...`); None: shape not checked."""
    suffix: Shape
    """Axes after the `...`."""
    dtype: object | None
    """A dtype or a scalar type (`np.floating`, `jax.dtypes.prng_key`); None: not checked."""
    shape_text: str


class _ClassSpec(NamedTuple):
    annotated: tuple[_FieldSpec, ...]
    children: tuple[str, ...]
    """Fields that may hold a nested mixin instance."""


_SPECS: dict[type, _ClassSpec] = {}
_SUBDTYPE: dict[tuple[object, object], bool] = {}


def _parse_dtype(item: object) -> object | None:
    """`item` as a dtype for `jnp.issubdtype`, or None if it is not one (then 1.x ignored
    it, so docstrings and other metadata may sit next to the shape and dtype)."""
    if isinstance(item, type) and issubclass(item, np.generic):
        # Scalar types, abstract ones too: np.float32, jnp.floating, jax.dtypes.prng_key.
        return typing.cast(object, item)
    if item is None:
        return None  # np.dtype(None) is float64, which `None` in an annotation never means.
    try:
        dtype = np.dtype(typing.cast(Any, item))  # "float32", bool, jnp.float32, np.dtype(...).
    except (TypeError, ValueError, SyntaxError):  # What NumPy raises for text it cannot parse.
        return None
    return None if dtype.kind == "O" else dtype  # NumPy maps any other class to object dtype.


def _is_size(axis: object) -> bool:
    return isinstance(axis, int) and not isinstance(axis, bool) and axis >= 0


def _parse_shape(cls: type, name: str, shape: tuple[object, ...]) -> tuple[Shape, Shape]:
    if not all(axis is Ellipsis or _is_size(axis) for axis in shape):
        raise TypeError(
            f"field {name!r} of {cls.__qualname__}: the shape {shape!r} in its annotation may "
            "only contain sizes (ints >= 0) and one `...`."
        )
    ellipses = [i for i, axis in enumerate(shape) if axis is Ellipsis]
    if len(ellipses) > 1:
        raise TypeError(
            f"field {name!r} of {cls.__qualname__}: the shape {shape!r} in its annotation has "
            "more than one `...`; write one `...` where the batch axes go."
        )
    split = ellipses[0] if ellipses else 0
    prefix = typing.cast(Shape, shape[:split])
    suffix = typing.cast(Shape, shape[split + 1 :] if ellipses else shape)
    return prefix, suffix


def _field_spec(cls: type, name: str, metadata: tuple[object, ...]) -> _FieldSpec | None:
    shapes: list[tuple[object, ...]] = []
    dtypes: list[object] = []
    for item in metadata:
        if isinstance(item, Unreadable):
            raise TypeError(
                f"field {name!r} of {cls.__qualname__}: cannot resolve {item.source} in its "
                f"annotation ({item.error}). EnforcedAnnotationsMixin reads the shape and dtype "
                "from it: define the names it uses before the first instance is constructed."
            )
        if isinstance(item, tuple):
            shapes.append(typing.cast(tuple[object, ...], item))
            continue
        dtype = _parse_dtype(item)
        if dtype is not None:
            dtypes.append(dtype)
    if len(shapes) > 1 or len(dtypes) > 1:
        raise TypeError(
            f"field {name!r} of {cls.__qualname__}: Annotated[...] may hold at most one shape "
            "and one dtype for EnforcedAnnotationsMixin."
        )
    if not shapes and not dtypes:
        return None
    prefix, suffix = _parse_shape(cls, name, shapes[0]) if shapes else (None, ())
    text = repr(shapes[0]).replace("Ellipsis", "...") if shapes else ""
    return _FieldSpec(name, prefix, suffix, dtypes[0] if dtypes else None, text)


def _declarations(cls: type) -> tuple[Declaration, ...]:
    """The declarations of `cls`'s fields: its record's, or (a plain dataclass using the
    mixin, as 1.x allowed) read now by the one reader, in the class and its module (what
    defined it is no longer running)."""
    layout = layout_of(cls)
    if layout is not None:
        return layout.declarations
    found: list[Declaration] = []
    for f in dataclasses.fields(cls):
        owner = declaring_class(cls, f)
        declared, pending = declare(f.name, owner, f.type, f.metadata, module_scope(owner))
        if pending is not None:
            declared = pending.declaration()
        found.append(declared)
    return tuple(found)


def _class_spec(cls: type) -> _ClassSpec:
    """Parse the annotations of `cls` once; later calls read the cache."""
    spec = _SPECS.get(cls)
    if spec is not None:
        return spec
    children = tuple(d for d in _declarations(cls) if d.static is None)
    annotated = (_field_spec(cls, d.name, d.metadata) for d in children)
    spec = _ClassSpec(tuple(s for s in annotated if s is not None), tuple(d.name for d in children))
    _SPECS[cls] = spec  # Two threads may both parse; either result is the same.
    return spec


def _is_subdtype(dtype: object, expected: object) -> bool:
    """`jnp.issubdtype`, cached: unlike NumPy's, it understands PRNG key and bfloat16 dtypes."""
    key = (dtype, expected)
    verdict = _SUBDTYPE.get(key)
    if verdict is None:
        verdict = _SUBDTYPE[key] = jnp.issubdtype(
            typing.cast(Any, dtype), typing.cast(Any, expected)
        )
    return verdict


def _check_field(obj: object, spec: _FieldSpec) -> Shape | None:
    """Check one annotated field; return its batch axes (None when the shape is not checked)."""
    value = getattr(obj, spec.name)
    where = f"field {spec.name!r} of {type(obj).__qualname__}"
    if type(value) in PYTHON_SCALARS:  # Not isinstance: np.float64 subclasses float.
        shape: Shape = ()  # JAX gives Python scalars a weak dtype, so only the shape counts.
    else:
        value_shape = getattr(value, "shape", None)
        if value_shape is None:
            return None  # Not an array (None, a nested tree): nothing to check.
        shape = tuple(value_shape)
        dtype = getattr(value, "dtype", None)
        if spec.dtype is not None and dtype is not None and not _is_subdtype(dtype, spec.dtype):
            raise AnnotationMismatchError(
                f"{where} should have dtype {_dtype_name(spec.dtype)} but has dtype {dtype}."
            )
    if spec.prefix is None:
        return None
    start, stop = len(spec.prefix), len(shape) - len(spec.suffix)
    if stop < start or shape[:start] != spec.prefix or shape[stop:] != spec.suffix:
        raise AnnotationMismatchError(
            f"{where} should have shape {spec.shape_text} (`...` marks batch axes; without it "
            f"they lead) but has shape {shape}."
        )
    return shape[start:stop]


def _dtype_name(dtype: object) -> str:
    return dtype.__name__ if isinstance(dtype, type) else str(dtype)


def check_annotations(obj: object) -> Shape | None:
    """Validate `obj` (and nested mixin instances) against its annotations; return batch axes."""
    spec = _class_spec(type(obj))
    batch: Shape | None = None
    source = ""
    for field_spec in spec.annotated:
        axes = _check_field(obj, field_spec)
        if axes is None:
            continue
        if batch is None:
            batch, source = axes, field_spec.name
        elif axes != batch:
            raise AnnotationMismatchError(
                f"field {field_spec.name!r} of {type(obj).__qualname__} has batch axes {axes}, "
                f"but field {source!r} has batch axes {batch}: all annotated fields must share "
                "the same batch axes."
            )
    if batch is not None:
        for name in spec.children:
            value = getattr(obj, name)
            if not isinstance(value, EnforcedAnnotationsMixin):
                continue
            nested = check_annotations(value)
            if nested is not None and nested[: len(batch)] != batch:
                raise AnnotationMismatchError(
                    f"field {name!r} of {type(obj).__qualname__} holds a "
                    f"{type(value).__qualname__} with batch axes {nested}, which do not start "
                    f"with the batch axes {batch} of {type(obj).__qualname__}."
                )
    return batch


class EnforcedAnnotationsMixin:
    """Deprecated: check `Annotated[Array, shape, dtype]` fields when an instance is constructed.

    `shape` is a tuple of ints with at most one `...` where the batch axes go (no `...`: they
    lead); `dtype` is anything `np.dtype` accepts (`jnp.float32`, `"float32"`, `bool`) or an
    abstract scalar type such as `jnp.floating`. Both are optional, in either order; other
    metadata is ignored. A class that defines its own `__post_init__` must call
    `super().__post_init__()`. Checks run only on construction by your code, never when JAX
    rebuilds an instance. A violation raises an `AssertionError` subclass naming the class,
    the field and the expected and actual shape or dtype. Defining a subclass emits a
    `DeprecationWarning`: use jaxtyping with a runtime checker (beartype) for new code.

    Examples:
        >>> import warnings
        >>> from typing import Annotated
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", DeprecationWarning)
        ...     @jdc.pytree_dataclass
        ...     class Image(jdc.EnforcedAnnotationsMixin):
        ...         pixels: Annotated[jax.Array, (3, ..., 4), jnp.floating]
        >>> Image(jnp.zeros((3, 8, 4))).get_batch_axes()
        (8,)
        >>> try:
        ...     Image(jnp.zeros((3, 8, 5)))
        ... except jdc.AnnotationMismatchError as error:
        ...     print(error)
        field 'pixels' of Image should have shape (3, ..., 4) (`...` marks batch axes; without it they lead) but has shape (3, 8, 5).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__dataclass_fields__" not in cls.__dict__:  # Not `dataclass(slots=True)`'s copy.
            warn_at_user(
                f"{cls.__qualname__}: jdc.EnforcedAnnotationsMixin is deprecated. Use jaxtyping "
                "annotations (with a runtime checker such as beartype) to check shapes and "
                "dtypes.",
                DeprecationWarning,
            )

    def __post_init__(self) -> None:
        check_annotations(self)

    def get_batch_axes(self) -> tuple[int, ...]:
        """The batch axes shared by the annotated fields, recomputed from the current values."""
        batch = check_annotations(self)
        if batch is None:
            raise AnnotationMismatchError(
                f"{type(self).__qualname__} has no batch axes: none of its fields annotated with "
                "a shape holds an array. Annotate a field as Annotated[Array, shape]."
            )
        return batch
