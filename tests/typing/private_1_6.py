"""1.6's private modules, reached as attributes after `import jax_dataclasses` (as 1.6 bound
them): code built on 1.6's private API type-checks unchanged."""

import jax_dataclasses
import jax_dataclasses as jdc

Mutability = jax_dataclasses._copy_and_mutate._Mutability  # pyright: ignore[reportPrivateUsage]
marker: str = jdc._dataclasses.JDC_STATIC_MARKER  # pyright: ignore[reportPrivateUsage]
assert Mutability.FROZEN.name == "FROZEN"


def not_a_module() -> str:
    """Never called: other private names are not made up."""
    return jdc._no_such_module  # E: mypy[attr-defined, no-any-return] pyright[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
