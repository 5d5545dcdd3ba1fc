"""`static_field()`: the jax_dataclasses 1.x way to mark a field static, kept for existing code."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any


def static_field(**kwargs: Any) -> Any:
    """Deprecated: `dataclasses.field(**kwargs)` with field metadata `static=True`.

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
    metadata: dict[str, Any] = {**(kwargs.pop("metadata", None) or {}), "static": True}
    return dataclasses.field(metadata=metadata, **kwargs)
