"""The one place where we set attributes on a user's class.

Every attribute this package puts on a class, or takes back, goes through `install`: the
generated methods and hooks, the registration token, the stand-ins for JAX-array defaults
while `dataclasses` runs, and the generated docstring. A reader finds here, by its callers,
everything a decorated class carries that its body did not define.
"""

from __future__ import annotations

from collections.abc import Mapping


def install(cls: type, attributes: Mapping[str, object]) -> None:
    """Set each of `attributes` on `cls`."""
    for name, value in attributes.items():
        setattr(cls, name, value)
