"""Dataclasses that are JAX pytrees: `@pytree_dataclass`, `Static[T]`, and friends."""

from dataclasses import asdict, astuple, field, fields, is_dataclass, replace
from typing import TYPE_CHECKING

from jax_dataclasses._annotations import Static, StaticAnnotationError
from jax_dataclasses._serialization import install_flax_hooks as _install_flax_hooks
from jax_dataclasses._static_values import StaticFieldWarning

if TYPE_CHECKING:
    from dataclasses import dataclass as pytree_dataclass
else:
    from jax_dataclasses._dataclass import pytree_dataclass

_install_flax_hooks()

__all__ = [
    "Static",
    "StaticAnnotationError",
    "StaticFieldWarning",
    "asdict",
    "astuple",
    "field",
    "fields",
    "is_dataclass",
    "pytree_dataclass",
    "replace",
]
