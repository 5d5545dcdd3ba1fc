"""Dataclasses that are JAX pytrees: `@pytree_dataclass`, `Static[T]`, and friends."""

__version__ = "2.0.0"  # The one place: pyproject.toml reads it.

import importlib
from dataclasses import asdict, astuple, field, fields, is_dataclass, replace
from typing import TYPE_CHECKING

# 1.6's __init__ bound these private modules as attributes, and code built on them uses them so
# (`_dataclasses` is imported when first used: defining its dataclass costs 0.5 ms at import).
# The sharding functions, export, the recompilation reports and the training masks are imported
# when first used too (0.9, 0.3, 5.6 and 0.4 ms at import).
from jax_dataclasses import _copy_and_mutate as _copy_and_mutate
from jax_dataclasses._checkpoints.evolution import from_saved_layout, saved_layout
from jax_dataclasses._checkpoints.serialization import from_v1_6_layout, v1_6_layout
from jax_dataclasses._checkpoints.serialization import install_flax_hooks as _install_flax_hooks
from jax_dataclasses._compat.enforced_annotations import (
    AnnotationMismatchError,
    EnforcedAnnotationsMixin,
)
from jax_dataclasses._compat.moved import install as _install_moved_modules
from jax_dataclasses._copy_and_mutate import copy_and_mutate
from jax_dataclasses._core.construct import DerivedFieldWarning
from jax_dataclasses._core.printing import pformat, pprint
from jax_dataclasses._core.static_values import StaticFieldWarning
from jax_dataclasses._field_declarations.forms import (
    Evolution,
    Frozen,
    ShardingDeclarationError,
    Static,
    StaticAnnotationError,
)
from jax_dataclasses._jit import jit
from jax_dataclasses._validate import MutationValidationError

if TYPE_CHECKING:
    from dataclasses import dataclass as pytree_dataclass
    from dataclasses import field as static_field
    from typing import Annotated as Sharded

    from jax_dataclasses import _dataclasses as _dataclasses
    from jax_dataclasses._checkpoints.export import register_export
    from jax_dataclasses._diagnostics.explain import JitChange, JitDiff, jit_diff
    from jax_dataclasses._diagnostics.recompiles import RecompileWarning, explain_recompiles
    from jax_dataclasses._sharding_layouts.checks import (
        check_shardings,
        constrain_shardings,
        with_logical_constraint,
    )
    from jax_dataclasses._sharding_layouts.trees import (
        partition_specs,
        sharded_shapes,
        sharding_rules,
        shardings,
    )
    from jax_dataclasses._training import stop_frozen_gradients, trainable, trainable_only
else:
    from jax_dataclasses._core.builder import pytree_dataclass
    from jax_dataclasses._field_declarations.forms import Sharded, static_field

_install_flax_hooks()
_install_moved_modules()


if not TYPE_CHECKING:  # Checkers see the import above, and still report unknown names.
    _ON_FIRST_USE = {  # Each name, and the module that defines it.
        "partition_specs": "_sharding_layouts.trees",
        "shardings": "_sharding_layouts.trees",
        "sharded_shapes": "_sharding_layouts.trees",
        "sharding_rules": "_sharding_layouts.trees",
        "check_shardings": "_sharding_layouts.checks",
        "constrain_shardings": "_sharding_layouts.checks",
        "with_logical_constraint": "_sharding_layouts.checks",
        "register_export": "_checkpoints.export",
        "JitChange": "_diagnostics.explain",
        "JitDiff": "_diagnostics.explain",
        "jit_diff": "_diagnostics.explain",
        "RecompileWarning": "_diagnostics.recompiles",
        "explain_recompiles": "_diagnostics.recompiles",
        "trainable": "_training",
        "stop_frozen_gradients": "_training",
        "trainable_only": "_training",
        "_dataclasses": "",
    }

    def __getattr__(name: str) -> object:
        """The names bound on first use (`_ON_FIRST_USE`): 1.6's private `_dataclasses` module,
        the sharding functions, `register_export`, why jit compiles again, and the training
        masks, each imported from its module as it is first asked for."""
        module = _ON_FIRST_USE.get(name)
        if module is None:
            raise AttributeError(f"module 'jax_dataclasses' has no attribute {name!r}")
        found = importlib.import_module(f"jax_dataclasses.{module or name}")
        return found if module == "" else getattr(found, name)

    def __dir__() -> list[str]:
        """The module's names, those bound on first use among them (for tab completion)."""
        return sorted({*globals(), *_ON_FIRST_USE})


__all__ = [
    "AnnotationMismatchError",
    "DerivedFieldWarning",
    "EnforcedAnnotationsMixin",
    "Evolution",
    "Frozen",
    "JitChange",
    "JitDiff",
    "MutationValidationError",
    "RecompileWarning",
    "Sharded",
    "ShardingDeclarationError",
    "Static",
    "StaticAnnotationError",
    "StaticFieldWarning",
    "asdict",
    "astuple",
    "check_shardings",
    "constrain_shardings",
    "copy_and_mutate",
    "explain_recompiles",
    "field",
    "fields",
    "from_saved_layout",
    "from_v1_6_layout",
    "is_dataclass",
    "jit",
    "jit_diff",
    "partition_specs",
    "pformat",
    "pprint",
    "pytree_dataclass",
    "register_export",
    "replace",
    "saved_layout",
    "sharded_shapes",
    "sharding_rules",
    "shardings",
    "static_field",
    "stop_frozen_gradients",
    "trainable",
    "trainable_only",
    "v1_6_layout",
    "with_logical_constraint",
]
