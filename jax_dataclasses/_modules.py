"""The global namespace of a module, by name: what a class's generated code and its string
annotations see as globals (as for methods written in the class body)."""

from __future__ import annotations

import sys
from typing import Any


def module_globals(name: str) -> dict[str, Any]:
    """The namespace of the module called `name`, or `{}` when none is imported under that
    name (a class made by `exec` or `type()` may name a module that does not exist)."""
    module = sys.modules.get(name)
    return vars(module) if module is not None else {}
