"""A griffe extension for the API reference: module attributes that set their own `__doc__`.

`jdc.Static` is a `typing.Annotated` alias. Its docstring is assigned at run time
(`Static.__doc__ = ...`), so that `help(jdc.Static)` shows it; griffe reads source and would
not see it. This extension gives such attributes the docstring they have at run time.
"""

from __future__ import annotations

import importlib
from typing import Any

import griffe


class RuntimeDocstrings(griffe.Extension):
    """Fill in the docstring of an attribute whose value carries its own `__doc__`."""

    def on_attribute_instance(self, *, attr: griffe.Attribute, **kwargs: Any) -> None:
        if attr.docstring is not None or attr.parent is None or not attr.parent.is_module:
            return
        module = importlib.import_module(attr.parent.path)
        value = getattr(module, attr.name, None)
        doc = vars(value).get("__doc__") if hasattr(value, "__dict__") else None
        if isinstance(doc, str):
            attr.docstring = griffe.Docstring(doc, parent=attr)
