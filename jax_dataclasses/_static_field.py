"""`static_field()`: the jax_dataclasses 1.x way to mark a field static, kept for existing code."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from jax_dataclasses._annotations import LEGACY_STATIC_MARKER


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
    # depend on: a field 1.6 saw as static was not saved (`_checkpoints_1_6.saved_by_1_6`).
    metadata: dict[str, Any] = {
        **(kwargs.pop("metadata", None) or {}),
        "static": True,
        LEGACY_STATIC_MARKER: True,
    }
    return dataclasses.field(metadata=metadata, **kwargs)
