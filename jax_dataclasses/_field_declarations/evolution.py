"""How a class's checkpoints changed, as it declares it: its `Evolution` (its bases' and its own
`__jdc_evolution__`), read once when the class is built and checked against its fields, and
which of its fields 1.6's checkpoints held (docs/design/checkpoints.md). Restoring, which follows the
declaration, is the checkpoints' (`_checkpoints.evolution`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jax_dataclasses._field_declarations.forms import EVOLUTION_ATTR, Evolution
from jax_dataclasses._field_declarations.reader import Declaration


def declared_evolution(
    cls: type, declarations: tuple[Declaration, ...], inherited: Evolution
) -> Evolution:
    """The `Evolution` of `cls`: `inherited` (its registered bases', merged) and its own
    `__jdc_evolution__`, checked against its fields. Called by the class builder only, when it
    builds the class (and again once pending names are decided: a field may have become
    static)."""
    evolution = inherited
    own: object = cls.__dict__.get(EVOLUTION_ATTR)
    if own is not None:
        if not isinstance(own, Evolution):
            raise TypeError(
                f"{EVOLUTION_ATTR} of {cls.__qualname__} is {own!r}, not a jdc.Evolution: write "
                f"{EVOLUTION_ATTR} = jdc.Evolution(added=[...], renamed={{...}}, removed=[...])."
            )
        evolution = evolution | own
    if evolution:
        _check(cls, evolution, {d.name: d for d in declarations})
    return evolution


def _check(cls: type, evolution: Evolution, declared: Mapping[str, Declaration]) -> None:
    """A `TypeError` naming the class and field for a declaration that cannot hold."""
    name = cls.__qualname__
    fields: Mapping[str, dataclasses.Field[Any]] = getattr(cls, "__dataclass_fields__")  # noqa: B009
    problems: list[str] = []
    for field in (*evolution.added, *evolution.renamed):
        if field not in declared:
            problems.append(f"{field!r} is declared added or renamed, but is not a field of {name}")
        elif declared[field].static is not None:
            problems.append(
                f"field {field!r} of {name} is static: static fields are not saved in "
                "checkpoints, so it has nothing to declare (the target gives its value)"
            )
    for field in evolution.added:
        f = fields.get(field)
        no_default = dataclasses.MISSING
        if f is not None and f.default is no_default and f.default_factory is no_default:
            problems.append(f"field {field!r} of {name} is declared added, but has no default")
    earlier = [old for olds in evolution.renamed.values() for old in olds]
    for old in sorted({*earlier, *evolution.removed}):
        if old in declared and declared[old].static is None:  # A static field is never saved.
            kind = "removed" if old in evolution.removed else "an earlier name"
            problems.append(
                f"{old!r} is declared {kind}, but is a field of {name}: a checkpoint's entry "
                "of that name could then mean either"
            )
        elif earlier.count(old) + evolution.removed.count(old) > 1:
            problems.append(
                f"{old!r} is declared more than once for {name} (an earlier name of several "
                "fields, or also removed)"
            )
    if evolution.v1_6_order is not None:
        saved = [n for n in saved_children_1_6(cls, declared.values()) if n not in evolution.added]
        order = evolution.v1_6_order
        if sorted(order) != sorted(saved):
            problems.append(
                f"v1_6_order {order!r} of {name} is not an order of the fields 1.6 saved "
                f"({names(saved)}: those `__init__` takes, less the static and added ones)"
            )
    if problems:
        raise TypeError(
            f"the {EVOLUTION_ATTR} of {name} cannot hold: {'; '.join(problems)}. Declare only "
            "what changed: fields added (with a default), renamed (new name: earlier name) and "
            "removed (names that are no longer fields)."
        )


def saved_children_1_6(cls: type, declarations: Iterable[Declaration]) -> tuple[str, ...]:
    """The fields of `cls` that 1.6 saved, in field order: those `__init__` takes that 1.6 did
    not see as static (`Declaration.legacy_static`: its own marker, `Static[...]` through a
    module-level name; never a function's local alias under the future import)."""
    fields = getattr(cls, "__dataclass_fields__")  # noqa: B009
    return tuple(d.name for d in declarations if fields[d.name].init and not d.legacy_static)


def names(items: Sequence[object]) -> str:
    return ", ".join(repr(item) for item in items)
