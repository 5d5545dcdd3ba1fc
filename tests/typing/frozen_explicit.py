"""`@pytree_dataclass(frozen=True)`: checkers then refuse every assignment, even in a block."""

from typing import assert_type

import jax
from _arrays import ones

import jax_dataclasses as jdc


@jdc.pytree_dataclass(frozen=True)
class Frozen:
    value: jax.Array
    size: jdc.Static[int] = 1


frozen = Frozen(ones(2))
assert_type(jdc.replace(frozen, size=2), Frozen)
assert_type(hash(frozen.size), int)


def rejected(frozen: Frozen) -> None:
    """Never called."""
    frozen.size = 2  # E: mypy[misc] pyright[reportAttributeAccessIssue]
    with jdc.copy_and_mutate(frozen) as m:
        m.size = 2  # E: mypy[misc] pyright[reportAttributeAccessIssue]
