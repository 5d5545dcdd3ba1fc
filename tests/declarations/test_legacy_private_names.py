"""jax_dataclasses 1.6's private `_dataclasses` names, as published projects use them: they
copied 1.6's field classification (`get_type_hints` or `get_type_hints_partial`, then
`JDC_STATIC_MARKER in hint.__metadata__` or in the field's metadata) and must find our static
fields static."""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Annotated

import jax
import pytest
from helpers import statics
from typing_extensions import get_type_hints

import jax_dataclasses as jdc
from jax_dataclasses._dataclasses import JDC_STATIC_MARKER, FieldInfo, get_type_hints_partial

if TYPE_CHECKING:
    from collections import OrderedDict as OnlyForCheckers


def field_info_as_1_6(cls: type, partial: bool) -> FieldInfo:
    """How downstream code classifies fields with 1.6's private names."""
    hints = (
        get_type_hints_partial(cls, include_extras=True)
        if partial
        else get_type_hints(cls, include_extras=True)
    )
    children: list[str] = []
    static: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint = hints[f.name]
        if JDC_STATIC_MARKER in getattr(hint, "__metadata__", ()) or f.metadata.get(
            JDC_STATIC_MARKER, False
        ):
            static.append(f.name)
        else:
            children.append(f.name)
    return FieldInfo(children, static)


with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    @jdc.pytree_dataclass
    class Lens:
        z: jax.Array
        focal: jdc.Static[float] = 1.0
        legacy: int = jdc.static_field(default=2)
        marked: Annotated[int, "__jax_dataclasses_static_field__"] = 3
        semi: float = 0.5


@jdc.pytree_dataclass
class Later:
    x: jax.Array
    meta: OnlyForCheckers | None = None  # A name 1.6's partial hints stand in for.
    n: jdc.Static[int] = 0


@pytest.mark.parametrize("partial", [False, True])
def test_1_6_field_classification_finds_our_static_fields(partial: bool) -> None:
    info = field_info_as_1_6(Lens, partial)
    assert info.static_field_names == list(statics(Lens)) == ["focal", "legacy", "marked"]
    assert info.child_node_field_names == ["z", "semi"]


def test_partial_type_hints_stand_in_for_names_that_cannot_be_resolved() -> None:
    with pytest.raises(NameError):
        get_type_hints(Later, include_extras=True)
    info = field_info_as_1_6(Later, partial=True)
    assert info == FieldInfo(["x", "meta"], ["n"])
    assert get_type_hints_partial(Later, include_extras=True)["n"] == jdc.Static[int]


def test_the_marker_is_1_6s_string_and_static_carries_it() -> None:
    assert JDC_STATIC_MARKER == "__jax_dataclasses_static_field__"
    assert JDC_STATIC_MARKER in jdc.Static[int].__metadata__  # type: ignore[attr-defined]
