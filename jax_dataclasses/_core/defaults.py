"""Array defaults, which `dataclasses` would refuse: hidden while it runs, then put back.

JAX arrays are immutable, so one default can be shared by every instance; the standard library
only refuses them because they are unhashable (its mutable-default check). The builder hides
each array default behind a stand-in while `dataclasses` runs, then puts the arrays back in the
fields it made and in the user's own `Field`s. A NumPy array default is mutable: it is hidden
too, then refused with a message that names the class and the field, once `dataclasses` has
told fields apart from `ClassVar`s and `InitVar`s.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np
from jax import Array

from jax_dataclasses._field_declarations.scope import class_annotations


class _HiddenDefault:
    """Stands in for an array default while `dataclasses` checks for mutable defaults."""

    def __init__(self, array: object) -> None:
        self.array = array


Hidden = dict[str, tuple[object, "dataclasses.Field[object] | None"]]
"""Each array default hidden from `dataclasses`: the array, and the user's `Field` holding it."""


def hide_array_defaults(cls: type) -> tuple[Hidden, dict[str, object]]:
    """Hide each array default of `cls` from `dataclasses`: in the user's `Field`s here, and
    in the class attributes returned (stand-ins, by name) for the caller to install."""
    hidden: Hidden = {}
    stand_ins: dict[str, object] = {}
    for name in class_annotations(cls):
        value: object = getattr(cls, name, None)  # Inherited too, as `dataclasses` reads them.
        field = _as_field(value)
        default: object = value if field is None else field.default
        if isinstance(default, Array | np.ndarray):
            stand_in = _HiddenDefault(cast(object, default))
            hidden[name] = (stand_in.array, field)
            if field is not None:
                field.default = stand_in
            else:
                stand_ins[name] = stand_in
    return hidden, stand_ins


def _as_field(value: object) -> dataclasses.Field[object] | None:
    return (
        cast("dataclasses.Field[object]", value) if isinstance(value, dataclasses.Field) else None
    )


def refuse_numpy_defaults(cls: type, hidden: Hidden) -> None:
    for f in dataclasses.fields(cls):
        if isinstance(hidden.get(f.name, (None,))[0], np.ndarray):
            raise ValueError(
                f"field {f.name!r} of {cls.__qualname__} has a NumPy array as its default, "
                "which is mutable and would be shared by every instance. Use a JAX array "
                f"(jnp.asarray(...)) or field(default_factory=lambda: np.array(...))."
            )


def restore_array_defaults(cls: type, hidden: Hidden) -> dict[str, object]:
    """Put the arrays back in the fields `dataclasses` made of `cls` (if it did) and the
    user's `Field`s; the class attributes to put back (by name) are returned, to install."""
    made: dict[str, dataclasses.Field[object]] = cls.__dict__.get("__dataclass_fields__", {})
    attributes: dict[str, object] = {}
    for name, (array, field) in hidden.items():
        for holder in (field, made.get(name)):
            if holder is not None:
                holder.default = array
        if isinstance(cls.__dict__.get(name), _HiddenDefault):
            attributes[name] = array
    return attributes
