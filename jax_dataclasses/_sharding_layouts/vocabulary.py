"""What the sharding modules share: the vocabulary of meshes, rules and defaults, and a class's
`Sharded` declarations as the class stores them.

A field declares how its array is laid out over a device mesh in its annotation, as `Static`
declares a static field: `w: jdc.Sharded[jax.Array, "embed", "mlp"]` (`_field_declarations.forms.Sharded`), one
logical axis name (or None, or a tuple of names) per dimension; on a field holding a pytree
dataclass, the axes that stack its layers. The declarations are read with every other
declaration of the class, once, by the package's one reader (`_field_declarations.reader`), and stored with
the class: `class_declarations` reads them from there. The trees made from them
(`partition_specs`, `shardings`, ...) are in `_sharding_layouts.trees`, the rules that turn logical
names into mesh axes in `_sharding_layouts.rules`, the checks and constraints in `_sharding_layouts.checks`
(docs/design/sharding.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

from jax.sharding import AbstractMesh, Mesh, PartitionSpec

from jax_dataclasses._core.record import Layout, layout_of
from jax_dataclasses._field_declarations.forms import AxisEntry
from jax_dataclasses._tree_api import KeyPath

AnyMesh: TypeAlias = Mesh | AbstractMesh
"""A concrete mesh, or an abstract one (`jax.sharding.AbstractMesh`): axis names and sizes."""
MeshAxes: TypeAlias = str | tuple[str, ...] | None
"""What a rule maps a logical name to: a mesh axis, several, or None (not sharded)."""
Rules: TypeAlias = Mapping[str, MeshAxes] | Sequence[tuple[str, MeshAxes]] | Sequence[list[Any]]
"""`{"embed": None, "mlp": "model"}`, flax's `[("embed", None), ("mlp", "model")]`, or the
same as lists of lists, as JSON and YAML configs load them."""
Default: TypeAlias = PartitionSpec | Callable[[KeyPath, Any], PartitionSpec]
"""What an undeclared leaf gets: a spec in mesh axes, or a function of (key path, leaf)."""

REPLICATED: PartitionSpec = cast("Callable[..., PartitionSpec]", PartitionSpec)()


@dataclasses.dataclass(frozen=True)
class FieldAxes:
    """A field's declared axes, and where they were declared (for messages)."""

    axes: tuple[AxisEntry, ...]
    owner: str
    field: str

    @property
    def where(self) -> str:
        return f"field {self.field!r} of {self.owner}"


def class_declarations(cls: type) -> dict[str, FieldAxes]:
    """The declared fields of pytree dataclass `cls` (its fields annotated `Sharded`), as the
    class stores them (a class with names still pending decides them first)."""
    layout = cast(Layout, layout_of(cls))  # The walks meet only registered classes here.
    return {
        d.name: FieldAxes(d.axes, cls.__qualname__, d.name)
        for d in layout.declarations
        if d.axes is not None
    }
