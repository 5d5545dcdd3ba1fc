"""Methods that return `Self` built with `replace` keep the subclass's type."""

from typing import Self, assert_type

import jax
from _arrays import zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Counter:
    count: jax.Array
    step: jdc.Static[int] = 1

    def increment(self) -> Self:
        return jdc.replace(self, count=self.count + self.step)

    def with_step(self, step: int) -> Self:
        return jdc.replace(self, step=step)

    @classmethod
    def zero(cls) -> Self:
        return cls(zeros())


@jdc.pytree_dataclass
class NamedCounter(Counter):
    name: jdc.Static[str] = "counter"


assert_type(Counter.zero().increment(), Counter)
named = NamedCounter(zeros(), name="n")
assert_type(named.increment(), NamedCounter)
assert_type(named.with_step(2).increment().name, str)
assert_type(NamedCounter.zero(), NamedCounter)


class Wrong:
    """Never instantiated: `replace` on `self` is `Self`, not another class."""

    @jdc.pytree_dataclass
    class Inner:
        value: int

        def bad(self) -> Self:
            return jdc.replace(self, value="x")  # E: mypy[arg-type]

        def also_bad(self) -> int:
            return jdc.replace(self, value=1)  # E: mypy[return-value] pyright[reportReturnType]
