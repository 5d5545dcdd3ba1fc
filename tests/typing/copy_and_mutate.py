"""`with copy_and_mutate(obj) as m:` yields `obj`'s type; assignments to its fields type-check."""

from typing import assert_type

import jax
from _arrays import ones, zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Layer:
    weight: jax.Array
    width: jdc.Static[int]


@jdc.pytree_dataclass
class Model:
    layers: list[Layer]
    name: jdc.Static[str] = "model"


model = Model([Layer(zeros(2), 2), Layer(zeros(3), 3)])

with jdc.copy_and_mutate(model) as edited:
    assert_type(edited, Model)
    edited.name = "edited"
    edited.layers[0].weight = ones(2)
    edited.layers[1].width = 4
assert_type(edited, Model)

with jdc.copy_and_mutate(model, validate=False) as reshaped:
    reshaped.layers = [Layer(ones(5), 5)]

with jdc.copy_and_mutate([model, model]) as both:
    assert_type(both, list[Model])
    both[0].name = "first"

with jdc.copy_and_mutate({"a": Layer(ones(1), 1)}) as by_name:
    assert_type(by_name, dict[str, Layer])
    by_name["a"].weight = zeros(1)


def rejected(model: Model) -> None:
    """Never called: inside the block, assignments are checked against the field types."""
    with jdc.copy_and_mutate(model) as m:
        m.name = 3  # E: mypy[assignment] pyright[reportAttributeAccessIssue]
        m.layers[0].width = "wide"  # E: mypy[assignment] pyright[reportAttributeAccessIssue]
        m.missing = 1  # E: mypy[attr-defined] pyright[reportAttributeAccessIssue]
    jdc.copy_and_mutate(model, validate="yes")  # E: mypy[arg-type] pyright[reportArgumentType]


def accepted_statically_refused_at_run_time(model: Model) -> None:
    """Never called. Checkers see the class as a non-frozen dataclass (so the assignments in the
    blocks above type-check); this assignment outside a block raises FrozenInstanceError."""
    model.name = "not in a block"
