"""The modules' paths before issue 39 put them in folders, still importable: one table and one
import hook. house_rewrite: skip (this table keeps the old paths on purpose).

Pickles name the module of each object they hold: classes cloudpickled by value call
`jax_dataclasses._builder.reload` and hold `_forms.Axes`, `_frozen.frozen_setattr`, ...; a
pickled `Evolution`, `Declaration` or warning names `_forms`, `_declarations`,
`_static_values`. Users' code imports some of them too (`_sharding_rules`, `_recompiles`, 1.6's
`_enforced_annotations`), or patches them by path. For each, the `sys.meta_path` finder below
gives the module at its new path, the same object, put into `sys.modules` under the old name as
well: `jax_dataclasses._record.Layout is jax_dataclasses._core.record.Layout`, and patching
either path patches the one module. Nothing is imported until an old path is: the finder costs
every other import one dictionary lookup.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import MappingProxyType, ModuleType

MOVED = MappingProxyType(
    {
        "jax_dataclasses._builder": "jax_dataclasses._core.builder",
        "jax_dataclasses._codegen": "jax_dataclasses._core.codegen",
        "jax_dataclasses._construct": "jax_dataclasses._core.construct",
        "jax_dataclasses._record": "jax_dataclasses._core.record",
        "jax_dataclasses._frozen": "jax_dataclasses._core.frozen",
        "jax_dataclasses._defaults": "jax_dataclasses._core.defaults",
        "jax_dataclasses._static_values": "jax_dataclasses._core.static_values",
        "jax_dataclasses._printing": "jax_dataclasses._core.printing",
        "jax_dataclasses._forms": "jax_dataclasses._field_declarations.forms",
        "jax_dataclasses._declarations": "jax_dataclasses._field_declarations.reader",
        "jax_dataclasses._scope": "jax_dataclasses._field_declarations.scope",
        "jax_dataclasses._serialization": "jax_dataclasses._checkpoints.serialization",
        "jax_dataclasses._evolution": "jax_dataclasses._checkpoints.evolution",
        "jax_dataclasses._export": "jax_dataclasses._checkpoints.export",
        "jax_dataclasses._sharding": "jax_dataclasses._sharding_layouts.vocabulary",
        "jax_dataclasses._sharding_rules": "jax_dataclasses._sharding_layouts.rules",
        "jax_dataclasses._sharded_trees": "jax_dataclasses._sharding_layouts.trees",
        "jax_dataclasses._sharding_checks": "jax_dataclasses._sharding_layouts.checks",
        "jax_dataclasses._explain": "jax_dataclasses._diagnostics.explain",
        "jax_dataclasses._recompiles": "jax_dataclasses._diagnostics.recompiles",
        "jax_dataclasses._enforced_annotations": "jax_dataclasses._compat.enforced_annotations",
    }
)
"""Each module's path before issue 39 -> its path now (the same table as the rewrite script
that moved the imports, /work/prompts/house_rewrite.py in the issue)."""


class MovedModules(MetaPathFinder, Loader):
    """The `sys.meta_path` finder of the old paths, and their loader: the module it creates is
    the one imported at the new path, left as it is (its name, spec and file stay the new
    ones)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None, /
    ) -> ModuleSpec | None:
        new = MOVED.get(fullname)
        return None if new is None else ModuleSpec(fullname, self, loader_state=new)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(spec.loader_state)
        spec.loader_state = module.__spec__  # The import system sets `spec` on the module next.
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Gives the module back its own spec; the rest the import system left as it was."""
        spec = module.__spec__
        module.__spec__ = spec.loader_state if spec is not None else None


def install() -> None:
    """Puts the finder first on `sys.meta_path`, once per interpreter (the package's
    `__init__` calls it)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
