"""`EnforcedAnnotationsMixin`: shape and dtype checks from `Annotated[...]` field annotations.

Kept for existing users of jax_dataclasses 1.x; new code should use jaxtyping. The checks run
in `__post_init__`, that is when a user constructs an instance, never when JAX rebuilds one by
unflattening (inside `vmap`, `jacfwd`, `jit`), where leaves may be batched or abstract. So
`get_batch_axes()` recomputes the batch axes from the fields instead of storing them.
"""

from __future__ import annotations

import dataclasses
import typing
import warnings
from typing import Any, NamedTuple

import numpy as np

from jax_dataclasses._registry import layout_of

Shape = tuple[int, ...]


class AnnotationMismatchError(AssertionError):
    """A field's value does not match the shape or dtype in its `Annotated[...]` annotation.

    An `AssertionError`, as the checks of jax_dataclasses 1.x were.
    """


class _FieldSpec(NamedTuple):  # A NamedTuple: much cheaper to define at import than a dataclass.
    """The shape and dtype one field's annotation asks for."""

    name: str
    prefix: Shape | None
    """Axes before the `...` (all of them if there is no `...`); None: shape not checked."""
    suffix: Shape
    """Axes after the `...`."""
    dtype: object | None
    """A dtype or an abstract scalar type (`np.floating`) for `issubdtype`; None: not checked."""
    shape_text: str


class _ClassSpec(NamedTuple):
    annotated: tuple[_FieldSpec, ...]
    children: tuple[str, ...]
    """Fields that may hold a nested mixin instance."""


_PYTHON_SCALARS = frozenset({bool, int, float, complex})
_SPECS: dict[type, _ClassSpec] = {}
_SUBDTYPE: dict[tuple[np.dtype[Any], object], bool] = {}


def _is_dtype(item: object) -> bool:
    """A dtype, or a NumPy scalar type: concrete (np.float32) or abstract (np.floating)."""
    return isinstance(item, np.dtype) or (isinstance(item, type) and issubclass(item, np.generic))


def _parse_dtype(item: object) -> object | None:
    """`item` as something `np.issubdtype` accepts, or None if it is not a dtype."""
    if _is_dtype(item):
        return item
    dtype: object = getattr(item, "dtype", None)  # JAX scalar types such as jnp.float32.
    return dtype if _is_dtype(dtype) else None


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


def _field_spec(cls: type, name: str, hint: object) -> _FieldSpec | None:
    if typing.get_origin(hint) is not typing.Annotated:
        return None
    shapes: list[tuple[object, ...]] = []
    dtypes: list[object] = []
    for item in typing.cast(tuple[object, ...], getattr(hint, "__metadata__")):  # noqa: B009
        if isinstance(item, tuple | list):
            shapes.append(tuple(typing.cast(tuple[object, ...] | list[object], item)))
            continue
        dtype = _parse_dtype(item)
        if dtype is None:
            raise TypeError(
                f"field {name!r} of {cls.__qualname__}: EnforcedAnnotationsMixin reads a shape "
                f"tuple and a dtype from Annotated[...], got {item!r}, which is neither."
            )
        dtypes.append(dtype)
    if len(shapes) > 1 or len(dtypes) > 1:
        raise TypeError(
            f"field {name!r} of {cls.__qualname__}: Annotated[...] may hold at most one shape "
            "and one dtype for EnforcedAnnotationsMixin."
        )
    prefix, suffix = _parse_shape(cls, name, shapes[0]) if shapes else (None, ())
    text = repr(shapes[0]).replace("Ellipsis", "...") if shapes else ""
    return _FieldSpec(name, prefix, suffix, dtypes[0] if dtypes else None, text)


def _class_spec(cls: type) -> _ClassSpec:
    """Parse the annotations of `cls` once; later calls read the cache."""
    spec = _SPECS.get(cls)
    if spec is not None:
        return spec
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError as error:
        raise TypeError(
            f"cannot resolve the annotations of {cls.__qualname__} ({error}). "
            "EnforcedAnnotationsMixin reads shapes and dtypes from them: define the names they "
            "use at module level."
        ) from error
    layout = layout_of(cls)
    statics = () if layout is None else layout.statics
    children = tuple(f.name for f in dataclasses.fields(cls) if f.name not in statics)
    annotated = (_field_spec(cls, name, hints.get(name)) for name in children)
    spec = _ClassSpec(tuple(s for s in annotated if s is not None), children)
    _SPECS[cls] = spec  # Two threads may both parse; either result is the same.
    return spec


def _is_subdtype(dtype: np.dtype[Any], expected: object) -> bool:
    key = (dtype, expected)
    verdict = _SUBDTYPE.get(key)
    if verdict is None:
        verdict = _SUBDTYPE[key] = bool(np.issubdtype(dtype, typing.cast(Any, expected)))
    return verdict


def _check_field(obj: object, spec: _FieldSpec) -> Shape | None:
    """Check one annotated field; return its batch axes (None when the shape is not checked)."""
    value = getattr(obj, spec.name)
    where = f"field {spec.name!r} of {type(obj).__qualname__}"
    if type(value) in _PYTHON_SCALARS:  # Not isinstance: np.float64 subclasses float.
        shape: Shape = ()  # JAX gives Python scalars a weak dtype, so only the shape counts.
    else:
        value_shape = getattr(value, "shape", None)
        if value_shape is None:
            return None  # Not an array (None, a nested tree): nothing to check.
        shape = tuple(value_shape)
        dtype = getattr(value, "dtype", None)
        if (
            spec.dtype is not None
            and dtype is not None
            and not _is_subdtype(np.dtype(dtype), spec.dtype)
        ):
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
    lead); `dtype` is a dtype or an abstract one such as `jnp.floating`. Both are optional, in
    either order. A class that defines its own `__post_init__` must call
    `super().__post_init__()`. Use jaxtyping for new code.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__dataclass_fields__" not in cls.__dict__:  # Not `dataclass(slots=True)`'s copy.
            warnings.warn(
                f"{cls.__qualname__}: jdc.EnforcedAnnotationsMixin is deprecated. Use jaxtyping "
                "annotations (with a runtime checker such as beartype) to check shapes and "
                "dtypes.",
                DeprecationWarning,
                stacklevel=2,
            )

    def __post_init__(self) -> None:
        check_annotations(self)

    def get_batch_axes(self) -> Shape:
        """The batch axes shared by the annotated fields, recomputed from the current values."""
        batch = check_annotations(self)
        if batch is None:
            raise AnnotationMismatchError(
                f"{type(self).__qualname__} has no batch axes: none of its fields annotated with "
                "a shape holds an array. Annotate a field as Annotated[Array, shape]."
            )
        return batch
