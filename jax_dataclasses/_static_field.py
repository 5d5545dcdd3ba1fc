"""`static_field()`: the jax_dataclasses 1.x way to mark a field static, kept for existing code."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any


def static_field(**kwargs: Any) -> Any:
    """Deprecated: `dataclasses.field(**kwargs)` with field metadata `static=True`.

    Takes exactly the arguments of `dataclasses.field`. Type checkers see it as
    `dataclasses.field` (see `jax_dataclasses/__init__.py`). Prefer annotating the field
    `jdc.Static[T]`.
    """
    warnings.warn(
        "jdc.static_field() is deprecated: annotate the field as jdc.Static[T] instead "
        "(for example `n: jdc.Static[int] = 3`).",
        DeprecationWarning,
        stacklevel=2,
    )
    metadata: dict[str, Any] = {**(kwargs.pop("metadata", None) or {}), "static": True}
    return dataclasses.field(metadata=metadata, **kwargs)
