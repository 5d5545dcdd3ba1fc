"""A griffe extension for the API reference: module attributes that set their own `__doc__`.

`jdc.Static` is a `typing.Annotated` alias. Its docstring is assigned at run time
(`Static.__doc__ = ...`), so that `help(jdc.Static)` shows it; griffe reads source and would
not see it. This extension gives such attributes the docstring they have at run time.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

import griffe


class RuntimeDocstrings(griffe.Extension):
    """Fill in the docstring of an attribute whose value carries its own `__doc__`."""

    def on_attribute_instance(self, *, attr: griffe.Attribute, **kwargs: Any) -> None:
        """Give `attr` the `__doc__` its value carries in its own instance dictionary."""
        if attr.docstring is not None or attr.parent is None or not attr.parent.is_module:
            return
        try:
            module = importlib.import_module(attr.parent.path)
        except ImportError:
            return  # Only source is available: griffe's reading stands.
        value = getattr(module, attr.name, None)
        if isinstance(value, type | types.GenericAlias) or not hasattr(value, "__dict__"):
            return  # A class, or `tuple[int, ...]`: `vars` would give its type's docstring.
        doc = vars(value).get("__doc__")
        if isinstance(doc, str):
            attr.docstring = griffe.Docstring(doc, parent=attr)
