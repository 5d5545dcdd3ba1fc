"""Dataclasses that are JAX pytrees: `@pytree_dataclass`, `Static[T]`, and friends."""

__version__ = "2.0.0"  # The one place: pyproject.toml reads it.

from dataclasses import asdict, astuple, field, fields, is_dataclass, replace
from typing import TYPE_CHECKING

# 1.6's __init__ bound these private modules as attributes, and code built on them uses them so
# (`_dataclasses` is imported when first used: defining its dataclass costs 0.5 ms at import).
# The sharding functions, export and the training masks are imported when first used too (0.9,
# 0.3 and 0.4 ms at import).
from jax_dataclasses import _copy_and_mutate as _copy_and_mutate
from jax_dataclasses._construct import DerivedFieldWarning
from jax_dataclasses._copy_and_mutate import copy_and_mutate
from jax_dataclasses._enforced_annotations import AnnotationMismatchError, EnforcedAnnotationsMixin
from jax_dataclasses._evolution import from_saved_layout, saved_layout
from jax_dataclasses._forms import (
    Evolution,
    Frozen,
    ShardingDeclarationError,
    Static,
    StaticAnnotationError,
)
from jax_dataclasses._jit import jit
from jax_dataclasses._printing import pformat, pprint
from jax_dataclasses._serialization import from_v1_6_layout, v1_6_layout
from jax_dataclasses._serialization import install_flax_hooks as _install_flax_hooks
from jax_dataclasses._static_values import StaticFieldWarning
from jax_dataclasses._validate import MutationValidationError

if TYPE_CHECKING:
    from dataclasses import dataclass as pytree_dataclass
    from dataclasses import field as static_field
    from typing import Annotated as Sharded

    from jax_dataclasses import _dataclasses as _dataclasses
    from jax_dataclasses._export import register_export
    from jax_dataclasses._sharding import (
        check_shardings,
        partition_specs,
        sharded_shapes,
        shardings,
    )
    from jax_dataclasses._training import stop_frozen_gradients, trainable
else:
    from jax_dataclasses._builder import pytree_dataclass
    from jax_dataclasses._forms import Sharded, static_field

_install_flax_hooks()


if not TYPE_CHECKING:  # Checkers see the import above, and still report unknown names.
    _SHARDING = frozenset(
        [
            "check_shardings",
            "partition_specs",
            "sharded_shapes",
            "shardings",
        ]
    )
    _TRAINING = frozenset(["stop_frozen_gradients", "trainable"])

    def __getattr__(name: str) -> object:
        """The names bound on first use (see above): 1.6's private `_dataclasses` module,
        sharding declarations, `register_export` and the training masks."""
        if name == "_dataclasses":
            import jax_dataclasses._dataclasses as module

            return module
        if name in _SHARDING:
            import jax_dataclasses._sharding as sharding

            return getattr(sharding, name)
        if name in _TRAINING:
            import jax_dataclasses._training as training

            return getattr(training, name)
        if name == "register_export":
            from jax_dataclasses._export import register_export

            return register_export
        raise AttributeError(f"module 'jax_dataclasses' has no attribute {name!r}")

    def __dir__() -> list[str]:
        """The module's names, those bound on first use among them (for tab completion)."""
        return sorted({*globals(), *_SHARDING, *_TRAINING, "register_export", "_dataclasses"})


__all__ = [
    "AnnotationMismatchError",
    "DerivedFieldWarning",
    "EnforcedAnnotationsMixin",
    "Evolution",
    "Frozen",
    "MutationValidationError",
    "Sharded",
    "ShardingDeclarationError",
    "Static",
    "StaticAnnotationError",
    "StaticFieldWarning",
    "asdict",
    "astuple",
    "check_shardings",
    "copy_and_mutate",
    "field",
    "fields",
    "from_saved_layout",
    "from_v1_6_layout",
    "is_dataclass",
    "jit",
    "partition_specs",
    "pformat",
    "pprint",
    "pytree_dataclass",
    "register_export",
    "replace",
    "saved_layout",
    "sharded_shapes",
    "shardings",
    "static_field",
    "stop_frozen_gradients",
    "trainable",
    "v1_6_layout",
]
